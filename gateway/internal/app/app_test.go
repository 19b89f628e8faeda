package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/config"
	"flashsale/gateway/internal/httpapi"
	"flashsale/gateway/internal/ratelimit"
	"flashsale/pkg/auth"
	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/event"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/schema"
	"flashsale/pkg/stock"
	"flashsale/tools/kafkatopic"
	"flashsale/tools/metricdoc"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

var (
	jwtKey  = []byte("test-jwt-key-0123456789abcdef0123456789")
	gateKey = []byte("test-gate-key-0123456789abcdef012345678")
)

// harness is one gateway in-process against the real local stack, with its
// own topic and its own sale.
type harness struct {
	t      *testing.T
	gw     *Gateway
	base   string
	redis  rueidis.Client
	stock  *stock.Store
	saleID int64
	items  []int64
	topic  string
	admin  string // the current gateway's admin listener
	logs   *lockedBuffer
	env    map[string]string // the current gateway's configuration
}

// lockedBuffer collects a gateway's log lines.
type lockedBuffer = testenv.LogBuffer

type harnessOpts struct {
	quantities []int
	startsIn   time.Duration // negative: already open
	brokers    string        // "" = the local broker
	publishTO  time.Duration
	queue      bool // the sale needs admission tokens
	pow        int  // proof-of-work difficulty to join the queue
	env        map[string]string
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr(), testenv.PostgresAddr(), testenv.KafkaBrokers())
	ctx := testenv.Context(t)
	if err := schema.MigrateDSN(ctx, testenv.PostgresDSN()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, topic: fmt.Sprintf("test-gw-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())}
	kafkatopic.DeleteAtCleanup(t, testenv.KafkaBrokers(), h.topic)
	h.saleID, h.items = createSale(t, ctx, o.startsIn, o.quantities)
	if o.queue || o.pow > 0 {
		conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, `UPDATE flash_sale SET queue_enabled = $2, pow_difficulty = $3, admission_rate = 1000 WHERE id = $1`, h.saleID, o.queue, o.pow)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}

	var err error
	h.redis, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.redis.Close)
	h.stock = stock.New(h.redis)
	var load []stock.ItemStock
	for i, id := range h.items {
		load = append(load, stock.ItemStock{ItemID: id, Left: int64(o.quantities[i])})
	}
	if err := h.stock.Load(ctx, h.saleID, load, nil); err != nil {
		t.Fatal(err)
	}

	h.startGateway(o)
	return h
}

// startGateway starts one more gateway on the harness's sale and topic and
// makes it the one h.do talks to (the previous base URL is returned).
func (h *harness) startGateway(o harnessOpts) string {
	t := h.t
	prev := h.base
	brokers := o.brokers
	if brokers == "" {
		brokers = testenv.KafkaBrokers()
	}
	if o.publishTO == 0 {
		o.publishTO = 5 * time.Second
	}
	env := map[string]string{
		"FLASHSALE_REDIS_ADDR":      testenv.RedisAddr(),
		"FLASHSALE_PG_DSN":          testenv.PostgresDSN(),
		"FLASHSALE_KAFKA_BROKERS":   brokers,
		"FLASHSALE_ORDERS_TOPIC":    h.topic,
		"FLASHSALE_PUBLISH_TIMEOUT": o.publishTO.String(),
		"FLASHSALE_JWT_HS256_KEY":   string(jwtKey),
		"FLASHSALE_GATE_KEY":        string(gateKey),
		"FLASHSALE_ADMIN_TOKEN":     "test-admin-token-0123",
		"FLASHSALE_STOCK_POLL":      "200ms",
		"FLASHSALE_QUEUE_ADVANCE":   "20ms",
	}
	for k, v := range o.env {
		env[k] = v
	}
	h.env = env
	cfg, err := config.Load(pkgconfig.Vars(env))
	if err != nil {
		t.Fatal(err)
	}
	h.logs = &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(h.logs, nil))
	sctx, cancel := context.WithCancel(context.Background())
	h.gw, err = New(sctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	adm, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- h.gw.ServeListeners(sctx, pub, adm) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	h.base = "http://" + pub.Addr().String()
	h.admin = "http://" + adm.Addr().String()
	return prev
}

var saleSeq sync.Mutex

func createSale(t *testing.T, ctx context.Context, startsIn time.Duration, quantities []int) (int64, []int64) {
	t.Helper()
	saleSeq.Lock()
	defer saleSeq.Unlock()
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var sale int64
	start := time.Now().Add(startsIn)
	if err := conn.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at, payment_ttl)
		VALUES ($1, $2, $3, interval '10 minutes') RETURNING id`, t.Name(), start, start.Add(time.Hour)).Scan(&sale); err != nil {
		t.Fatal(err)
	}
	var items []int64
	for i, q := range quantities {
		var id int64
		if err := conn.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
			VALUES ($1, $2, $3, 9.99, $4) RETURNING id`, sale, fmt.Sprintf("p%d", i), fmt.Sprintf("item %d", i), q).Scan(&id); err != nil {
			t.Fatal(err)
		}
		items = append(items, id)
	}
	return sale, items
}

func token(t testing.TB, user string) string {
	tok, err := auth.MintHS256(jwtKey, user, "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type answer struct {
	Status  int
	Retry   string
	Body    []byte
	Error   string `json:"error"`
	OrderID string `json:"orderId"`
	State   string `json:"status"`
}

func (h *harness) do(method, path, user string) answer {
	h.t.Helper()
	return h.doWith(method, h.base+path, user, nil, nil)
}

// doWith sends a request with extra headers and a body; url is absolute.
func (h *harness) doWith(method, url, user string, header map[string]string, body []byte) answer {
	h.t.Helper()
	path := url
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+token(h.t, user))
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	b, _ := io.ReadAll(resp.Body)
	a.Body = b
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		h.t.Fatalf("%s %s: content type %q, body %s", method, path, ct, b)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		h.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, b, err)
	}
	a.Status, a.Retry = resp.StatusCode, resp.Header.Get("Retry-After")
	return a
}

func (h *harness) buyPath(item int64) string {
	return fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", h.saleID, catalog.Gate(gateKey, h.saleID), item)
}

func (h *harness) left(item int64) int64 {
	h.t.Helper()
	n, err := h.stock.Left(context.Background(), h.saleID, item)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func TestPurchaseAnswers(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1, 3}, startsIn: -time.Minute})
	one, three := h.items[0], h.items[1]
	wrongGate := fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", h.saleID, strings.Repeat("0", 32), three)

	steps := []struct {
		name   string
		method string
		path   string
		user   string
		want   int
		code   string
	}{
		{"accepted", "POST", h.buyPath(one), "alice", 202, ""},
		{"last unit gone", "POST", h.buyPath(one), "bob", 410, "SOLD_OUT"},
		{"sold-out flag answers without Redis", "POST", h.buyPath(one), "carol", 410, "SOLD_OUT"},
		{"one unit per user per sale, across items", "POST", h.buyPath(three), "alice", 409, "ALREADY_PURCHASED"},
		{"no token", "POST", h.buyPath(three), "", 401, "UNAUTHORIZED"},
		{"wrong gate", "POST", wrongGate, "dave", 404, "NOT_FOUND"},
		{"unknown item", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/999999999/purchase", h.saleID, catalog.Gate(gateKey, h.saleID)), "dave", 404, "NOT_FOUND"},
		{"non-numeric item", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/abc/purchase", h.saleID, catalog.Gate(gateKey, h.saleID)), "dave", 404, "NOT_FOUND"},
		{"negative sale", "POST", fmt.Sprintf("/api/flash-sales/-1/g/x/items/%d/purchase", three), "dave", 404, "NOT_FOUND"},
		{"huge sale id", "POST", fmt.Sprintf("/api/flash-sales/99999999999999999999999/g/x/items/%d/purchase", three), "dave", 404, "NOT_FOUND"},
		{"wrong method", "GET", h.buyPath(three), "dave", 405, "METHOD_NOT_ALLOWED"},
		{"unknown route", "GET", "/nope", "", 404, "NOT_FOUND"},
	}
	for _, s := range steps {
		got := h.do(s.method, s.path, s.user)
		if got.Status != s.want || got.Error != s.code {
			t.Fatalf("%s: got %d %q, want %d %q", s.name, got.Status, got.Error, s.want, s.code)
		}
		if s.want == 202 && (got.OrderID == "" || got.State != "PENDING") {
			t.Fatalf("%s: 202 body %+v lacks orderId/PENDING", s.name, got)
		}
	}
	if n := h.gw.Metrics().Purchases("sold_out_flag"); n != 1 {
		t.Errorf("sold_out_flag refusals = %d, want 1 (the third request must not reach Redis)", n)
	}
	if got := h.left(three); got != 3 {
		t.Errorf("refused requests changed stock: left %d, want 3", got)
	}
}

func TestPurchaseBeforeOpeningIs404(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{5}, startsIn: time.Hour})
	if got := h.do("POST", h.buyPath(h.items[0]), "alice"); got.Status != 404 {
		t.Fatalf("purchase before opening: %d, want 404", got.Status)
	}
	var info struct {
		State        string `json:"state"`
		PurchasePath string `json:"purchasePath"`
		OpensInMs    int64  `json:"opensInMs"`
	}
	resp, err := http.Get(fmt.Sprintf("%s/api/flash-sales/%d", h.base, h.saleID))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&info)
	if info.State != "UPCOMING" || info.PurchasePath != "" || info.OpensInMs <= 0 {
		t.Fatalf("sale info before opening = %+v; want UPCOMING, no purchase path, a countdown", info)
	}
	if h.left(h.items[0]) != 5 {
		t.Fatal("stock changed")
	}
}

// After the end, the purchase URL answers 410 SALE_ENDED (stop retrying);
// a wrong gate still learns nothing: 404.
func TestPurchaseAfterTheEndIs410(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{5}, startsIn: -2 * time.Hour}) // ended an hour ago
	if got := h.do("POST", h.buyPath(h.items[0]), "alice"); got.Status != 410 || got.Error != "SALE_ENDED" {
		t.Fatalf("purchase after the end: %d %q, want 410 SALE_ENDED", got.Status, got.Error)
	}
	wrong := fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", h.saleID, strings.Repeat("0", 32), h.items[0])
	if got := h.do("POST", wrong, "alice"); got.Status != 404 {
		t.Fatalf("wrong gate after the end: %d %q, want 404", got.Status, got.Error)
	}
	if h.left(h.items[0]) != 5 {
		t.Fatal("stock changed")
	}
}

// Every 202 is backed by an acknowledged OrderPlaced on the topic: spread
// over the partitions without a key, or keyed by item (the orders published
// before the producer knew the partition count).
func TestAcceptedOrdersAreOnTheTopic(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{20}, startsIn: -time.Minute})
	accepted := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for u := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := h.do("POST", h.buyPath(h.items[0]), fmt.Sprintf("user-%d", u))
			if a.Status == 202 {
				mu.Lock()
				accepted[a.OrderID] = true
				mu.Unlock()
			} else if a.Status != 410 {
				t.Errorf("user-%d: %d %s", u, a.Status, a.Error)
			}
		}()
	}
	wg.Wait()
	if len(accepted) != 20 {
		t.Fatalf("%d accepted, want 20", len(accepted))
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "group.id": h.topic, "auto.offset.reset": "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(h.topic, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	seen := map[string]bool{}
	for len(seen) < len(accepted) && time.Now().Before(deadline) {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			continue
		}
		e, err := event.Unmarshal(m.Value)
		if err != nil {
			t.Fatalf("bad event on topic: %v", err)
		}
		if (len(m.Key) > 0 && string(m.Key) != fmt.Sprint(h.items[0])) || e.ItemID != h.items[0] || e.SaleID != h.saleID {
			t.Fatalf("event %+v with key %q, want item %d, keyed by it or not at all", e, m.Key, h.items[0])
		}
		seen[e.OrderID.String()] = true
	}
	for id := range accepted {
		if !seen[id] {
			t.Errorf("order %s answered 202 but is not on the topic", id)
		}
	}
	if len(seen) != len(accepted) {
		t.Errorf("%d events on the topic, %d accepted", len(seen), len(accepted))
	}
}

// With the broker unreachable the gateway answers 503 and gives the unit back.
func TestBrokerDownAnswers503AndKeepsStock(t *testing.T) {
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close() // nothing listens there any more
	h := newHarness(t, harnessOpts{quantities: []int{3}, startsIn: -time.Minute, brokers: addr, publishTO: 500 * time.Millisecond})
	for _, user := range []string{"alice", "bob"} {
		got := h.do("POST", h.buyPath(h.items[0]), user)
		if got.Status != 503 || got.Error != "UNAVAILABLE" || got.Retry == "" {
			t.Fatalf("%s: got %d %q retry %q, want 503 UNAVAILABLE with Retry-After", user, got.Status, got.Error, got.Retry)
		}
	}
	if got := h.left(h.items[0]); got != 3 {
		t.Errorf("stock after failed publishes = %d, want 3", got)
	}
	holders, _ := h.stock.Holders(context.Background(), h.saleID)
	if len(holders) != 0 {
		t.Errorf("holders after failed publishes = %v, want none (the shopper may try again)", holders)
	}
}

// A missing stock key is not zero: 503, never a false SOLD_OUT.
func TestStockNotLoadedIs503(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{3}, startsIn: -time.Minute})
	h.redis.Do(context.Background(), h.redis.B().Del().Key(stock.StockKey(h.saleID, h.items[0])).Build())
	got := h.do("POST", h.buyPath(h.items[0]), "alice")
	if got.Status != 503 || got.Error != "UNAVAILABLE" {
		t.Fatalf("got %d %q, want 503 UNAVAILABLE", got.Status, got.Error)
	}
	if n := h.gw.Metrics().Purchases("not_loaded"); n != 1 {
		t.Errorf("not_loaded counter = %d, want 1", n)
	}
	// Once the watcher has read the missing key, /metrics says "not loaded"
	// in a gauge of its own: no stock_left series, rather than a number
	// that means "unknown".
	if err := h.gw.watcher.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	fams, err := scrape.Get(context.Background(), nil, h.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	item := []string{"sale", strconv.FormatInt(h.saleID, 10), "item", strconv.FormatInt(h.items[0], 10)}
	if v, ok := fams.Value("flashsale_gateway_stock_loaded", item...); !ok || v != 0 {
		t.Errorf("stock_loaded %v (present %v), want 0", v, ok)
	}
	if v, ok := fams.Value("flashsale_gateway_stock_left", item...); ok {
		t.Errorf("stock_left %v for stock that is not loaded, want no series", v)
	}
}

// A unit returned after the sold-out flag was set is sold again.
func TestSoldOutFlagClearsWhenStockReturns(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute})
	first := h.do("POST", h.buyPath(h.items[0]), "alice")
	if first.Status != 202 {
		t.Fatalf("first purchase: %d", first.Status)
	}
	if got := h.do("POST", h.buyPath(h.items[0]), "bob"); got.Status != 410 {
		t.Fatalf("second: %d, want 410", got.Status)
	}
	ok, err := h.stock.Release(context.Background(), h.saleID, h.items[0], "alice", first.OrderID)
	if err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		got := h.do("POST", h.buyPath(h.items[0]), "bob")
		if got.Status == 202 {
			break
		}
		if got.Status != 410 || time.Now().After(deadline) {
			t.Fatalf("after the unit came back: %d %q, want 202 within the bound", got.Status, got.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SIGHUP's reload applies the limits whose value in the configuration
// changed to a running gateway, and keeps a limit an operator set through
// the admin API whose configured value did not change.
func TestReloadAppliesLimits(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{10}, startsIn: -time.Minute})
	setByAPI := h.doWith("PUT", h.admin+"/admin/limits", "", map[string]string{"Authorization": "Bearer test-admin-token-0123"},
		[]byte(`{"queue":{"user":{"rate":7,"burst":9}}}`))
	if setByAPI.Status != 200 {
		t.Fatalf("set the queue limit through the API: %d %s", setByAPI.Status, setByAPI.Body)
	}
	for i := range 3 {
		if got := h.do("POST", h.buyPath(h.items[0]), fmt.Sprintf("before-%d", i)); got.Status != 202 {
			t.Fatalf("before reload: %d", got.Status)
		}
	}
	// The file changes a limit, and a setting a reload cannot apply.
	env := maps.Clone(h.env)
	env["FLASHSALE_LIMIT_PURCHASE_IP"] = "0.001/1"
	env["FLASHSALE_STOCK_POLL"] = "300ms"
	cfg, err := config.Load(pkgconfig.Vars(env))
	if err != nil {
		t.Fatal(err)
	}
	h.gw.Reload(context.Background(), cfg)
	if logs := h.logs.String(); !strings.Contains(logs, `msg="configuration changes not applied: they need a restart" settings=[FLASHSALE_STOCK_POLL]`) {
		t.Errorf("the reload did not name the one change it cannot apply; logs:\n%s", logs)
	}
	if got := h.do("POST", h.buyPath(h.items[0]), "after-1"); got.Status != 202 {
		t.Fatalf("first request after reload: %d", got.Status)
	}
	if got := h.do("POST", h.buyPath(h.items[0]), "after-2"); got.Status != 429 {
		t.Fatalf("second request from the same IP after reload: %d, want 429", got.Status)
	}
	if got := h.gw.api.QueueLimits.User.Rule(); got != (ratelimit.Rule{Rate: 7, Burst: 9}) {
		t.Errorf("queue limit set through the API after a reload that left it alone: got %+v, want 7/9", got)
	}
	fams, err := scrape.Get(context.Background(), nil, h.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	purchaseIP := []string{"route", "purchase", "key", "ip"}
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"flashsale_gateway_rate_limit_tokens_per_second", purchaseIP, 0.001},
		{"flashsale_gateway_rate_limit_burst_tokens", purchaseIP, 1},
		{"flashsale_gateway_rate_limit_enabled", purchaseIP, 1},
		{"flashsale_gateway_purchases_total", []string{"outcome", "rate_limited_ip"}, 1},
		{"flashsale_gateway_purchases_total", []string{"outcome", "accepted"}, 4},
		{"flashsale_gateway_stock_loaded", []string{"sale", strconv.FormatInt(h.saleID, 10), "item", strconv.FormatInt(h.items[0], 10)}, 1},
	} {
		if got, ok := fams.Value(want.name, want.labels...); !ok || got != want.value {
			t.Errorf("%s%v = %v (present %v), want %v", want.name, want.labels, got, ok, want.value)
		}
	}
}

// README.md's metrics table lists every metric of the gateway, and only
// those: a running gateway with an open sale and a queue view shows every
// family it has.
func TestREADMEListsEveryMetric(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{3}, startsIn: -time.Minute})
	h.gw.api.SetQueueGauge(h.saleID, 0, 10)
	if err := h.gw.redisReady.Err(t.Context()); err != nil { // a clock skew measured
		t.Fatal(err)
	}
	d, err := metricdoc.Compare(h.gw.api.Gatherer, httpapi.Namespace+"_")
	if err != nil {
		t.Fatal(err)
	}
	if d != "" {
		t.Error(d)
	}
}

// A gateway whose context ends before its servers have started still
// stops. fasthttp's Shutdown closes only the listeners its Serve has
// already taken, so a Serve that started after it accepted for ever and
// ServeListeners never returned (seen once in make test, as a test's
// cleanup hanging for ten minutes).
func TestServeListenersStopsWhenCancelledAtOnce(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Second})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		gw, err := New(ctx, h.gw.cfg, quiet)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		pub, _ := net.Listen("tcp", "127.0.0.1:0")
		adm, _ := net.Listen("tcp", "127.0.0.1:0")
		cancel()
		done := make(chan error, 1)
		go func() { done <- gw.ServeListeners(ctx, pub, adm) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: ServeListeners after its context ended: %v", i, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: ServeListeners still serving 15s after its context ended", i)
		}
	}
}

// A gateway does not start on a Redis that may evict the sale's keys, and
// one whose Redis starts evicting says so on /readyz (load balancers then
// stop sending it shoppers) and in its log.
func TestRedisThatMayEvict(t *testing.T) {
	start := func(redisAddr string) (*Gateway, *lockedBuffer, error) { return startOnRedis(t, redisAddr, nil) }

	evicting := testenv.ThrowawayRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru")
	if gw, _, err := start(evicting); !errors.Is(err, redisconn.ErrEvicts) || !strings.Contains(err.Error(), evicting) {
		if gw != nil {
			gw.Close()
		}
		t.Fatalf("New on %s with volatile-lru: %v, want the policy refused", evicting, err)
	}

	addr := testenv.ThrowawayRedis(t)
	gw, logs, err := start(addr)
	if err != nil {
		t.Fatal(err)
	}
	// The policy changes after the start's check, before the watch's
	// first (it then asks every 10 s).
	rc := testenv.RedisClient(t, addr)
	if err := rc.Do(t.Context(), rc.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "allkeys-lru").ParameterValue("maxmemory", "1gb").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	admin := serveUntilTheEnd(t, gw)
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis evicting: %d, want 503", resp.StatusCode)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "allkeys-lru") {
		t.Errorf("the log does not say Redis may evict:\n%s", l)
	}
}

// /readyz fails while this host's clock is further from Redis's than a
// sixth of the in-flight window (every order carries the gateway's
// time, which the order service compares with its own), and the log says
// why.
func TestReadinessFollowsTheClock(t *testing.T) {
	gw, logs, err := startOnRedis(t, testenv.ThrowawayRedis(t), map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "20s"})
	if err != nil {
		t.Fatal(err)
	}
	gw.redisReady.UseClock(func() time.Time { return time.Now().Add(6 * time.Second) })
	admin := serveUntilTheEnd(t, gw)
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the clock 6s ahead of Redis's (window 20s, 3.3s allowed): %d, want 503", resp.StatusCode)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "ahead of it") {
		t.Errorf("the log does not say the clock is ahead:\n%s", l)
	}
	resp, err = http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	skew := math.NaN()
	if m := regexp.MustCompile(`(?m)^flashsale_gateway_clock_skew_seconds (\S+)$`).FindSubmatch(body); m != nil {
		skew, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if !(math.Abs(skew-6) < 0.1) {
		t.Errorf("/metrics does not show the 6s skew:\n%s", grepLines(string(body), "clock_skew"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// startOnRedis builds a gateway on the local stack's PostgreSQL and broker
// and the Redis at redisAddr, with extra settings, logging into the
// buffer it returns; New's error is the caller's to judge.
func startOnRedis(t *testing.T, redisAddr string, extra map[string]string) (*Gateway, *lockedBuffer, error) {
	t.Helper()
	testenv.Require(t, testenv.PostgresAddr(), testenv.KafkaBrokers())
	env := pkgconfig.Vars{
		"FLASHSALE_PG_DSN":        testenv.PostgresDSN(),
		"FLASHSALE_KAFKA_BROKERS": testenv.KafkaBrokers(),
		"FLASHSALE_REDIS_ADDR":    redisAddr,
		"FLASHSALE_JWT_HS256_KEY": string(jwtKey),
		"FLASHSALE_GATE_KEY":      string(gateKey),
		"FLASHSALE_ADMIN_TOKEN":   "test-admin-token-0123",
	}
	maps.Copy(env, extra)
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	gw, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	return gw, logs, err
}

// serveUntilTheEnd serves gw on loopback until the test ends, then checks
// its shutdown; it returns the admin listener's base URL.
func serveUntilTheEnd(t *testing.T, gw *Gateway) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	adm, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- gw.ServeListeners(ctx, pub, adm) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	return "http://" + adm.Addr().String()
}
