package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/ratelimit"
	"flashsale/pkg/auth"
	"flashsale/pkg/schema"
	"flashsale/tools/testenv"
)

// The purchase handler's refusals against a bare fasthttp handler that
// answers the same 410 as a constant: the gap is what the gateway's checks
// cost. The catalog can only be filled from PostgreSQL, so the setup
// creates two open sales on the local stack (make up): one whose item is
// flagged sold out, one whose item still has stock.
//
//	go test ./internal/httpapi -run '^$' -bench . -benchmem

var (
	timingJWTKey  = []byte("timing-jwt-key-0123456789abcdef0123456")
	timingGateKey = []byte("timing-gate-key-0123456789abcdef012345")
)

// timingSale is an open sale with one item, made for the benchmark.
type timingSale struct {
	saleID, itemID int64
	gate           string
}

func (s timingSale) purchasePath(gate string) string {
	return fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", s.saleID, gate, s.itemID)
}

func createTimingSale(b testing.TB, pool *pgxpool.Pool, quantity int) timingSale {
	b.Helper()
	ctx := testenv.Context(b)
	var s timingSale
	err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ($1, now() - interval '1 minute', now() + interval '1 hour') RETURNING id`,
		fmt.Sprintf("%.150s-%d", b.Name(), time.Now().UnixNano())).Scan(&s.saleID)
	if err != nil {
		b.Fatalf("create sale: %v", err)
	}
	err = pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity) VALUES ($1, 'timing', 'timing item', 1, $2) RETURNING id`,
		s.saleID, quantity).Scan(&s.itemID)
	if err != nil {
		b.Fatalf("create item: %v", err)
	}
	s.gate = catalog.Gate(timingGateKey, s.saleID)
	return s
}

// timingAPI builds the gateway's API over a catalog read from PostgreSQL.
// Nothing here reaches Redis or Kafka: every request benchmarked is refused
// before the buying step, so Buyer stays nil and a mistake shows as a panic.
func timingAPI(b testing.TB, purchase Limits) (*API, timingSale, timingSale) {
	b.Helper()
	testenv.Require(b, testenv.PostgresAddr())
	ctx := testenv.Context(b)
	if err := schema.MigrateDSN(ctx, testenv.PostgresDSN()); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	soldOut := createTimingSale(b, pool, 0)
	open := createTimingSale(b, pool, 1000)
	cat := catalog.New(pool, timingGateKey)
	if err := cat.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	sale, ok := cat.Sale(soldOut.saleID)
	if !ok {
		b.Fatalf("sale %d not in the catalog", soldOut.saleID)
	}
	item, _ := sale.Item(soldOut.itemID)
	item.MarkSoldOut() // what the first SOLD_OUT from Redis does
	v, err := auth.NewVerifier(timingJWTKey, nil, "flashsale", "")
	if err != nil {
		b.Fatal(err)
	}
	a := &API{
		Catalog:        cat,
		Verifier:       v,
		PurchaseLimits: purchase,
		QueueLimits:    NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64),
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:        newTestMetrics(b),
		BaseCtx:        context.Background(),
		Now:            time.Now,
	}
	return a, soldOut, open
}

// bareSoldOut is the baseline: the same answer with nothing in front of it.
func bareSoldOut(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentJSON)
	ctx.SetStatusCode(fasthttp.StatusGone)
	ctx.SetBody(bareBody)
}

var bareBody = []byte(`{"error":"SOLD_OUT","message":"this item is sold out (a shopper who bought it finds her order at GET /api/flash-sales/{saleId}/order)"}`)

// refusalCase is one refusal of the public handler: a request, and the
// status it must get without allocating.
type refusalCase struct {
	name    string
	handler fasthttp.RequestHandler
	path    string
	authz   string
	want    int
	metrics *Metrics // the handler's counters
	outcome string   // the purchases_total outcome the refusal counts
}

// refusalCases are the refusals most of a flash sale's crowd meets, through
// the public handler (router, recovery, purchase) of two APIs over the
// local catalog: one with limits off, one whose per-IP limit is spent.
// BenchmarkPurchaseRefusals times them, TestRefusalPathsDoNotAllocate
// guards their zero allocations.
func refusalCases(tb testing.TB) []refusalCase {
	a, soldOut, open := timingAPI(tb, NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64))
	limited, _, _ := timingAPI(tb, NewLimits(ratelimit.Rule{}, ratelimit.Rule{Rate: 1e-9, Burst: 1}, 64))
	h, hLimited := a.Public(), limited.Public()
	m, mLimited := a.Metrics, limited.Metrics
	return []refusalCase{
		// The path most of a flash sale's crowd takes.
		{"sold-out flag 410", h, soldOut.purchasePath(soldOut.gate), "", 410, m, "sold_out_flag"},
		// A guessed or early purchase URL.
		{"wrong gate 404", h, soldOut.purchasePath("0123456789abcdef0123456789abcdef"), "", 404, m, "gate_closed"},
		{"unknown sale 404", h, fmt.Sprintf("/api/flash-sales/%d/g/%s/items/1/purchase", int64(1)<<62, soldOut.gate), "", 404, m, "not_found"},
		// Stock left but no token: the check after the flag.
		{"no token 401", h, open.purchasePath(open.gate), "", 401, m, "unauthorized"},
		{"malformed token 401", h, open.purchasePath(open.gate), "Basic dXNlcjpwYXNz", 401, m, "unauthorized"},
		// The per-IP limit, spent.
		{"ip rate limited 429", hLimited, open.purchasePath(open.gate), "", 429, mLimited, "rate_limited_ip"},
	}
}

// prepared is a RequestCtx for c, reused between calls as fasthttp reuses
// one between requests; serve runs one request on it.
func (c refusalCase) prepared() (ctx *fasthttp.RequestCtx, serve func()) {
	ctx = &fasthttp.RequestCtx{}
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	ctx.Request.SetRequestURI(c.path)
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	if c.authz != "" {
		ctx.Request.Header.Set(fasthttp.HeaderAuthorization, c.authz)
	}
	c.handler(ctx) // first call: lazily built router state, the limiter's bucket
	return ctx, func() {
		ctx.ResetUserValues() // the server does this between requests
		ctx.Response.Reset()
		c.handler(ctx)
	}
}

// BenchmarkPurchaseRefusals calls the public handler (router, recover,
// purchase) with a prepared RequestCtx, as the server does after parsing,
// beside two baselines. The refusal paths must not allocate.
func BenchmarkPurchaseRefusals(b *testing.B) {
	refusals := refusalCases(b)
	soldOutPath := refusals[0].path // "sold-out flag 410"
	// The same route in fasthttp/router in front of the constant answer:
	// what the router alone costs.
	rt := router.New()
	rt.POST("/api/flash-sales/{saleId}/g/{gate}/items/{itemId}/purchase", bareSoldOut)
	cases := append([]refusalCase{
		// The ceiling: a constant answer, no router, no checks.
		{name: "bare constant 410", handler: bareSoldOut, path: soldOutPath, want: 410},
		{name: "router + constant 410", handler: rt.Handler, path: soldOutPath, want: 410},
	}, refusals...)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx, serve := c.prepared()
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
			if got := ctx.Response.StatusCode(); got != c.want {
				b.Fatalf("status %d, want %d: %s", got, c.want, ctx.Response.Body())
			}
		})
	}
}

// BenchmarkPurchaseServed sends requests through a fasthttp server over an
// in-memory listener: HTTP parsing and writing included, no sockets. The
// client's side is counted too, so compare the two rows, not absolutes.
func BenchmarkPurchaseServed(b *testing.B) {
	a, soldOut, _ := timingAPI(b, NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64))
	for _, c := range []struct {
		name    string
		handler fasthttp.RequestHandler
	}{
		{"bare constant 410", bareSoldOut},
		{"sold-out flag 410", a.Public()},
	} {
		b.Run(c.name, func(b *testing.B) {
			ln := fasthttputil.NewInmemoryListener()
			srv := &fasthttp.Server{Handler: c.handler, ReadBufferSize: 8192,
				NoDefaultServerHeader: true, NoDefaultDate: true, Concurrency: 256 * 1024}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			defer func() {
				_ = srv.Shutdown()
				ln.Close()
				<-done
			}()
			client := &fasthttp.HostClient{Addr: "gateway", Dial: func(string) (net.Conn, error) { return ln.Dial() }, MaxConns: 1024}
			uri := "http://gateway" + soldOut.purchasePath(soldOut.gate)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				req.SetRequestURI(uri)
				req.Header.SetMethod(fasthttp.MethodPost)
				for pb.Next() {
					if err := client.Do(req, resp); err != nil {
						b.Error(err)
						return
					}
					if resp.StatusCode() != 410 || !bytes.Contains(resp.Body(), []byte("SOLD_OUT")) {
						b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
						return
					}
				}
			})
		})
	}
}

// BenchmarkPurchaseHandlerOnly calls the purchase handler itself with the
// path parameters already set, as a router that does not allocate would
// leave them: the gateway's own checks, without fasthttp/router's cost.
func BenchmarkPurchaseHandlerOnly(b *testing.B) {
	a, soldOut, open := timingAPI(b, NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64))
	id := func(n int64) string { return fmt.Sprint(n) }
	cases := []struct {
		name             string
		sale, gate, item string
		want             int
	}{
		{"sold-out flag 410", id(soldOut.saleID), soldOut.gate, id(soldOut.itemID), 410},
		{"wrong gate 404", id(soldOut.saleID), "0123456789abcdef0123456789abcdef", id(soldOut.itemID), 404},
		{"unknown sale 404", id(int64(1) << 62), soldOut.gate, "1", 404},
		{"no token 401", id(open.saleID), open.gate, id(open.itemID), 401},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
			ctx.Request.Header.SetMethod(fasthttp.MethodPost)
			ctx.SetUserValue("saleId", c.sale)
			ctx.SetUserValue("gate", c.gate)
			ctx.SetUserValue("itemId", c.item)
			a.purchase(&ctx)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				a.purchase(&ctx)
			}
			if got := ctx.Response.StatusCode(); got != c.want {
				b.Fatalf("status %d, want %d: %s", got, c.want, ctx.Response.Body())
			}
		})
	}
}

// newTestMetrics registers the request counters in a registry of their own.
func newTestMetrics(tb testing.TB) *Metrics {
	tb.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
