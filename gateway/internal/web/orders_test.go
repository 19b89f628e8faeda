package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/httpapi"
	"flashsale/gateway/internal/queue"
	"flashsale/gateway/internal/ratelimit"
	"flashsale/tools/testenv"
)

const ordersToken = "admin-token-0123456789"

// statusJSON is the order service's answer as its contract gives it.
func statusJSON(saleID, itemID int64) string {
	return fmt.Sprintf(`{"saleId":%d,"ordersByStatus":{"PENDING":3,"PAID":7,"EXPIRED":2,"CANCELLED":1,"REJECTED":0},
		"items":[{"itemId":%d,"ordersByStatus":{"PENDING":3,"PAID":7,"EXPIRED":2,"CANCELLED":1,"REJECTED":0}}],
		"consumerLag":{"total":42,"partitions":[{"partition":0,"committed":100,"end":142,"lag":42}],"error":""},
		"reconcile":{"at":"2026-12-24T10:00:05Z","verdict":"OK","repaired":false,"summary":"stock and holders match"}}`, saleID, itemID)
}

// fakeOrdersvc is a real HTTP server on loopback answering the order
// service's status endpoint the way the contract says; what is under test
// is the gateway's client of it (auth, timeout, cache, failure reporting).
type fakeOrdersvc struct {
	srv      *httptest.Server
	requests atomic.Int64
	delay    atomic.Int64                  // ns before answering
	status   atomic.Int64                  // 0: answer per the contract
	hold     atomic.Pointer[chan struct{}] // when set, answers wait until it is closed
}

func newFakeOrdersvc(t *testing.T, itemOf func(int64) int64) *fakeOrdersvc {
	f := &fakeOrdersvc{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if h := f.hold.Load(); h != nil {
			select {
			case <-*h:
			case <-r.Context().Done():
				return
			}
		}
		if d := time.Duration(f.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		var sale int64
		if _, err := fmt.Sscanf(r.URL.Path, "/admin/sales/%d/status", &sale); err != nil || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+ordersToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if code := int(f.status.Load()); code != 0 {
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, statusJSON(sale, itemOf(sale)))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOrdersvc) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// queuedSale writes a queued sale with one item, opening in a minute, and
// reads it into a catalog.
func queuedSale(t *testing.T) (*catalog.Catalog, int64, int64) {
	t.Helper()
	ctx := testenv.Context(t)
	pool := testenv.Pool(t)
	var sale, item int64
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at, queue_enabled, admission_rate)
		VALUES ($1, now() + interval '1 minute', now() + interval '1 hour', true, 25) RETURNING id`, t.Name()).Scan(&sale); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
		VALUES ($1, 'sku-1', 'item one', 9.99, 10) RETURNING id`, sale).Scan(&item); err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(pool, []byte("dashboard-gate-key-0123456789abcdef"))
	if err := cat.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return cat, sale, item
}

func dashboardFor(t *testing.T, cat *catalog.Catalog, q *queue.Queue, orders *OrdersClient) *Dashboard {
	t.Helper()
	d, err := NewDashboard(Sources{Catalog: cat, Queue: q, Orders: orders, Gatherer: gatewayRegistry(t),
		PurchaseLimits: httpapi.NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 100),
		QueueLimits:    httpapi.NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 100),
		PollLimits:     httpapi.NewPollLimits(ratelimit.Rule{}, 100),
		AdminToken:     []byte(ordersToken)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The dashboard's state carries the order service's figures for the sale,
// the queue's length from Redis, and still renders when the order service
// fails in any of the ways it can.
func TestDashboardOrdersAndQueue(t *testing.T) {
	cat, sale, item := queuedSale(t)
	testenv.Require(t, testenv.RedisAddr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	q := queue.New(rc, time.Minute)
	ctx := testenv.Context(t)
	s, _ := cat.Sale(sale)
	for _, u := range []string{"ann", "ben", "cat", "ann"} {
		if _, err := q.Join(ctx, sale, s.StartsAt, true, u); err != nil {
			t.Fatal(err)
		}
	}
	f := newFakeOrdersvc(t, func(int64) int64 { return item })
	oc := NewOrdersClient(f.addr(), []byte(ordersToken), 300*time.Millisecond)
	d := dashboardFor(t, cat, q, oc)

	st := d.State(ctx, time.Now(), []int64{sale, 999_999_999_999})
	if len(st.Sales) != 1 || st.Sales[0].ID != sale {
		t.Fatalf("sales %+v, want only sale %d (an unknown id is left out)", st.Sales, sale)
	}
	v := st.Sales[0]
	if v.Queue.Waiting == nil || *v.Queue.Waiting != 3 || v.Queue.Joined == nil || *v.Queue.Joined != 3 {
		t.Errorf("queue %+v, want 3 waiting of 3 joined", v.Queue)
	}
	if v.Orders == nil || v.Orders.SaleOrders == nil {
		t.Fatalf("orders %+v, want the order service's answer", v.Orders)
	}
	o := v.Orders
	if o.Unavailable != "" || o.OrdersByStatus["PAID"] != 7 || o.OrdersByStatus["PENDING"] != 3 ||
		o.ConsumerLag.Total != 42 || len(o.ConsumerLag.Partitions) != 1 || o.ConsumerLag.Partitions[0].End != 142 ||
		len(o.Items) != 1 || o.Items[0].ItemID != item || o.Items[0].OrdersByStatus["EXPIRED"] != 2 ||
		o.Reconcile == nil || o.Reconcile.Verdict != "OK" || !o.Reconcile.At.Equal(time.Date(2026, 12, 24, 10, 0, 5, 0, time.UTC)) {
		t.Errorf("orders %+v", o)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"orders":{"saleId":`, `"consumerLag":{"total":42,`, `"waiting":3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("state JSON lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"unavailable"`) {
		t.Errorf("state JSON says unavailable while the order service answers: %s", b)
	}

	// Within a second the answer comes from the cache.
	before := f.requests.Load()
	d.State(ctx, time.Now(), []int64{sale})
	if got := f.requests.Load() - before; got != 0 {
		t.Errorf("%d requests to the order service within a second of the last, want 0", got)
	}

	// Each failure leaves the rest of the state intact and says why.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there any more
	failures := []struct {
		name   string
		client *OrdersClient
		set    func()
		reason string
	}{
		{"wrong admin token", NewOrdersClient(f.addr(), []byte("not-the-admin-token-0000"), 300*time.Millisecond), func() {}, "refused the admin token (401)"},
		{"order service down", NewOrdersClient(deadAddr, []byte(ordersToken), 300*time.Millisecond), func() {}, deadAddr + ": "},
		{"order service too slow", oc, func() { f.delay.Store(int64(2 * time.Second)) }, "did not answer within 300ms"},
		{"order service failing", oc, func() { f.delay.Store(0); f.status.Store(500) }, "answered 500"},
		{"order service without the endpoint", oc, func() { f.status.Store(404) }, "404"},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			tc.set()
			tc.client.ttl = 0 // no cached answer
			d := dashboardFor(t, cat, q, tc.client)
			st := d.State(ctx, time.Now(), []int64{sale})
			if len(st.Sales) != 1 || len(st.Sales[0].Items) != 1 || st.Sales[0].Queue.Waiting == nil {
				t.Fatalf("state %+v lost the gateway's own figures", st)
			}
			o := st.Sales[0].Orders
			if o == nil || o.SaleOrders != nil || !strings.Contains(o.Unavailable, tc.reason) {
				t.Fatalf("orders %+v, want unavailable with %q", o, tc.reason)
			}
			b, _ := json.Marshal(o)
			if !strings.HasPrefix(string(b), `{"unavailable":"`) {
				t.Errorf("orders JSON %s, want only the unavailable reason", b)
			}
		})
	}
}

// Callers during one fetch share it (or find its answer cached); a read
// after the cache's second asks again; a caller whose context ends does
// not wait for a fetch in flight.
func TestOrdersClientSharesAndExpires(t *testing.T) {
	f := newFakeOrdersvc(t, func(int64) int64 { return 1 })
	hold := make(chan struct{})
	f.hold.Store(&hold)
	c := NewOrdersClient(f.addr(), []byte(ordersToken), 5*time.Second)
	c.ttl = time.Minute
	ctx := testenv.Context(t)
	done := make(chan OrdersState)
	for range 8 {
		go func() { done <- c.Sale(ctx, 5) }()
	}
	for f.requests.Load() == 0 { // the first caller's request reached the server
		time.Sleep(5 * time.Millisecond)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if o := c.Sale(short, 5); o.SaleOrders != nil || !strings.Contains(o.Unavailable, "context canceled") {
		t.Fatalf("a cancelled caller during a fetch got %+v, want unavailable: context canceled", o)
	}
	close(hold)
	for range 8 {
		if o := <-done; o.SaleOrders == nil || o.SaleID != 5 {
			t.Fatalf("answer %+v", o)
		}
	}
	if got := f.requests.Load(); got != 1 {
		t.Fatalf("%d requests for 8 callers within the cache's lifetime, want 1", got)
	}
	c.ttl = 0
	if o := c.Sale(ctx, 5); o.SaleOrders == nil {
		t.Fatalf("answer %+v", o)
	}
	if got := f.requests.Load(); got != 2 {
		t.Fatalf("%d requests after the cache expired, want 2", got)
	}
}
