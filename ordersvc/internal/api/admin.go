package api

import (
	"flashsale/pkg/adminauth"

	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/adminapi"
	"flashsale/pkg/openapi"
	"flashsale/pkg/stock"
)

// AdminTimeout bounds one admin operation (fasthttp's own Deadline is always zero).
const AdminTimeout = 30 * time.Second

// StatusTimeout bounds the sale status (counts of orders by status), which
// dashboards poll every second and give up on well before: a slow count
// must end rather than pile up on the database the consumer writes to.
const StatusTimeout = 3 * time.Second

// Admin serves the operators' endpoints on the admin listener.
type Admin struct {
	sales   *sale.Service
	check   adminauth.Check
	health  *Health
	webhook *PaymentWebhook
	log     *slog.Logger
	// stopping ends when the service shuts down: the long operations
	// (load-stock and repairs, which wait for the consumer) stop then, since
	// a stopping consumer commits nothing more and they could only time out.
	stopping context.Context
}

// NewAdmin builds the admin API; token is the bearer credential. webhook
// is the payment provider's endpoint, nil when none is configured.
func NewAdmin(s *sale.Service, token []byte, h *Health, webhook *PaymentWebhook, log *slog.Logger) *Admin {
	return &Admin{sales: s, check: adminauth.New(token), health: h, webhook: webhook, log: log,
		stopping: context.Background()}
}

// StopLongOpsWith ends load-stock and reconcile requests in progress when
// ctx ends (the service's shutdown), instead of letting them run out their
// catch-up bound past the shutdown timeout.
func (a *Admin) StopLongOpsWith(ctx context.Context) *Admin {
	a.stopping = ctx
	return a
}

// longOp is the context of a load-stock or reconcile: base's values, the
// admin timeout plus the catch-up bound, cancelled at shutdown.
func (a *Admin) longOp(base context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(base, AdminTimeout+a.sales.CatchUpTimeout())
	stop := context.AfterFunc(a.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// Handler routes the admin listener; timeouts derive from base (see
// Public.Handler). Health and metrics need no token: probes and scrapers
// reach them on the internal listener.
func (a *Admin) Handler(base context.Context) fasthttp.RequestHandler {
	return a.router(base).Handler
}

// router routes the admin listener (its test walks the routes).
func (a *Admin) router(base context.Context) *router.Router {
	r := router.New()
	with := func(h func(context.Context, *fasthttp.RequestCtx)) fasthttp.RequestHandler {
		return a.auth(func(ctx *fasthttp.RequestCtx) { h(base, ctx) })
	}
	r.POST("/admin/sales", with(a.createSale))
	r.GET("/admin/sales/{saleId}", with(a.getSale))
	r.POST("/admin/sales/{saleId}/load-stock", with(a.loadStock))
	r.POST("/admin/sales/{saleId}/reconcile", with(a.reconcile))
	r.GET("/admin/sales/{saleId}/status", with(a.status))
	if a.webhook != nil {
		// Authenticated by the body's signature, not the admin token.
		r.POST("/webhooks/payment", func(ctx *fasthttp.RequestCtx) { a.webhook.handle(base, ctx) })
		r.GET("/admin/payments/refused", with(a.webhook.listRefused))
		r.POST("/admin/payments/refused/settle", with(a.webhook.settleRefused))
	}
	a.health.register(base, r, adminListener)
	r.NotFound = notFound
	r.MethodNotAllowed = methodNotAllowed
	return r
}

// auth is the admin credential check every admin listener shares
// (pkg/adminauth).
func (a *Admin) auth(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return a.check.Wrap(next)
}

func saleID(ctx *fasthttp.RequestCtx) (int64, bool) {
	raw, _ := ctx.UserValue("saleId").(string)
	id, ok := openapi.ParseID(raw)
	if !ok {
		writeError(ctx, fasthttp.StatusBadRequest, CodeBadRequest, "sale id must be a positive integer without leading zeros")
		return 0, false
	}
	return id, true
}

// Create-sale's idempotency headers: a request with a key makes its sale
// once, and a retry's answer says it was replayed.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// createSale creates a sale: 201 with the sale. With an Idempotency-Key
// header a retry gets the same sale (201, Idempotent-Replayed: true) and the
// key with another request 422 IDEMPOTENCY_KEY_REUSED.
func (a *Admin) createSale(base context.Context, rctx *fasthttp.RequestCtx) {
	ns, err := sale.DecodeCreate(rctx.PostBody())
	if err != nil {
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	var key string
	switch keys := rctx.Request.Header.PeekAll(HeaderIdempotencyKey); {
	case len(keys) > 1:
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, "one Idempotency-Key header, not several")
		return
	case len(keys) == 1 && len(keys[0]) == 0:
		// Present but empty would be "no key": a retry would make a
		// second sale, which is what the caller sent a key to prevent.
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, "Idempotency-Key: empty")
		return
	case len(keys) == 1:
		key = string(keys[0])
	}
	ctx, cancel := context.WithTimeout(base, AdminTimeout)
	defer cancel()
	v, replayed, err := a.sales.CreateOnce(ctx, key, ns)
	if err != nil {
		a.fail(rctx, "create sale", err)
		return
	}
	if replayed {
		// The answer the first call got: the retry changes nothing.
		a.log.Info("sale create replayed", "sale", v.ID, "idempotencyKey", key)
		rctx.Response.Header.Set(HeaderIdempotentReplayed, "true")
	} else {
		a.log.Info("sale created", "sale", v.ID, "items", len(v.Items))
	}
	writeJSON(rctx, fasthttp.StatusCreated, v)
}

func (a *Admin) getSale(base context.Context, rctx *fasthttp.RequestCtx) {
	id, ok := saleID(rctx)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(base, AdminTimeout)
	defer cancel()
	v, err := a.sales.Describe(ctx, id)
	if err != nil {
		a.fail(rctx, "describe sale", err)
		return
	}
	writeJSON(rctx, fasthttp.StatusOK, v)
}

// boolQuery reads an optional true/false query argument (false when absent);
// it answers 400 itself and returns ok false when the value is neither.
func boolQuery(rctx *fasthttp.RequestCtx, name string) (v, ok bool) {
	args := rctx.QueryArgs()
	if !args.Has(name) {
		return false, true
	}
	v, err := strconv.ParseBool(string(args.Peek(name)))
	if err != nil {
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, name+" must be true or false")
		return false, false
	}
	return v, true
}

// loadStock writes the sale's Redis copy from PostgreSQL (sale.LoadStock):
// 409 SALE_LIVE when the sale is open and already loaded, unless
// ?force=true.
func (a *Admin) loadStock(base context.Context, rctx *fasthttp.RequestCtx) {
	id, ok := saleID(rctx)
	if !ok {
		return
	}
	force, ok := boolQuery(rctx, "force")
	if !ok {
		return
	}
	ctx, cancel := a.longOp(base)
	defer cancel()
	res, err := a.sales.LoadStock(ctx, id, force)
	if err != nil {
		a.fail(rctx, "load stock", err)
		return
	}
	a.log.Info("stock loaded", "sale", id, "items", len(res.Items), "holders", res.Holders, "spent_admissions", res.SpentAdmissions, "force", force)
	writeJSON(rctx, fasthttp.StatusOK, res)
}

// reconcile compares the sale's Redis copy with PostgreSQL and, with
// ?repair=true, rewrites Redis from PostgreSQL once the consumer group has
// caught up (409 CONSUMER_LAGGING when it does not within the bound). The
// answer is 200 with the verdict in the body (clean, differences) either
// way; the sale service exports the verdict to /metrics.
func (a *Admin) reconcile(base context.Context, rctx *fasthttp.RequestCtx) {
	id, ok := saleID(rctx)
	if !ok {
		return
	}
	repair, ok := boolQuery(rctx, "repair")
	if !ok {
		return
	}
	ctx, cancel := a.longOp(base)
	defer cancel()
	rec, err := a.sales.Reconcile(ctx, id, repair)
	if err != nil {
		a.fail(rctx, "reconcile", err)
		return
	}
	if !rec.Clean {
		a.log.Warn("redis differs from postgres", "sale", id, "differences", len(rec.Differences),
			"inFlight", rec.InFlight, "leaked", rec.Leaked, "repaired", rec.Repaired)
	}
	writeJSON(rctx, fasthttp.StatusOK, rec)
}

// status answers the sale's order figures for the operators' dashboard
// (sale.Status): orders by status overall and per item, the consumer lag,
// the last reconcile verdict of this process.
func (a *Admin) status(base context.Context, rctx *fasthttp.RequestCtx) {
	id, ok := saleID(rctx)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(base, StatusTimeout)
	defer cancel()
	st, err := a.sales.Status(ctx, id)
	if err != nil {
		a.fail(rctx, "sale status", err)
		return
	}
	writeJSON(rctx, fasthttp.StatusOK, st)
}

func (a *Admin) fail(rctx *fasthttp.RequestCtx, op string, err error) {
	var lagging *lag.LaggingError
	switch {
	case errors.As(err, &lagging):
		a.log.Warn("stock not computed: the order consumer lags", "op", op, "lag", lagging.Lag.Total)
		rctx.Response.Header.Set("Retry-After", "5")
		writeJSON(rctx, fasthttp.StatusConflict, adminapi.Lagging{Error: CodeConsumerLagging, Message: op + ": " + err.Error(), Lag: lagging.Lag})
	case errors.Is(err, store.ErrNotFound):
		writeError(rctx, fasthttp.StatusNotFound, CodeNotFound, "no such sale")
	case errors.Is(err, sale.ErrInvalid):
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.Is(err, sale.ErrKeyReused):
		writeError(rctx, fasthttp.StatusUnprocessableEntity, CodeKeyReused, "the idempotency key already made another sale; use a new key for a new sale")
	case errors.Is(err, sale.ErrLive):
		writeError(rctx, fasthttp.StatusConflict, CodeSaleLive, err.Error())
	case errors.Is(err, stock.ErrBusy), errors.Is(err, sale.ErrWriting):
		rctx.Response.Header.Set("Retry-After", "1")
		writeError(rctx, fasthttp.StatusConflict, CodeBusy, err.Error())
	case errors.Is(err, stock.ErrNotLoaded):
		writeError(rctx, fasthttp.StatusServiceUnavailable, CodeUnavailable, "stock not loaded in Redis")
	default:
		a.log.Warn("admin request failed", "op", op, "err", err)
		rctx.Response.Header.Set("Retry-After", "1")
		writeError(rctx, fasthttp.StatusServiceUnavailable, CodeUnavailable, op+" failed: "+err.Error())
	}
}
