package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/accepted"
	"flashsale/pkg/auth"
)

// QueryTimeout bounds one PostgreSQL read of a request.
const QueryTimeout = 2 * time.Second

// Public serves the shoppers' endpoints behind the gateway.
type Public struct {
	store    *store.Store
	redis    rueidis.Client // the gateway's records of accepted, not yet persisted orders
	relay    *relay.Relay   // returns a cancelled order's unit right after the commit
	verifier *auth.Verifier
	health   *Health
	log      *slog.Logger
	// providerPays refuses the shopper's own pay (see ProviderPaysOnly).
	providerPays bool
}

// NewPublic builds the public API.
func NewPublic(st *store.Store, rc rueidis.Client, rl *relay.Relay, v *auth.Verifier, h *Health, log *slog.Logger) *Public {
	return &Public{store: st, redis: rc, relay: rl, verifier: v, health: h, log: log}
}

// ProviderPaysOnly makes the shopper's own pay answer 403
// PAYMENT_BY_PROVIDER: with a payment provider's webhook configured, only
// its signed confirmation marks an order PAID, so a shopper cannot pay
// herself with a made-up reference (config.PublicPay). Call it before
// Handler.
func (p *Public) ProviderPaysOnly() *Public {
	p.providerPays = true
	return p
}

const ordersPrefix = "/api/flash-sales/orders/"

// Handler routes the public listener. Request timeouts derive from base,
// never from the *RequestCtx: a context derived from it outlives the
// handler in the goroutine context.WithTimeout starts for a foreign parent,
// which then reads the recycled RequestCtx (a data race the race detector
// caught here). The order lookup, the one route shoppers hit in volume, is
// matched before the router: capturing a route parameter costs the router
// three allocations per request, and refusals here must cost none.
func (p *Public) Handler(base context.Context) fasthttp.RequestHandler {
	r := router.New()
	r.GET(ordersPrefix+"{orderId}", func(ctx *fasthttp.RequestCtx) {
		id, _ := ctx.UserValue("orderId").(string)
		p.getOrder(base, ctx, []byte(id))
	})
	r.POST(ordersPrefix+"{orderId}/pay", func(ctx *fasthttp.RequestCtx) { p.pay(base, ctx) })
	r.POST(ordersPrefix+"{orderId}/cancel", func(ctx *fasthttp.RequestCtx) { p.cancel(base, ctx) })
	p.health.register(base, r, publicListener)
	r.NotFound = notFound
	r.MethodNotAllowed = methodNotAllowed
	routed := r.Handler
	return func(ctx *fasthttp.RequestCtx) {
		if id, ok := bytes.CutPrefix(ctx.Path(), []byte(ordersPrefix)); ok && ctx.IsGet() && bytes.IndexByte(id, '/') < 0 {
			p.getOrder(base, ctx, id)
			return
		}
		routed(ctx)
	}
}

// OrderView is the JSON of an order to its owner.
type OrderView struct {
	OrderID      uuid.UUID  `json:"orderId"`
	SaleID       int64      `json:"saleId"`
	ItemID       int64      `json:"itemId"`
	Status       string     `json:"status"`
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    time.Time  `json:"expiresAt"`
	PaidAt       *time.Time `json:"paidAt,omitempty"`
	RejectReason string     `json:"rejectReason,omitempty"`
}

var bearerPrefix = []byte("bearer ")

// bearer extracts the token of an "Authorization: Bearer x" header.
func bearer(ctx *fasthttp.RequestCtx) []byte {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if len(h) < len(bearerPrefix) || !bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return nil
	}
	return bytes.TrimSpace(h[len(bearerPrefix):])
}

// getOrder answers the order to its owner. The cheap refusals come first:
// a malformed id, then a missing token, before any signature is checked.
func (p *Public) getOrder(base context.Context, rctx *fasthttp.RequestCtx, rawID []byte) {
	id, err := uuid.ParseBytes(rawID)
	if err != nil || len(rawID) != 36 { // only the canonical form, as the gateway hands it out
		errInvalidOrderID.Write(rctx)
		return
	}
	token := bearer(rctx)
	if len(token) == 0 {
		writeUnauthorized(rctx)
		return
	}
	user, err := p.verifier.UserID(string(token))
	if err != nil {
		writeUnauthorized(rctx)
		return
	}
	// The timeout bounds a slow database (fasthttp's Deadline is always zero).
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	o, err := p.store.GetOrder(ctx, id)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		p.notPersisted(base, rctx, id, user)
		return
	case err != nil:
		p.log.Warn("order lookup failed", "err", err)
		writeUnavailable(rctx)
		return
	case o.UserID != user:
		// Same answer as an unknown id: ids of other users' orders are not revealed.
		errNotFound.Write(rctx)
		return
	}
	writeJSON(rctx, fasthttp.StatusOK, viewOf(o))
}

func viewOf(o store.Order) OrderView {
	return OrderView{
		OrderID: o.ID, SaleID: o.SaleID, ItemID: o.ItemID, Status: o.Status,
		CreatedAt: o.CreatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(), PaidAt: utc(o.PaidAt), RejectReason: o.RejectReason,
	}
}

// ProcessingView is the answer for an order the gateway accepted that is
// not in PostgreSQL yet.
type ProcessingView struct {
	OrderID uuid.UUID `json:"orderId"`
	Status  string    `json:"status"`
}

// StatusProcessing: accepted by the gateway, on its way through Kafka.
const StatusProcessing = "PROCESSING"

// notPersisted answers for an id PostgreSQL does not know: PROCESSING when
// the gateway recorded it as accepted for this user, 404 otherwise.
func (p *Public) notPersisted(base context.Context, rctx *fasthttp.RequestCtx, id uuid.UUID, user string) {
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	owner, ok, err := accepted.Owner(ctx, p.redis, id.String())
	cancel()
	switch {
	case err != nil:
		// Without the record we cannot tell an order in flight from a
		// made-up id; a 404 could make a shopper give up a real order.
		p.log.Warn("accepted-order lookup failed", "err", err)
		writeUnavailable(rctx)
	case !ok || owner != user:
		errNotFound.Write(rctx)
	default:
		writeJSON(rctx, fasthttp.StatusOK, ProcessingView{OrderID: id, Status: StatusProcessing})
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
