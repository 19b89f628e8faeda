package api

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/openapi"
	"flashsale/pkg/telemetry"
)

// ReadyChecker reports whether a component can do its work (the consumer).
type ReadyChecker interface {
	Ready() error
}

// Health answers /healthz, /readyz and /metrics.
type Health struct {
	store    *store.Store
	checks   map[string]ReadyChecker
	metrics  *metrics.Counters
	scrape   fasthttp.RequestHandler // /metrics: the registry, in the format asked for
	draining atomic.Bool
}

// NewHealth builds the health endpoints; checks are named components that
// must be ready besides PostgreSQL.
func NewHealth(st *store.Store, m *metrics.Counters, checks map[string]ReadyChecker) *Health {
	return &Health{store: st, metrics: m, checks: checks, scrape: telemetry.Handler(m.Gatherer())}
}

// Drain marks the service unready, first step of shutdown, so load
// balancers stop sending before the listeners close.
func (h *Health) Drain() { h.draining.Store(true) }

// listener is which of the service's listeners the endpoints go on.
type listener int

const (
	publicListener listener = iota + 1
	adminListener
)

// register adds the health endpoints to a listener's router. The public
// one gets no /metrics (the gateway's public listener has none either;
// Prometheus scrapes the admin one), and its /readyz names the failing
// checks without their errors, which name the database's user and host.
func (h *Health) register(base context.Context, r *router.Router, on listener) {
	r.GET("/healthz", h.healthz)
	r.GET("/readyz", func(ctx *fasthttp.RequestCtx) { h.readyz(base, ctx, on == adminListener) })
	if on == adminListener {
		r.GET("/metrics", h.scrape)
	}
	r.GET(openapi.Path, openapi.Serve)
}

var bodyOK = []byte(`{"status":"ok"}`)

func (h *Health) healthz(ctx *fasthttp.RequestCtx) { writeRaw(ctx, fasthttp.StatusOK, bodyOK) }

type readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (h *Health) readyz(base context.Context, rctx *fasthttp.RequestCtx, detail bool) {
	res := readiness{Status: "ok", Checks: map[string]string{}}
	fail := func(name, msg string) {
		res.Status = "unavailable"
		if !detail {
			msg = "unavailable"
		}
		res.Checks[name] = msg
	}
	if h.draining.Load() {
		fail("service", "shutting down")
	}
	ctx, cancel := context.WithTimeout(base, time.Second)
	err := h.store.Ping(ctx)
	cancel()
	if err != nil {
		fail("postgres", err.Error())
	} else {
		res.Checks["postgres"] = "ok"
	}
	for name, c := range h.checks {
		if err := c.Ready(); err != nil {
			fail(name, err.Error())
		} else {
			res.Checks[name] = "ok"
		}
	}
	status := fasthttp.StatusOK
	if res.Status != "ok" {
		status = fasthttp.StatusServiceUnavailable
		rctx.Response.Header.Set("Retry-After", "1")
	}
	writeJSON(rctx, status, res)
}
