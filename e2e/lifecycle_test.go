package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// lifecycleEnv: a fast sweeper, and no per-user purchase limit (shoppers
// here retry on purpose).
var lifecycleEnv = map[string]string{
	"FLASHSALE_EXPIRY_INTERVAL":     "100ms",
	"FLASHSALE_LIMIT_PURCHASE_USER": "off",
}

// openShortSale is openSale with a payment window of ttlSeconds.
func openShortSale(t *testing.T, s *harness.Stack, quantity, ttlSeconds int) (saleID, itemID int64, purchaseURL string) {
	t.Helper()
	ctx := testenv.Context(t)
	req, _ := json.Marshal(map[string]any{
		"name": t.Name(), "startsAt": time.Now().Add(-time.Second), "endsAt": time.Now().Add(time.Hour),
		"paymentTtlSeconds": ttlSeconds,
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
	code, body, _, err = harness.Do(ctx, "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", s.AdminURL, sale.ID), harness.AdminToken, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("load stock: %d %s %v", code, body, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, _, err = harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d", s.GatewayURL, sale.ID), "", nil)
		var info struct {
			PurchasePath string `json:"purchasePath"`
		}
		if err == nil && code == 200 && json.Unmarshal(body, &info) == nil && info.PurchasePath != "" {
			return sale.ID, sale.Items[0].ID, fmt.Sprintf("%s%s/items/%d/purchase", s.GatewayURL, info.PurchasePath, sale.Items[0].ID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served sale %d: %d %s %v", sale.ID, code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shopper talks to the gateway as one user.
type shopper struct {
	t    *testing.T
	s    *harness.Stack
	user string
	tok  string
}

func newShopper(t *testing.T, s *harness.Stack, name string) *shopper {
	user := t.Name() + "-" + name
	return &shopper{t: t, s: s, user: user, tok: token(t, user)}
}

// buy returns the status and, on 202, the order id.
func (p *shopper) buy(url string) (int, string) {
	p.t.Helper()
	code, body, _, err := harness.Do(testenv.Context(p.t), "POST", url, p.tok, nil)
	if err != nil {
		p.t.Fatalf("%s buys: %v", p.user, err)
	}
	var a struct{ OrderID string }
	if code == http.StatusAccepted && (json.Unmarshal(body, &a) != nil || a.OrderID == "") {
		p.t.Fatalf("%s: 202 without an order id: %s", p.user, body)
	}
	return code, a.OrderID
}

// order calls the order endpoint (action "" = GET) and returns the status
// code and the order's status or the error code.
func (p *shopper) order(id, action, body string) (int, string) {
	p.t.Helper()
	method, url := "GET", p.s.GatewayURL+"/api/flash-sales/orders/"+id
	var b []byte
	if action != "" {
		method, url = "POST", url+"/"+action
		if body != "" {
			b = []byte(body)
		}
	}
	code, raw, _, err := harness.Do(testenv.Context(p.t), method, url, p.tok, b)
	if err != nil {
		p.t.Fatalf("%s %s order %s: %v", p.user, method, id, err)
	}
	var r struct{ Status, Error string }
	if err := json.Unmarshal(raw, &r); err != nil {
		p.t.Fatalf("%s %s order %s: not JSON: %s", p.user, method, id, raw)
	}
	return code, r.Status + r.Error
}

// await polls the order until it has status (or one of also), within d.
func (p *shopper) await(id, status string, d time.Duration, also ...string) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		code, got := p.order(id, "", "")
		if code == 200 && (got == status || slices.Contains(also, got)) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("order %s of %s: %d %s after %s, want %s", id, p.user, code, got, d, append([]string{status}, also...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An expired order's unit is sold to a shopper the gateway had already told
// SOLD_OUT, within seconds: the expiry returns the unit after its commit and
// the release clears the gateway's in-process sold-out flag.
func TestExpiredUnitSoldAgain(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: lifecycleEnv})
	_, _, url := openShortSale(t, s, 1, 2)
	a, b := newShopper(t, s, "a"), newShopper(t, s, "b")

	code, orderA := a.buy(url)
	if code != http.StatusAccepted {
		t.Fatalf("A buys: %d, want 202", code)
	}
	for range 2 { // the second answer comes from the gateway's flag
		if code, _ := b.buy(url); code != http.StatusGone {
			t.Fatalf("B buys the sold-out item: %d, want 410", code)
		}
	}
	// With a 2 s payment window the order may already be past it when the
	// consumer stores it (a consumer group still settling after an earlier
	// test): PENDING may never be seen, and need not be.
	a.await(orderA, "PENDING", 10*time.Second, "EXPIRED")
	a.await(orderA, "EXPIRED", 10*time.Second)
	expired := time.Now()

	var orderB string
	for {
		code, orderB = b.buy(url)
		if code == http.StatusAccepted {
			break
		}
		if code != http.StatusGone || time.Since(expired) > 5*time.Second {
			t.Fatalf("B buys again %s after A's order expired: %d, want 202 within 5s", time.Since(expired), code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B bought the returned unit %s after A's order expired", time.Since(expired).Round(time.Millisecond))
	b.await(orderB, "PENDING", 10*time.Second, "EXPIRED")
	// A's payment comes too late: refused, the unit is B's now.
	if code, got := a.order(orderA, "pay", `{"paymentRef":"late-`+orderA+`"}`); code != http.StatusConflict || got != "ORDER_EXPIRED" {
		t.Errorf("A pays after the expiry: %d %s, want 409 ORDER_EXPIRED", code, got)
	}
}

// Buying again after a cancel works end to end, pay and cancel are
// idempotent and owner only, through the gateway's single origin.
func TestCancelAndBuyAgain(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: lifecycleEnv})
	saleID, _, url := openShortSale(t, s, 1, 600)
	a, mallory := newShopper(t, s, "a"), newShopper(t, s, "mallory")

	code, first := a.buy(url)
	if code != http.StatusAccepted {
		t.Fatalf("A buys: %d, want 202", code)
	}
	a.await(first, "PENDING", 10*time.Second)
	ref := `{"paymentRef":"e2e-` + first + `"}`
	steps := []struct {
		name     string
		who      *shopper
		action   string
		body     string
		wantCode int
		want     string
	}{
		{"another shopper reads it", mallory, "", "", 404, "NOT_FOUND"},
		{"another shopper pays it", mallory, "pay", ref, 404, "NOT_FOUND"},
		{"another shopper cancels it", mallory, "cancel", "", 404, "NOT_FOUND"},
		{"the owner cancels", a, "cancel", "", 200, "CANCELLED"},
		{"and again", a, "cancel", "", 200, "CANCELLED"},
		{"then pays", a, "pay", ref, 409, "ORDER_CANCELLED"},
	}
	for _, st := range steps {
		if code, got := st.who.order(first, st.action, st.body); code != st.wantCode || got != st.want {
			t.Errorf("%s: %d %s, want %d %s", st.name, code, got, st.wantCode, st.want)
		}
	}

	// The unit went back with the cancel's answer: A buys again at once.
	code, second := a.buy(url)
	if code != http.StatusAccepted || second == first {
		t.Fatalf("A buys again after the cancel: %d %s, want 202 with a new order", code, second)
	}
	a.await(second, "PENDING", 10*time.Second)
	ref = `{"paymentRef":"e2e-` + second + `"}`
	steps = []struct {
		name     string
		who      *shopper
		action   string
		body     string
		wantCode int
		want     string
	}{
		{"the owner pays", a, "pay", ref, 200, "PAID"},
		{"and again with the same reference", a, "pay", ref, 200, "PAID"},
		{"and with another one", a, "pay", `{"paymentRef":"other-` + second + `"}`, 409, "ALREADY_PAID"},
		{"then cancels", a, "cancel", "", 409, "ORDER_PAID"},
	}
	for _, st := range steps {
		if code, got := st.who.order(second, st.action, st.body); code != st.wantCode || got != st.want {
			t.Errorf("%s: %d %s, want %d %s", st.name, code, got, st.wantCode, st.want)
		}
	}
	if code, _ := mallory.buy(url); code != http.StatusGone {
		t.Errorf("another shopper buys the paid unit: %d, want 410", code)
	}

	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var statuses string
	var sold int
	if err := conn.QueryRow(ctx, `SELECT string_agg(status, ',' ORDER BY created_at), (SELECT sum(sold) FROM flash_sale_item WHERE sale_id = $1)
		FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&statuses, &sold); err != nil {
		t.Fatal(err)
	}
	if statuses != "CANCELLED,PAID" || sold != 1 {
		t.Errorf("orders %s, sold %d; want CANCELLED,PAID and 1", statuses, sold)
	}
}

// SIGTERM to the order service while shoppers keep buying loses nothing:
// it stops accepting, finishes and commits the batch in flight, and exits
// 0; the gateway keeps accepting into Kafka; once restarted, every 202 has
// exactly one row, and nothing persisted before the stop comes back as a
// redelivery.
func TestOrderServiceSIGTERMLosesNothing(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string]string{"FLASHSALE_SHUTDOWN_TIMEOUT": "10s"}})
	const stock, shoppers = 1500, 1500
	saleID, _, url := openShortSale(t, s, stock, 600)
	ctx := testenv.Context(t)

	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		codes    = map[int]int{}
		count    atomic.Int64
	)
	users := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				tok := token(t, fmt.Sprintf("%s-%d", t.Name(), u))
				code, body, _, err := harness.Do(ctx, "POST", url, tok, nil)
				if err != nil {
					t.Errorf("shopper %d: %v", u, err)
					continue
				}
				var a struct{ OrderID string }
				mu.Lock()
				codes[code]++
				if code == http.StatusAccepted && json.Unmarshal(body, &a) == nil {
					accepted[a.OrderID] = true
				}
				mu.Unlock()
				count.Add(1)
			}
		}()
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for count.Load() < shoppers/4 {
			time.Sleep(5 * time.Millisecond)
		}
		code, took := s.Terminate("ordersvc", 20*time.Second)
		t.Logf("ordersvc stopped after %d purchases: exit %d in %s", count.Load(), code, took.Round(time.Millisecond))
		if code != 0 {
			t.Errorf("ordersvc exit code after SIGTERM: %d, want 0:\n%s", code, s.Log("ordersvc"))
		}
	}()
	for u := range shoppers {
		users <- u
	}
	close(users)
	wg.Wait()
	<-stopped
	if len(accepted) != stock || codes[http.StatusAccepted] != stock {
		t.Fatalf("answers %v: %d accepted, want %d", codes, len(accepted), stock)
	}

	s.Restart("ordersvc")
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows >= stock || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	var matched, pending, sold int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDING'),
		(SELECT sold FROM flash_sale_item WHERE sale_id = $1)
		FROM flash_sale_order WHERE sale_id = $1 AND id = ANY($2::uuid[])`, saleID, ids).Scan(&matched, &pending, &sold); err != nil {
		t.Fatal(err)
	}
	if rows != stock || matched != stock || pending != stock || sold != stock {
		t.Fatalf("after the restart: %d rows, %d of the 202s, %d pending, sold %d; want %d each", rows, matched, pending, sold, stock)
	}
	// The restarted service re-read nothing the stopped one had persisted:
	// the offsets of every persisted batch were committed before it exited.
	if n := metricSum(t, s.AdminURL, "flashsale_ordersvc_orders_duplicate_total"); n != 0 {
		t.Errorf("redeliveries after a graceful stop: orders_duplicate_total %v, want 0", n)
	}
}
