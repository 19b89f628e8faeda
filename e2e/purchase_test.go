package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"flashsale/pkg/auth"
	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

type saleCreated struct {
	ID    int64 `json:"id"`
	Items []struct {
		ID int64 `json:"id"`
	} `json:"items"`
}

// openSale creates a sale through the admin API, warms its stock up and
// waits until the gateway serves its purchase path.
func openSale(t *testing.T, s *harness.Stack, quantity int) (saleID, itemID int64, purchasePath string) {
	t.Helper()
	ctx := testenv.Context(t)
	req, _ := json.Marshal(map[string]any{
		"name": t.Name(), "startsAt": time.Now().Add(-time.Second), "endsAt": time.Now().Add(time.Hour),
		"paymentTtlSeconds": 600,
		"items":             []map[string]any{{"productId": "sku-1", "name": "Flash item", "price": "19.99", "quantity": quantity}},
	})
	code, body, _, err := harness.Do(ctx, "POST", s.AdminURL+"/admin/sales", harness.AdminToken, req)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create sale: %d %s %v", code, body, err)
	}
	var sale saleCreated
	if err := json.Unmarshal(body, &sale); err != nil || len(sale.Items) != 1 {
		t.Fatalf("create sale answer %s: %v", body, err)
	}
	// Loading twice must not double the stock. The sale is open, so the
	// second load is refused (it would drop reservations in flight) unless
	// forced.
	for _, load := range []struct {
		query string
		want  int
	}{{"", http.StatusOK}, {"", http.StatusConflict}, {"?force=true", http.StatusOK}} {
		code, body, _, err = harness.Do(ctx, "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock%s", s.AdminURL, sale.ID, load.query), harness.AdminToken, nil)
		if err != nil || code != load.want {
			t.Fatalf("load stock%s: %d %s %v, want %d", load.query, code, body, err, load.want)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, _, err = harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d", s.GatewayURL, sale.ID), "", nil)
		var info struct {
			PurchasePath string `json:"purchasePath"`
			Items        []struct {
				StockLeft *int64 `json:"stockLeft"`
			} `json:"items"`
		}
		if err == nil && code == 200 && json.Unmarshal(body, &info) == nil && info.PurchasePath != "" {
			return sale.ID, sale.Items[0].ID, info.PurchasePath
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served sale %d: %d %s %v", sale.ID, code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func token(t testing.TB, user string) string {
	tok, err := auth.MintHS256(harness.JWTKey, user, "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Thousands of distinct shoppers race for a smaller stock over HTTP through
// both services: 202s == stock == rows == sold, every order id polls.
func TestPurchaseEndToEnd(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	const stockUnits, shoppers = 300, 3000
	saleID, itemID, path := openSale(t, s, stockUnits)
	url := fmt.Sprintf("%s%s/items/%d/purchase", s.GatewayURL, path, itemID)
	ctx := testenv.Context(t)

	type win struct{ user, order string }
	var (
		mu     sync.Mutex
		wins   []win
		counts = map[int]int{}
	)
	// One unit per shopper per sale: the same shopper twice gets the order
	// she already holds (a replay, nothing reserved again). (Once the item
	// is sold out every gateway answers 410 from its in-process flag before
	// looking at who asks, which is what keeps refusals free.)
	first := fmt.Sprintf("%s-first", t.Name())
	code, body, _, err := harness.Do(ctx, "POST", url, token(t, first), nil)
	var a struct{ OrderID, Status string }
	if err != nil || code != http.StatusAccepted || json.Unmarshal(body, &a) != nil {
		t.Fatalf("first purchase: %d %s %v", code, body, err)
	}
	wins = append(wins, win{first, a.OrderID})
	counts[code]++
	code, body, _, _ = harness.Do(ctx, "POST", url, token(t, first), nil)
	var again struct{ OrderID, Status string }
	if code != http.StatusAccepted || json.Unmarshal(body, &again) != nil || again.OrderID != a.OrderID {
		t.Fatalf("same shopper again: %d %s, want 202 with her order %s", code, body, a.OrderID)
	}
	users := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				user := fmt.Sprintf("%s-shopper-%d", t.Name(), u)
				code, body, _, err := harness.Do(ctx, "POST", url, token(t, user), nil)
				if err != nil {
					t.Errorf("shopper %d: %v", u, err)
					continue
				}
				mu.Lock()
				counts[code]++
				if code == http.StatusAccepted {
					var a struct{ OrderID, Status string }
					if err := json.Unmarshal(body, &a); err != nil || a.OrderID == "" || a.Status != "PENDING" {
						t.Errorf("202 body %s", body)
					}
					wins = append(wins, win{user, a.OrderID})
				}
				mu.Unlock()
			}
		}()
	}
	for u := range shoppers - 1 {
		users <- u
	}
	close(users)
	wg.Wait()
	if len(wins) != stockUnits || counts[http.StatusGone] != shoppers-stockUnits {
		t.Fatalf("answers %v: %d accepted, want exactly %d and the rest 410", counts, len(wins), stockUnits)
	}

	// Every accepted order reaches PostgreSQL, once, and sold matches.
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, pending, sold int
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDING') FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&rows, &pending); err != nil {
			t.Fatal(err)
		}
		if rows >= stockUnits || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := conn.QueryRow(ctx, `SELECT sold FROM flash_sale_item WHERE id = $1`, itemID).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	if rows != stockUnits || pending != stockUnits || sold != stockUnits {
		t.Fatalf("PostgreSQL: %d rows, %d pending, sold %d; want %d each", rows, pending, sold, stockUnits)
	}

	// Every order id handed out polls as PENDING for its owner, 404 for others.
	for i, w := range wins {
		code, body, _, err := harness.Do(ctx, "GET", s.GatewayURL+"/api/flash-sales/orders/"+w.order, token(t, w.user), nil)
		var o struct{ Status string }
		if err != nil || code != 200 || json.Unmarshal(body, &o) != nil || o.Status != "PENDING" {
			t.Fatalf("poll order %s as owner: %d %s %v", w.order, code, body, err)
		}
		if i == 0 {
			if code, _, _, _ := harness.Do(ctx, "GET", s.GatewayURL+"/api/flash-sales/orders/"+w.order, token(t, "somebody-else"), nil); code != http.StatusNotFound {
				t.Errorf("poll another shopper's order: %d, want 404", code)
			}
		}
	}
}
