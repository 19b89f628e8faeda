package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// openSaleNow creates a sale open now, without a queue, with one unit, and
// waits until the gateway serves its purchase path.
func openSaleNow(t *testing.T, st *harness.Stack, name string) (saleID, itemID int64) {
	t.Helper()
	ctx := testenv.Context(t)
	req, _ := json.Marshal(map[string]any{
		"name": name, "startsAt": time.Now().Add(-time.Second), "endsAt": time.Now().Add(time.Hour),
		"paymentTtlSeconds": 600,
		"items":             []map[string]any{{"productId": "sku-lamp", "name": "Desk lamp", "price": "25.00", "quantity": 1}},
	})
	code, body, _, err := harness.Do(ctx, "POST", st.AdminURL+"/admin/sales", harness.AdminToken, req)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create sale: %d %s %v", code, body, err)
	}
	var sale struct {
		ID    int64 `json:"id"`
		Items []struct {
			ID int64 `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &sale); err != nil || len(sale.Items) != 1 {
		t.Fatalf("create sale answer %s: %v", body, err)
	}
	code, body, _, err = harness.Do(ctx, "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", st.AdminURL, sale.ID), harness.AdminToken, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("load stock: %d %s %v", code, body, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body, _, err = harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d", st.GatewayURL, sale.ID), "", nil)
		var info struct {
			PurchasePath string `json:"purchasePath"`
		}
		if err == nil && code == 200 && json.Unmarshal(body, &info) == nil && info.PurchasePath != "" {
			return sale.ID, sale.Items[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served sale %d: %d %s %v", sale.ID, code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropPurchaseAnswers makes the page's purchase requests reach the shop
// but lose their answer, as a proxy or a mobile network that cuts the
// connection after the request went out would: the page sees a network
// error for a purchase that was accepted.
const dropPurchaseAnswers = `const orig = window.fetch;
window.fetch = function (url, opts) {
  if (String(url).endsWith("/purchase")) {
    return orig(url, opts).then(() => { throw new TypeError("Failed to fetch"); });
  }
  return orig(url, opts);
};`

// A shopper's Buy is accepted but its answer is lost: the page asks the
// shop which order she holds, shows "Reserved — pay before HH:MM:SS" with
// Pay, and the payment goes through. Opened again, the page finds the
// order by itself.
func TestSalePageRecoversALostAnswer(t *testing.T) {
	b := openBrowser(t)
	st := harness.Start(t, harness.Options{})
	ctx := testenv.Context(t)
	saleID, itemID := openSaleNow(t, st, "Lamp drop")
	tok := shopperToken(t, t.Name()+"-alice")
	page := fmt.Sprintf("%s/sale/?sale=%d", st.GatewayURL, saleID)
	wait := waiter(t, b)
	buy := fmt.Sprintf(`document.querySelector("#item-%d button.buy")`, itemID)

	if err := b.Navigate(ctx, page+"#token="+tok); err != nil {
		t.Fatal(err)
	}
	wait(10*time.Second, buy+" && !"+buy+".disabled")
	if err := b.Exec(ctx, dropPurchaseAnswers, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, fmt.Sprintf("#item-%d button.buy", itemID)); err != nil {
		t.Fatal(err)
	}
	wait(15*time.Second, `document.getElementById("order-status").textContent === "PENDING"`)
	wait(3*time.Second, `/^Reserved — pay before /.test(document.getElementById("status").textContent) && /\((09|10):\d\d left\)/.test(document.getElementById("order-deadline").textContent) && !document.getElementById("pay").disabled`)

	// The order the page found is the one the shop holds for her.
	code, body, _, err := harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d/order", st.GatewayURL, saleID), tok, nil)
	var held struct{ OrderID string }
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &held) != nil {
		t.Fatalf("my order: %d %s %v", code, body, err)
	}
	var shown string
	if err := b.Exec(ctx, `return document.getElementById("order-id").textContent;`, &shown); err != nil {
		t.Fatal(err)
	}
	if shown != held.OrderID {
		t.Fatalf("the page shows order %q, the shop holds %q for her", shown, held.OrderID)
	}
	screenshot(t, b, "sale-recovered.png")

	if err := b.Click(ctx, "#pay"); err != nil {
		t.Fatal(err)
	}
	wait(10*time.Second, `document.getElementById("order-status").textContent === "PAID"`)

	// Opened again (a reload after the lost answer): the page asks and
	// shows her order without a purchase.
	if err := b.Navigate(ctx, page+"&again=1#token="+tok); err != nil {
		t.Fatal(err)
	}
	wait(10*time.Second, `document.getElementById("order-status").textContent === "PAID" && document.getElementById("order-id").textContent === "`+held.OrderID+`"`)
}
