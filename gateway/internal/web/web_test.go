package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/httpapi"
	"flashsale/gateway/internal/ratelimit"
)

func do(h fasthttp.RequestHandler, method, path, auth string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	if auth != "" {
		ctx.Request.Header.Set("Authorization", "Bearer "+auth)
	}
	h(&ctx)
	return &ctx
}

func next(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(599) }

// The redirect to the page's folder keeps the query (the sale asked for)
// and stays relative: an absolute one took the request's scheme, http
// behind a TLS-ending balancer, and browsers carry the #token fragment
// across a redirect.
func TestRedirectKeepsTheQueryAndTheScheme(t *testing.T) {
	h, err := SalePage(next)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/sale": "/sale/", "/sale?sale=7": "/sale/?sale=7"} {
		ctx := do(h, "GET", path, "")
		if got := string(ctx.Response.Header.Peek(fasthttp.HeaderLocation)); ctx.Response.StatusCode() != 302 || got != want {
			t.Errorf("GET %s: %d to %q, want 302 to %q", path, ctx.Response.StatusCode(), got, want)
		}
	}
}

func TestSalePage(t *testing.T) {
	h, err := SalePage(next)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		status             int
		contentType        string
	}{
		{"index", "GET", "/sale/", 200, "text/html"},
		{"index with query", "GET", "/sale/?sale=7", 200, "text/html"},
		{"script", "GET", "/sale/sale.js", 200, "javascript"},
		{"stylesheet", "GET", "/sale/style.css", 200, "text/css"},
		{"no slash redirects", "GET", "/sale", 302, ""},
		{"unknown file", "GET", "/sale/secret.txt", 404, "application/json"},
		{"the dashboard is not public", "GET", "/sale/dashboard.js", 404, "application/json"},
		{"post is refused", "POST", "/sale/", 405, "application/json"},
		{"the API passes through", "GET", "/api/flash-sales/1", 599, ""},
		{"a purchase passes through", "POST", "/api/flash-sales/1/g/x/items/2/purchase", 599, ""},
		{"a near miss passes through", "GET", "/salesman", 599, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(h, tc.method, tc.path, "")
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			if got := string(ctx.Response.Header.ContentType()); !strings.Contains(got, tc.contentType) {
				t.Errorf("content type %q, want %q", got, tc.contentType)
			}
			if tc.status == 200 && len(ctx.Response.Header.Peek("Content-Security-Policy")) == 0 {
				t.Error("no Content-Security-Policy")
			}
		})
	}
}

// gatewayRegistry holds the gateway's request counters, as the gateway's does.
func gatewayRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if _, err := httpapi.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

func newDashboard(t *testing.T, g prometheus.Gatherer) *Dashboard {
	t.Helper()
	d, err := NewDashboard(Sources{Catalog: catalog.New(nil, nil), Gatherer: g,
		PurchaseLimits: httpapi.NewLimits(ratelimit.Rule{Rate: 1, Burst: 3}, ratelimit.Rule{Rate: 50, Burst: 100}, 100),
		QueueLimits:    httpapi.NewLimits(ratelimit.Rule{Rate: 2, Burst: 5}, ratelimit.Rule{}, 100),
		PollLimits:     httpapi.NewPollLimits(ratelimit.Rule{Rate: 4, Burst: 10}, 100),
		AdminToken:     []byte("admin-token-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDashboardRoutes(t *testing.T) {
	d := newDashboard(t, gatewayRegistry(t))
	h := d.Admin(next)
	tests := []struct {
		name, method, path, auth string
		status                   int
	}{
		{"page without token (it asks for one)", "GET", "/dashboard/", "", 200},
		{"script", "GET", "/dashboard/dashboard.js", "", 200},
		{"state needs the admin token", "GET", "/admin/dashboard", "", 401},
		{"state refuses a wrong token", "GET", "/admin/dashboard", "admin-token-wrong-000000", 401},
		{"state", "GET", "/admin/dashboard", "admin-token-0123456789", 200},
		{"state is read only", "PUT", "/admin/dashboard", "admin-token-0123456789", 405},
		{"state of chosen sales", "GET", "/admin/dashboard?sale=3,1", "admin-token-0123456789", 200},
		{"state of a malformed sale list", "GET", "/admin/dashboard?sale=1,x", "admin-token-0123456789", 400},
		{"other admin calls pass through", "GET", "/admin/limits", "", 599},
		{"metrics pass through", "GET", "/metrics", "", 599},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := do(h, tc.method, tc.path, tc.auth).Response.StatusCode(); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
		})
	}
}

// The sampler reads the counters from the registry, so the rates per
// outcome are deltas between samples divided by the time between them.
func TestDashboardRates(t *testing.T) {
	cm := &counting{g: gatewayRegistry(t)}
	d := newDashboard(t, cm)
	t0 := time.Unix(1_800_000_000, 0)
	d.Sample(t0)
	cm.extra = map[string]uint64{"accepted": 10, "sold_out_flag": 400}
	d.Sample(t0.Add(2 * time.Second))
	st := d.State(t.Context(), t0.Add(2*time.Second), nil)
	if got, want := st.LastSecond["accepted"], 5.0; got != want {
		t.Errorf("accepted/s %v, want %v", got, want)
	}
	if got, want := st.LastSecond["sold_out_flag"], 200.0; got != want {
		t.Errorf("sold_out_flag/s %v, want %v", got, want)
	}
	if got, want := st.Totals["sold_out_flag"], uint64(400); got != want {
		t.Errorf("total sold_out_flag %v, want %v", got, want)
	}
	if _, ok := st.Counters["flashsale_gateway_queue_joins_total"]; !ok {
		t.Errorf("counters %v lack queue joins", st.Counters)
	}
	if got := st.Limits["purchase"].User; got != (ratelimit.Rule{Rate: 1, Burst: 3}) {
		t.Errorf("purchase user limit %+v", got)
	}
	if got := st.Limits["poll"]; got.User != (ratelimit.Rule{Rate: 4, Burst: 10}) || got.IP != nil {
		t.Errorf("ticket polls' limits %+v, want 4/10 per user and none per IP", got)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"series":{"outcomes":[`) {
		t.Errorf("json %s: %v", b, err)
	}
	// The ring keeps the last five minutes.
	for i := range 400 {
		d.Sample(t0.Add(time.Duration(3+i) * time.Second))
	}
	if got := len(d.State(t.Context(), t0, nil).Series.Times); got != d.keep-1 {
		t.Errorf("%d points, want %d", got, d.keep-1)
	}
}

// counting sets purchase counters of the real registry's gathering to
// fixed values, as if requests had been counted (the counters themselves
// are unexported).
type counting struct {
	g     prometheus.Gatherer
	extra map[string]uint64
}

func (c *counting) Gather() ([]*dto.MetricFamily, error) {
	fams, err := c.g.Gather()
	for _, mf := range fams {
		if mf.GetName() != httpapi.Namespace+"_purchases_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if n, ok := c.extra[l.GetValue()]; ok && l.GetName() == "outcome" {
					v := float64(n)
					m.Counter.Value = &v
				}
			}
		}
	}
	return fams, err
}
