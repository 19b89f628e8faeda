package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"flashsale/pkg/stock"
	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// A gateway SIGKILLed mid-sale cuts shoppers off after the broker took
// their orders. Afterwards every order row's owner learns its id from a
// retried purchase and from the "my order" call, and pays it; nobody holds
// two active orders; reservations the dead gateway never published come
// back by themselves; the audit passes.
func TestGatewayKilledMidSaleEveryOwnerFindsAndPays(t *testing.T) {
	const units, shoppers = 40, 400
	s := harness.Start(t, harness.Options{Env: map[string]string{
		// The abandoned-reservation pass unpaced, as in TestDeadGatewayReservationsComeBack.
		"FLASHSALE_INFLIGHT_WINDOW": "3s", "FLASHSALE_ABANDON_INTERVAL": "1s", "FLASHSALE_ABANDON_READ_RATE": "0",
		"FLASHSALE_LIMIT_PURCHASE_USER": "off", "FLASHSALE_LIMIT_QUEUE_USER": "off"}})
	ctx := testenv.Context(t)
	saleID, itemID, path := openSale(t, s, units)
	url := fmt.Sprintf("%s%s/items/%d/purchase", s.GatewayURL, path, itemID)
	user := func(i int) string { return fmt.Sprintf("%s-%d", t.Name(), i) }

	// Shoppers whose answer is lost for sure: each sends her purchase and
	// hangs up before the answer (a client timeout, a flaky network).
	const impatient = 8
	for i := range impatient {
		hangUp(t, s.GatewayURL, url, token(t, "impatient-"+user(i)))
	}
	// Their orders exist before the kill (else the kill, not the hang-up,
	// would decide their fate): each finds hers with the "my order" call.
	myOrder := fmt.Sprintf("%s/api/flash-sales/%d/order", s.GatewayURL, saleID)
	for i := range impatient {
		for deadline := time.Now().Add(15 * time.Second); ; {
			code, body, _, err := harness.Do(ctx, "GET", myOrder, token(t, "impatient-"+user(i)), nil)
			if err == nil && code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("impatient shopper %d never found her order: %d %s %v", i, code, body, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	var (
		mu       sync.Mutex
		answered = map[string]string{} // order id -> user, every 202 received
		cut      int                   // requests whose answer never came
	)
	firstAccepted := make(chan struct{})
	var once sync.Once
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				code, body, _, err := harness.Do(ctx, "POST", url, token(t, user(i)), nil)
				mu.Lock()
				switch {
				case err != nil:
					cut++
				case code == http.StatusAccepted:
					var a struct{ OrderID string }
					_ = json.Unmarshal(body, &a)
					answered[a.OrderID] = user(i)
					once.Do(func() { close(firstAccepted) })
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range shoppers {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	select {
	case <-firstAccepted:
	case <-time.After(30 * time.Second):
		t.Fatal("no purchase accepted within 30s")
	}
	s.Kill("gateway") // mid-sale: requests in flight lose their answers
	s.Restart("gateway")
	wg.Wait()
	t.Logf("%d answered 202, %d cut off by the kill", len(answered), cut)

	// Wait until the consumer persisted what the broker took and every
	// reservation nobody will pay for is back: Redis holders = active rows.
	pool := pgPool(t, ctx)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	st := stock.New(rc)
	var rows []ownedOrder
	for deadline := time.Now().Add(60 * time.Second); ; {
		r, err := pool.Query(ctx, `SELECT id::text, user_id FROM flash_sale_order WHERE sale_id = $1 AND status = 'PENDING' ORDER BY id`, saleID)
		if err != nil {
			t.Fatal(err)
		}
		rows, err = pgx.CollectRows(r, func(r pgx.CollectableRow) (ownedOrder, error) {
			var x ownedOrder
			return x, r.Scan(&x.id, &x.user)
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := st.Holders(ctx, saleID)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		persisted := true
		for id := range answered {
			if !containsRow(rows, id) {
				persisted = false
			}
		}
		mu.Unlock()
		if persisted && len(h) == len(rows) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %d holders, %d PENDING rows, every 202 persisted %v", len(h), len(rows), persisted)
		}
		time.Sleep(200 * time.Millisecond)
	}

	mu.Lock()
	t.Logf("%d PENDING orders, %d of them answered 202 (%d hung up on, the rest cut off by the kill)", len(rows), len(answered), impatient)
	if lost := len(rows) - len(answered); lost < impatient {
		t.Fatalf("%d orders whose answer was lost, want at least the %d shoppers who hung up", lost, impatient)
	}
	mu.Unlock()

	// Every owner finds her order both ways and pays it.
	for _, r := range rows {
		tok := token(t, r.user)
		code, body, _, err := harness.Do(ctx, "POST", url, tok, nil)
		var a struct{ OrderID, Status string }
		if err != nil || code != http.StatusAccepted || json.Unmarshal(body, &a) != nil || a.OrderID != r.id || a.Status != "PENDING" {
			t.Fatalf("%s retries her purchase: %d %s %v, want 202 PENDING %s", r.user, code, body, err, r.id)
		}
		code, body, _, err = harness.Do(ctx, "GET", myOrder, tok, nil)
		var o struct {
			OrderID, Status string
			ExpiresAt       *time.Time
		}
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &o) != nil || o.OrderID != r.id || o.Status != "PENDING" || o.ExpiresAt == nil {
			t.Fatalf("%s asks for her order: %d %s %v, want 200 PENDING %s with expiresAt", r.user, code, body, err, r.id)
		}
		code, body, _, err = harness.Do(ctx, "POST", s.GatewayURL+"/api/flash-sales/orders/"+r.id+"/pay", tok, []byte(`{"paymentRef":"pay-`+r.id+`"}`))
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s pays %s: %d %s %v", r.user, r.id, code, body, err)
		}
	}
	var twice int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT user_id FROM flash_sale_order WHERE sale_id = $1 AND status IN ('PENDING', 'PAID')
		GROUP BY user_id HAVING count(*) > 1) x`, saleID).Scan(&twice); err != nil || twice != 0 {
		t.Fatalf("%d shoppers hold two active orders (%v)", twice, err)
	}

	// The audit counts every row's owner as told: she learned its id.
	told := map[string]string{}
	for _, r := range rows {
		told[r.id] = r.user
	}
	sale := &clusterSale{t: t, s: s, saleID: saleID, seeds: testenv.RedisAddr(), accepted: told}
	if v := sale.audit(ctx, pool); !v.OK() {
		t.Fatalf("audit: %s", verdictText(v))
	}
}

// hangUp sends a purchase and closes the connection without reading the
// answer: the gateway still runs it to the end (its timeouts derive from
// its own base context), so the shopper holds an order she was never told.
func hangUp(t *testing.T, base, url, tok string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + tok + "\r\nContent-Length: 0\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
}

// ownedOrder is an order row and its owner.
type ownedOrder struct{ id, user string }

func containsRow(rows []ownedOrder, id string) bool {
	for _, r := range rows {
		if r.id == id {
			return true
		}
	}
	return false
}
