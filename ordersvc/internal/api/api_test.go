package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"flashsale/ordersvc/internal/api"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/accepted"
	"flashsale/pkg/auth"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

var (
	jwtKey     = []byte("0123456789abcdef0123456789abcdef")
	adminToken = []byte("admin-token-0123456789")
	quiet      = slog.New(slog.NewTextHandler(io.Discard, nil))
)

type readyFunc func() error

func (f readyFunc) Ready() error { return f() }

// serve runs h on an in-memory listener and returns a client bound to it.
func serve(t *testing.T, h fasthttp.RequestHandler) *fasthttp.Client {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { srv.Shutdown(); ln.Close() })
	return &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
}

type response struct {
	status int
	header map[string]string
	body   map[string]any
	raw    string
}

func do(t *testing.T, c *fasthttp.Client, method, path, authz, body string) response {
	t.Helper()
	return doWith(t, c, method, path, authz, body, nil)
}

// doWith is do with more request headers.
func doWith(t *testing.T, c *fasthttp.Client, method, path, authz, body string, header map[string]string) response {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://ordersvc" + path)
	req.Header.SetMethod(method)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	r := response{status: resp.StatusCode(), header: map[string]string{}, raw: string(resp.Body())}
	for _, k := range []string{"Retry-After", "Content-Type", api.HeaderIdempotentReplayed} {
		r.header[k] = string(resp.Header.Peek(k))
	}
	if strings.HasPrefix(r.header["Content-Type"], "application/json") {
		if err := json.Unmarshal(resp.Body(), &r.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, resp.Body())
		}
	}
	return r
}

func token(t *testing.T, user string) string {
	t.Helper()
	tok, err := auth.MintHS256(jwtKey, user, "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

func redisClient(t *testing.T) rueidis.Client {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

func publicAPI(t *testing.T, pool *pgxpool.Pool, rc rueidis.Client) *fasthttp.Client {
	t.Helper()
	v, err := auth.NewVerifier(jwtKey, nil, "flashsale", "")
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pool)
	m := metrics.New()
	h := api.NewHealth(st, m, nil)
	rl := relay.New(st, stock.New(rc), quiet, m)
	return serve(t, api.NewPublic(st, rc, rl, v, h, quiet).Handler(context.Background()))
}

func TestGetOrder(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	s := testdb.Sale(t, st, 5)
	placed := time.Now().UTC().Truncate(time.Microsecond)
	ev := event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: s.ID, ItemID: s.Items[0].ID, UserID: "alice", PlacedAt: placed}
	if _, err := st.PersistBatch(testenv.Context(t), []event.OrderPlaced{ev}); err != nil {
		t.Fatal(err)
	}
	rc := redisClient(t)
	inFlight := uuid.New() // accepted by the gateway, not persisted yet
	if err := accepted.Record(testenv.Context(t), rc, inFlight.String(), "alice"); err != nil {
		t.Fatal(err)
	}
	c := publicAPI(t, pool, rc)
	path := "/api/flash-sales/orders/" + ev.OrderID.String()
	expired, err := auth.MintHS256(jwtKey, "alice", "flashsale", "", time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		path       string
		authz      string
		wantStatus int
		wantCode   string // error code; "" for success
	}{
		{"owner sees the order", path, token(t, "alice"), 200, ""},
		{"another user gets 404", path, token(t, "mallory"), 404, api.CodeNotFound},
		{"unknown id gets 404", "/api/flash-sales/orders/" + uuid.NewString(), token(t, "alice"), 404, api.CodeNotFound},
		{"malformed id gets 400", "/api/flash-sales/orders/not-a-uuid", token(t, "alice"), 400, api.CodeInvalidOrderID},
		{"uuid without dashes gets 400", "/api/flash-sales/orders/" + strings.ReplaceAll(ev.OrderID.String(), "-", ""), token(t, "alice"), 400, api.CodeInvalidOrderID},
		{"no token gets 401", path, "", 401, api.CodeUnauthorized},
		{"wrong scheme gets 401", path, "Basic YWxpY2U6eA==", 401, api.CodeUnauthorized},
		{"expired token gets 401", path, "Bearer " + expired, 401, api.CodeUnauthorized},
		{"token of another key gets 401", path, "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.x", 401, api.CodeUnauthorized},
		{"unknown route is JSON 404", "/api/nope", token(t, "alice"), 404, api.CodeNotFound},
		{"in flight for another user gets 404", "/api/flash-sales/orders/" + inFlight.String(), token(t, "mallory"), 404, api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, c, "GET", tt.path, tt.authz, "")
			if r.status != tt.wantStatus {
				t.Fatalf("status: got %d, want %d; body %s", r.status, tt.wantStatus, r.raw)
			}
			if tt.wantCode != "" {
				if r.body["error"] != tt.wantCode || r.body["message"] == "" {
					t.Errorf("error body: got %s, want code %s with a message", r.raw, tt.wantCode)
				}
				return
			}
			want := map[string]any{
				"orderId": ev.OrderID.String(), "saleId": float64(s.ID), "itemId": float64(s.Items[0].ID), "status": "PENDING",
				"createdAt": placed.Format(time.RFC3339Nano), "expiresAt": placed.Add(10 * time.Minute).Format(time.RFC3339Nano),
			}
			for k, v := range want {
				if r.body[k] != v {
					t.Errorf("%s: got %v, want %v", k, r.body[k], v)
				}
			}
			if _, ok := r.body["paidAt"]; ok {
				t.Errorf("paidAt present on an unpaid order: %s", r.raw)
			}
		})
	}
}

func TestGetOrderProcessing(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	id := uuid.New()
	if err := accepted.Record(testenv.Context(t), rc, id.String(), "alice"); err != nil {
		t.Fatal(err)
	}
	r := do(t, publicAPI(t, pool, rc), "GET", "/api/flash-sales/orders/"+id.String(), token(t, "alice"), "")
	if r.status != 200 || r.body["status"] != api.StatusProcessing || r.body["orderId"] != id.String() {
		t.Errorf("in-flight order: got %d %s, want 200 PROCESSING", r.status, r.raw)
	}

	// Redis down: an unknown id cannot be told from one in flight.
	dead, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	r = do(t, publicAPI(t, pool, dead), "GET", "/api/flash-sales/orders/"+id.String(), token(t, "alice"), "")
	if r.status != 503 || r.header["Retry-After"] == "" {
		t.Errorf("with Redis down: got %d %s, want 503 with Retry-After", r.status, r.raw)
	}
}

func TestGetOrderDatabaseDown(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.PostgresAddr())
	pool, err := pgxpool.New(testenv.Context(t), testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	c := publicAPI(t, pool, redisClient(t))
	r := do(t, c, "GET", "/api/flash-sales/orders/"+uuid.NewString(), token(t, "alice"), "")
	if r.status != 503 || r.body["error"] != api.CodeUnavailable || r.header["Retry-After"] == "" {
		t.Errorf("got %d %s Retry-After %q, want 503 UNAVAILABLE with Retry-After", r.status, r.raw, r.header["Retry-After"])
	}
	r = do(t, c, "GET", "/readyz", "", "")
	if r.status != 503 || r.body["checks"].(map[string]any)["postgres"] != "unavailable" {
		t.Errorf("public readyz with the database down: got %d %s, want 503 naming postgres unavailable, without its error", r.status, r.raw)
	}
	// Nothing but the order routes and health on the public listener.
	if r = do(t, c, "GET", "/metrics", "", ""); r.status != 404 {
		t.Errorf("/metrics on the public listener: %d, want 404 (the admin listener has it)", r.status)
	}
}

// A create-sale under an Idempotency-Key is made once: the retry gets the
// same sale, says so in Idempotent-Replayed, and the key with another
// request gets 422; a malformed key is a 400 that creates nothing.
func TestCreateSaleIdempotencyKey(t *testing.T) {
	t.Parallel()
	st := store.New(testdb.Pool(t))
	c := serve(t, api.NewAdmin(sale.NewService(st, nil), adminToken, api.NewHealth(st, metrics.New(), nil), nil, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)
	opens := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	body := func(quantity int) string {
		return fmt.Sprintf(`{"name":"once","startsAt":%q,"endsAt":%q,"paymentTtlSeconds":600,"items":[{"name":"n","price":"1.00","quantity":%d}]}`,
			opens.Format(time.RFC3339), opens.Add(time.Hour).Format(time.RFC3339), quantity)
	}
	key := map[string]string{api.HeaderIdempotencyKey: "job-" + uuid.NewString()}

	first := doWith(t, c, "POST", "/admin/sales", bearer, body(3), key)
	again := doWith(t, c, "POST", "/admin/sales", bearer, body(3), key)
	if first.status != 201 || again.status != 201 {
		t.Fatalf("create, then its retry: %d %s, %d %s; want 201 twice", first.status, first.raw, again.status, again.raw)
	}
	if first.body["id"] != again.body["id"] {
		t.Errorf("the retry made sale %v, the first call %v: want one sale", again.body["id"], first.body["id"])
	}
	if first.header[api.HeaderIdempotentReplayed] != "" || again.header[api.HeaderIdempotentReplayed] != "true" {
		t.Errorf("Idempotent-Replayed: first %q, retry %q; want none, then true",
			first.header[api.HeaderIdempotentReplayed], again.header[api.HeaderIdempotentReplayed])
	}
	if r := doWith(t, c, "POST", "/admin/sales", bearer, body(4), key); r.status != 422 || r.body["error"] != api.CodeKeyReused {
		t.Errorf("the key with another request: %d %s, want 422 %s", r.status, r.raw, api.CodeKeyReused)
	}
	for _, bad := range []string{"", "two words", strings.Repeat("k", 256), "caf\xc3\xa9"} {
		if r := doWith(t, c, "POST", "/admin/sales", bearer, body(3), map[string]string{api.HeaderIdempotencyKey: bad}); r.status != 400 {
			t.Errorf("key %.20q: %d %s, want 400", bad, r.status, r.raw)
		}
	}
}

func TestAdmin(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.RedisAddr())
	pool := testdb.Pool(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	st := store.New(pool)
	consumerReady := error(nil)
	h := api.NewHealth(st, metrics.New(), map[string]api.ReadyChecker{"kafka-consumer": readyFunc(func() error { return consumerReady })})
	c := serve(t, api.NewAdmin(sale.NewService(st, stock.New(rc), sale.WithAcceptedRecords(rc)), adminToken, h, nil, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)

	// Tomorrow: not open yet, whatever day the test runs.
	opens := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	body := fmt.Sprintf(`{"name":"admin-test","startsAt":%q,"endsAt":%q,"paymentTtlSeconds":600,
		"items":[{"productId":"p1","name":"phone","price":"199.99","quantity":10},{"productId":"p2","name":"case","price":5,"quantity":0}]}`,
		opens.Format(time.RFC3339), opens.Add(time.Hour).Format(time.RFC3339))
	r := do(t, c, "POST", "/admin/sales", bearer, body)
	if r.status != 201 {
		t.Fatalf("create: got %d %s", r.status, r.raw)
	}
	var created sale.View
	if err := json.Unmarshal([]byte(r.raw), &created); err != nil {
		t.Fatal(err)
	}
	if len(created.Items) != 2 || created.Items[0].ID == 0 || created.Items[1].Price != "5.00" || created.PaymentTTLSeconds != 600 {
		t.Fatalf("created sale: %s", r.raw)
	}
	salePath := "/admin/sales/" + jsonNum(created.ID)

	tests := []struct {
		name       string
		method     string
		path       string
		authz      string
		body       string
		wantStatus int
		check      func(t *testing.T, r response)
	}{
		{name: "no token", method: "POST", path: "/admin/sales", body: body, wantStatus: 401},
		{name: "wrong token", method: "GET", path: salePath, authz: "Bearer nope", wantStatus: 401},
		{name: "shopper token is not admin", method: "GET", path: salePath, authz: token(t, "alice"), wantStatus: 401},
		{name: "invalid body", method: "POST", path: "/admin/sales", authz: bearer, body: `{"name":""}`, wantStatus: 400},
		{name: "describe before load", method: "GET", path: salePath, authz: bearer, wantStatus: 200,
			check: func(t *testing.T, r response) {
				item := r.body["items"].([]any)[0].(map[string]any)
				if item["stockLoaded"] != false || item["left"] != nil || item["quantity"] != float64(10) {
					t.Errorf("item before load: %v", item)
				}
			}},
		{name: "load stock", method: "POST", path: salePath + "/load-stock", authz: bearer, wantStatus: 200,
			check: func(t *testing.T, r response) {
				items := r.body["items"].([]any)
				if r.body["saleId"] != float64(created.ID) || len(items) != 2 || items[0].(map[string]any)["left"] != float64(10) || r.body["holders"] != float64(0) {
					t.Errorf("load result: %s", r.raw)
				}
			}},
		{name: "describe after load", method: "GET", path: salePath, authz: bearer, wantStatus: 200,
			check: func(t *testing.T, r response) {
				item := r.body["items"].([]any)[0].(map[string]any)
				if item["stockLoaded"] != true || item["left"] != float64(10) || item["sold"] != float64(0) {
					t.Errorf("item after load: %v", item)
				}
			}},
		// The sale opens tomorrow: nothing is in flight to drop, so
		// a second load is no SALE_LIVE.
		{name: "load again before the opening", method: "POST", path: salePath + "/load-stock", authz: bearer, wantStatus: 200},
		{name: "load with a bad force", method: "POST", path: salePath + "/load-stock?force=yes", authz: bearer, wantStatus: 400},
		{name: "unknown sale", method: "GET", path: "/admin/sales/999999999999", authz: bearer, wantStatus: 404},
		{name: "load unknown sale", method: "POST", path: "/admin/sales/999999999999/load-stock", authz: bearer, wantStatus: 404},
		{name: "bad sale id", method: "GET", path: "/admin/sales/abc", authz: bearer, wantStatus: 400},
		{name: "wrong method", method: "DELETE", path: salePath, authz: bearer, wantStatus: 405},
		{name: "healthz needs no token", method: "GET", path: "/healthz", wantStatus: 200},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200},
		{name: "metrics", method: "GET", path: "/metrics", wantStatus: 200,
			check: func(t *testing.T, r response) {
				fams, err := scrape.Parse(strings.NewReader(r.raw))
				if err != nil {
					t.Fatal(err)
				}
				persisted, ok := fams.Value("flashsale_ordersvc_orders_persisted_total")
				if _, batch := fams.Value("flashsale_ordersvc_batch_duration_seconds"); !ok || persisted != 0 || !batch {
					t.Errorf("metrics: %s", r.raw)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, c, tt.method, tt.path, tt.authz, tt.body)
			if r.status != tt.wantStatus {
				t.Fatalf("status: got %d, want %d; body %s", r.status, tt.wantStatus, r.raw)
			}
			if r.status >= 400 {
				if code, _ := r.body["error"].(string); code == "" {
					t.Errorf("error without a JSON code: %s", r.raw)
				}
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}

	consumerReady = errors.New("no assignment")
	if r := do(t, c, "GET", "/readyz", "", ""); r.status != 503 || !strings.Contains(r.raw, "no assignment") {
		t.Errorf("readyz with the consumer unready: got %d %s", r.status, r.raw)
	}
	h.Drain()
	consumerReady = nil
	if r := do(t, c, "GET", "/readyz", "", ""); r.status != 503 {
		t.Errorf("readyz while draining: got %d %s", r.status, r.raw)
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }
