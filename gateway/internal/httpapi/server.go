// Package httpapi is the gateway's HTTP surface: the shoppers' API on the
// public listener and health and metrics on the admin listener. Handlers do
// the cheap refusals first (path, gate, sold-out flag, token) so that most
// requests never leave the process.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/admission"
	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/holding"
	"flashsale/gateway/internal/purchase"
	"flashsale/gateway/internal/queue"
	"flashsale/pkg/auth"
	"flashsale/pkg/openapi"
	"flashsale/pkg/stock"
	"flashsale/pkg/telemetry"
)

// API holds what the handlers need.
type API struct {
	Catalog   *catalog.Catalog
	Buyer     *purchase.Buyer
	Verifier  *auth.Verifier
	Queue     *queue.Queue
	Admission *admission.Signer

	PurchaseLimits Limits
	QueueLimits    Limits
	// PollLimits bound each shopper's polls of her ticket
	// (NewPollLimits), apart from QueueLimits.
	PollLimits      Limits
	TrustedProxies  []netip.Prefix
	RedisTimeout    time.Duration
	AdmissionTTL    time.Duration
	PowChallengeTTL time.Duration

	Orders *fasthttp.HostClient // the order service, for /api/flash-sales/orders/*
	// Holding finds a shopper's active order in a sale (GET
	// /api/flash-sales/{saleId}/order); nil answers that call 503.
	Holding *holding.Finder
	// Stock tells the waiting room whether an admitted ticket's admission
	// was spent (state USED); nil: never.
	Stock   *stock.Store
	Log     *slog.Logger
	Metrics *Metrics
	// Ready reports whether dependencies answer; nil means always.
	Ready func(context.Context) error
	// Gatherer is what /metrics serves: the registry holding Metrics, the
	// state Collector, the producer's and the buyer's metrics.
	Gatherer   prometheus.Gatherer
	AdminToken []byte
	// Bypass persists the bypass list for every gateway; nil disables the endpoint.
	Bypass BypassStore
	// BaseCtx outlives every request; purchases derive their timeouts from
	// it because a RequestCtx has no deadline and is recycled after return.
	BaseCtx context.Context
	Now     func() time.Time

	draining atomic.Bool
	rates    sync.Map // sale id -> admission rate last seen (float64)
	gauges   gauges
	bypass   atomic.Pointer[map[string]struct{}]
	// bypassFrom are bypass's two sources; mu orders their changes.
	// changes counts the shared list's changes made through this
	// gateway's admin API (see RefreshBypass).
	bypassFrom struct {
		mu                 sync.Mutex
		configured, shared []string
		changes            uint64
	}
}

// SetBypass replaces the users operators let past the queue through the
// admin API (the list every gateway reads from Redis) with the list a
// change through this gateway's admin API left. Together with the
// configured ones (SetConfiguredBypass) they need no admission token.
func (a *API) SetBypass(shared []string) {
	a.bypassFrom.mu.Lock()
	defer a.bypassFrom.mu.Unlock()
	a.bypassFrom.shared = shared
	a.bypassFrom.changes++
	a.storeBypass()
}

// BypassChanges is what RefreshBypass needs to know of the changes made
// before a read of the shared list: call it before the read.
func (a *API) BypassChanges() uint64 {
	a.bypassFrom.mu.Lock()
	defer a.bypassFrom.mu.Unlock()
	return a.bypassFrom.changes
}

// RefreshBypass replaces the shared list with one read from Redis after
// BypassChanges returned changes, unless a change through the admin API
// was applied since: the read may have come before that change's write,
// and applying it would step the list back until the next refresh. It
// reports whether the list was applied.
func (a *API) RefreshBypass(changes uint64, shared []string) bool {
	a.bypassFrom.mu.Lock()
	defer a.bypassFrom.mu.Unlock()
	if a.bypassFrom.changes != changes {
		return false
	}
	a.bypassFrom.shared = shared
	a.storeBypass()
	return true
}

// SetConfiguredBypass replaces FLASHSALE_QUEUE_BYPASS's users.
func (a *API) SetConfiguredBypass(users []string) {
	a.bypassFrom.mu.Lock()
	defer a.bypassFrom.mu.Unlock()
	a.bypassFrom.configured = users
	a.storeBypass()
}

func (a *API) storeBypass() {
	m := make(map[string]struct{}, len(a.bypassFrom.configured)+len(a.bypassFrom.shared))
	for _, u := range a.bypassFrom.configured {
		m[u] = struct{}{}
	}
	for _, u := range a.bypassFrom.shared {
		m[u] = struct{}{}
	}
	a.bypass.Store(&m)
}

// configuredBypass reports whether user is in FLASHSALE_QUEUE_BYPASS.
func (a *API) configuredBypass(user string) bool {
	a.bypassFrom.mu.Lock()
	defer a.bypassFrom.mu.Unlock()
	return slices.Contains(a.bypassFrom.configured, user)
}

func (a *API) bypasses(user string) bool {
	m := a.bypass.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[user]
	return ok
}

// SetDraining makes /readyz fail so load balancers stop sending traffic.
func (a *API) SetDraining() { a.draining.Store(true) }

// Public returns the shoppers' handler.
func (a *API) Public() fasthttp.RequestHandler {
	r := router.New()
	r.GET("/api/flash-sales/orders/{orderId}", a.proxyOrder)
	r.POST("/api/flash-sales/orders/{orderId}/{action}", a.proxyOrder)
	r.GET("/api/flash-sales/{saleId}", a.saleInfo)
	r.GET("/api/flash-sales/{saleId}/order", a.myOrder)
	r.POST("/api/flash-sales/{saleId}/queue", a.queueJoin)
	r.GET("/api/flash-sales/{saleId}/queue/challenge", a.queueChallenge)
	r.GET("/api/flash-sales/{saleId}/queue/{ticket}", a.queueStatus)
	r.POST("/api/flash-sales/{saleId}/g/{gate}/items/{itemId}/purchase", a.purchase)
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET(openapi.Path, openapi.Serve)
	r.NotFound = errNotFound.Write
	r.MethodNotAllowed = errMethod.Write
	r.HandleMethodNotAllowed = true
	routed := r.Handler
	// The purchase route takes the whole crowd; it is matched here, in
	// place, because the router's path values cost 9 allocations a request.
	// It is matched on the path as sent, as the router matches every other
	// route: on the decoded, normalized one, "/api/flash-sales/%31/…" and
	// "…/items/2/./purchase" bought too, where the sale's own page at
	// "/api/flash-sales/%31" is 404, so an item had more than one URL. Now
	// the first is 404 and the second the router's 308 to the one URL.
	return func(ctx *fasthttp.RequestCtx) {
		if ctx.IsPost() {
			if p, ok := matchPurchase(ctx.Request.URI().PathOriginal()); ok {
				a.buy(ctx, p.saleID, p.itemID, p.gate, p.idsOK)
				return
			}
		}
		routed(ctx)
	}
}

// Admin returns the operators' handler (metrics, health).
func (a *API) Admin() fasthttp.RequestHandler { return a.adminRouter().Handler }

// adminRouter routes the admin listener (its test walks the routes).
func (a *API) adminRouter() *router.Router {
	r := router.New()
	r.GET("/metrics", telemetry.Handler(a.Gatherer))
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET(openapi.Path, openapi.Serve)
	r.GET("/admin/limits", a.admin(a.getLimits))
	r.PUT("/admin/limits", a.admin(a.putLimits))
	r.GET("/admin/sales/{saleId}/queue", a.admin(a.getQueue))
	r.PUT("/admin/sales/{saleId}/admission-rate", a.admin(a.putAdmissionRate))
	r.GET("/admin/queue/bypass", a.admin(a.getBypass))
	r.PUT("/admin/queue/bypass", a.admin(a.putBypass))
	r.NotFound = errNotFound.Write
	r.MethodNotAllowed = errMethod.Write
	r.HandleMethodNotAllowed = true
	return r
}

// CountPanic counts a handler panic on /metrics (the listeners' Recover,
// pkg/httpserver, calls it).
func (a *API) CountPanic() { a.Metrics.panics.Inc() }

// CountConnRefused counts a connection a listener's limit refused (the
// listeners' connection limits, pkg/httpserver, call it).
func (a *API) CountConnRefused(reason string) { a.Metrics.connsRefused.WithLabelValues(reason).Inc() }

// pathID parses a path id in its one canonical form (openapi.ParseID).
func pathID(ctx *fasthttp.RequestCtx, name string) (int64, bool) {
	s, _ := ctx.UserValue(name).(string)
	return openapi.ParseID(s)
}

var bearerPrefix = []byte("Bearer ")

// HeaderAdmission carries the admission token on a purchase.
const HeaderAdmission = "X-Admission-Token"

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (a *API) userID(ctx *fasthttp.RequestCtx) (string, bool) {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if !bytes.HasPrefix(h, bearerPrefix) || len(h) > auth.MaxTokenLen+len(bearerPrefix) {
		return "", false
	}
	u, err := a.Verifier.UserID(string(h[len(bearerPrefix):]))
	return u, err == nil
}

// purchase is the router's entry (used when the fast match below did not
// apply, e.g. for odd encodings); it reads the path values the router set.
func (a *API) purchase(ctx *fasthttp.RequestCtx) {
	saleID, ok1 := pathID(ctx, "saleId")
	itemID, ok2 := pathID(ctx, "itemId")
	gate, _ := ctx.UserValue("gate").(string)
	a.buy(ctx, saleID, itemID, []byte(gate), ok1 && ok2)
}

// buy runs the purchase checks, cheapest first.
func (a *API) buy(ctx *fasthttp.RequestCtx, saleID, itemID int64, gate []byte, idsOK bool) {
	p, ok := a.admitPurchase(ctx, saleID, itemID, gate, idsOK)
	if !ok {
		return
	}
	start := time.Now()
	receipt, err := a.Buyer.Buy(a.BaseCtx, saleID, itemID, p.user, p.tokenID)
	a.Metrics.observe(time.Since(start))
	a.answerPurchase(ctx, p.item, receipt, err)
}

// admittedPurchase is a purchase every edge check let through.
type admittedPurchase struct {
	item    *catalog.Item
	user    string
	tokenID string // the admission token's id when the sale is queued
}

// admitPurchase runs the edge's checks, cheapest first, and answers the
// refusal itself when one fails (ok false): the URL names an open sale's
// item behind the right gate, the item is not flagged sold out, the
// shopper's address and then her verified token are within the limits,
// and in a queued sale she was admitted.
func (a *API) admitPurchase(ctx *fasthttp.RequestCtx, saleID, itemID int64, gate []byte, idsOK bool) (admittedPurchase, bool) {
	if !idsOK {
		a.refuse(ctx, outNotFound, errNotFound)
		return admittedPurchase{}, false
	}
	sale, ok := a.Catalog.Sale(saleID)
	if !ok {
		a.refuse(ctx, outNotFound, errNotFound)
		return admittedPurchase{}, false
	}
	// Before the opening or on a wrong gate the purchase URL does not
	// exist: the same 404 for both, so a guess learns nothing. After the
	// end, the right gate (which only admitted shoppers were given) hears
	// 410 SALE_ENDED: the sale's state is public anyway, and "gone for
	// good" tells a client to stop retrying, where 404 read like a bad URL.
	if now := a.Now(); !sale.CheckGate(gate) || now.Before(sale.StartsAt) {
		a.refuse(ctx, outGateClosed, errNotFound)
		return admittedPurchase{}, false
	} else if !sale.IsOpen(now) {
		a.refuse(ctx, outGateClosed, errSaleEnded)
		return admittedPurchase{}, false
	}
	item, ok := sale.Item(itemID)
	if !ok {
		a.refuse(ctx, outNotFound, errNotFound)
		return admittedPurchase{}, false
	}
	if item.SoldOut() {
		a.refuse(ctx, outSoldOutFlag, errSoldOut)
		return admittedPurchase{}, false
	}
	if !a.allowIP(ctx, a.PurchaseLimits) {
		a.Metrics.count(outRateLimitedIP)
		return admittedPurchase{}, false
	}
	user, ok := a.userID(ctx)
	if !ok {
		a.refuse(ctx, outUnauthorized, errUnauthorized)
		return admittedPurchase{}, false
	}
	if !a.allowUser(ctx, a.PurchaseLimits, user) {
		a.Metrics.count(outRateLimitedUser)
		return admittedPurchase{}, false
	}
	p := admittedPurchase{item: item, user: user}
	if sale.Queue.Enabled && !a.bypasses(user) {
		tok, err := a.Admission.Verify(string(ctx.Request.Header.Peek(HeaderAdmission)), saleID, user, a.Now())
		if err != nil {
			a.refuse(ctx, outNotAdmitted, errNotAdmitted)
			return admittedPurchase{}, false
		}
		p.tokenID = tok.ID
	}
	return p, true
}

// answerPurchase answers what Buy came to: 202 with the order, or the
// refusal that explains why not.
func (a *API) answerPurchase(ctx *fasthttp.RequestCtx, item *catalog.Item, receipt purchase.Receipt, err error) {
	switch {
	case err == nil:
		a.Metrics.count(outAccepted)
		if receipt.Replayed {
			a.Metrics.replays.Inc()
		}
		writeReceipt(ctx, receipt)
	case errors.Is(err, stock.ErrSoldOut):
		item.MarkSoldOut()
		a.refuse(ctx, outSoldOut, errSoldOut)
	case errors.Is(err, stock.ErrAlreadyPurchased) && receipt.OrderID != uuid.Nil:
		// Her order is of another item: she learns which (only she: the
		// user comes from her verified token).
		a.Metrics.count(outAlreadyPurchased)
		errAlreadyPurchased.WriteOrder(ctx, receipt.OrderID.String())
	case errors.Is(err, stock.ErrAlreadyPurchased):
		a.refuse(ctx, outAlreadyPurchased, errAlreadyPurchased)
	case errors.Is(err, stock.ErrTokenSpent):
		a.refuse(ctx, outNotAdmitted, errAdmissionUsed)
	case errors.Is(err, purchase.ErrUnresolved), errors.Is(err, holding.ErrUnconfirmed):
		// The order may still appear: give its id so the shopper can poll it.
		a.Metrics.count(outUnavailable)
		errUnavailable.WriteOrder(ctx, receipt.OrderID.String())
	case errors.Is(err, stock.ErrNotLoaded):
		// Never a false SOLD_OUT: the stock is unknown until reloaded
		// from PostgreSQL. The counter is the alert, not a log per request.
		a.refuse(ctx, outNotLoaded, errUnavailable)
	default:
		a.refuse(ctx, outUnavailable, errUnavailable)
	}
}

// writeReceipt answers 202 {"orderId","status"} without an encoder.
func writeReceipt(ctx *fasthttp.RequestCtx, r purchase.Receipt) {
	ctx.Response.Header.SetContentTypeBytes(contentJSON)
	ctx.SetStatusCode(fasthttp.StatusAccepted)
	var buf [96]byte
	out := append(buf[:0], `{"orderId":"`...)
	out = append(out, r.OrderID.String()...)
	out = append(out, `","status":"`...)
	out = append(out, r.Status...)
	out = append(out, `"}`...)
	_, _ = ctx.Response.BodyWriter().Write(out)
}

func (a *API) refuse(ctx *fasthttp.RequestCtx, o outcome, e apiError) {
	a.Metrics.count(o)
	e.Write(ctx)
}

func (a *API) healthz(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ok"}`)
}

func (a *API) readyz(ctx *fasthttp.RequestCtx) {
	if a.draining.Load() {
		errUnavailable.Write(ctx)
		return
	}
	if a.Ready != nil {
		c, cancel := context.WithTimeout(a.BaseCtx, time.Second)
		defer cancel()
		if err := a.Ready(c); err != nil {
			errUnavailable.Write(ctx)
			return
		}
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ready"}`)
}
