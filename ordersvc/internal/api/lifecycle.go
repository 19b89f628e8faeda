package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/accepted"
)

// Error codes of pay and cancel.
const (
	CodeInvalidPaymentRef = "INVALID_PAYMENT_REF"
	CodeProcessing        = "ORDER_PROCESSING"
	CodeAlreadyPaid       = "ALREADY_PAID"
	CodeOrderPaid         = "ORDER_PAID"
	CodeOrderExpired      = "ORDER_EXPIRED"
	CodeOrderCancelled    = "ORDER_CANCELLED"
	CodeOrderRejected     = "ORDER_REJECTED"
	CodePaymentRefUsed    = "PAYMENT_REF_USED"
	// CodePaymentByProvider: the shopper's own pay is off; the payment
	// provider's webhook marks orders PAID.
	CodePaymentByProvider = "PAYMENT_BY_PROVIDER"
)

// cancelReleaseWait bounds how long a cancel waits for its outbox row when
// the relay's pass holds it (relay.ReleaseNow): well inside the request's
// QueryTimeout and the gateway's proxy timeout, so the shopper gets her
// answer; past it the relay returns the unit.
const cancelReleaseWait = 500 * time.Millisecond

// MaxPaymentRefLen is the longest payment reference, in characters.
const MaxPaymentRefLen = 128

// PayRequest is the body of POST /api/flash-sales/orders/{id}/pay.
type PayRequest struct {
	PaymentRef string `json:"paymentRef"`
}

var errInvalidPaymentRef = errors.New("paymentRef: want 1..128 printable characters")

// DecodePayRequest decodes and validates a pay body from untrusted bytes.
func DecodePayRequest(b []byte) (PayRequest, error) {
	var req PayRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return PayRequest{}, fmt.Errorf("%w: %v", errInvalidPaymentRef, err)
	}
	if dec.More() {
		return PayRequest{}, fmt.Errorf("%w: trailing data after the JSON object", errInvalidPaymentRef)
	}
	if !ValidPaymentRef(req.PaymentRef) {
		return PayRequest{}, errInvalidPaymentRef
	}
	return req, nil
}

// ValidPaymentRef reports whether ref is 1..128 printable characters.
func ValidPaymentRef(ref string) bool {
	if ref == "" || !utf8.ValidString(ref) || utf8.RuneCountInString(ref) > MaxPaymentRefLen {
		return false
	}
	for _, r := range ref {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// orderCaller authenticates an order action: the order id from the route,
// the user from the bearer token. It answers the refusal itself.
func (p *Public) orderCaller(rctx *fasthttp.RequestCtx) (uuid.UUID, string, bool) {
	raw, _ := rctx.UserValue("orderId").(string)
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		errInvalidOrderID.Write(rctx)
		return uuid.Nil, "", false
	}
	token := bearer(rctx)
	if len(token) == 0 {
		writeUnauthorized(rctx)
		return uuid.Nil, "", false
	}
	user, err := p.verifier.UserID(string(token))
	if err != nil {
		writeUnauthorized(rctx)
		return uuid.Nil, "", false
	}
	return id, user, true
}

// pay records the owner's payment reference on a PENDING order.
func (p *Public) pay(base context.Context, rctx *fasthttp.RequestCtx) {
	id, user, ok := p.orderCaller(rctx)
	if !ok {
		return
	}
	if p.providerPays {
		writeError(rctx, fasthttp.StatusForbidden, CodePaymentByProvider,
			"orders are paid through the payment provider: the order turns PAID when the provider confirms the payment")
		return
	}
	req, err := DecodePayRequest(rctx.PostBody())
	if err != nil {
		writeError(rctx, fasthttp.StatusBadRequest, CodeInvalidPaymentRef, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	tr, err := p.store.Pay(ctx, id, user, req.PaymentRef)
	if err != nil {
		refuseOrder(ctx, rctx, p.redis, p.log, "pay", id, user, err)
		return
	}
	if tr.Changed {
		p.health.metrics.OrdersPaid.Add(1)
	}
	writeJSON(rctx, fasthttp.StatusOK, viewOf(tr.Order))
}

// cancel ends the owner's PENDING order and returns its unit at once.
func (p *Public) cancel(base context.Context, rctx *fasthttp.RequestCtx) {
	id, user, ok := p.orderCaller(rctx)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	tr, err := p.store.Cancel(ctx, id, user)
	if err != nil {
		refuseOrder(ctx, rctx, p.redis, p.log, "cancel", id, user, err)
		return
	}
	if len(tr.SoldDrift) > 0 {
		p.log.Error("sold counter below active orders, clamped at 0; reconcile the sale and find the cause",
			"items", tr.SoldDrift, "order", id)
	}
	if tr.Changed {
		p.health.metrics.OrdersCancelled.Add(1)
	}
	// The unit goes back now, so the shopper can buy again as soon as this
	// answer arrives; if Redis fails the outbox row stays and the relay's
	// next pass returns it, and if Redis is slow the answer does not wait
	// past the request's deadline: the release finishes in the background.
	// A repeat does the same: it is how a shopper whose first cancel
	// committed unheard (its answer lost, or past the deadline) learns the
	// outcome, and its unit may still be queued. A row already released
	// costs one short transaction that claims nothing.
	if _, err := p.relay.ReleaseNow(ctx, []uuid.UUID{id}, cancelReleaseWait); err != nil {
		p.log.Warn("release of a cancelled order deferred to the relay", "order", id, "err", err)
	}
	writeJSON(rctx, fasthttp.StatusOK, viewOf(tr.Order))
}

// refuseOrder answers a failed pay or cancel. An order PostgreSQL does not
// have is PROCESSING when the gateway accepted it for this user: the caller
// retries shortly. user "" is the payment provider (any owner).
func refuseOrder(ctx context.Context, rctx *fasthttp.RequestCtx, rc rueidis.Client, log *slog.Logger,
	action string, id uuid.UUID, user string, err error) {
	if !errors.Is(err, store.ErrNotFound) {
		refuseTransition(rctx, action, err, log)
		return
	}
	owner, ok, aerr := accepted.Owner(ctx, rc, id.String())
	switch {
	case aerr != nil:
		log.Warn("accepted-order lookup failed", "err", aerr)
		writeUnavailable(rctx)
	case ok && (user == "" || owner == user):
		rctx.Response.Header.Set("Retry-After", "1")
		writeError(rctx, fasthttp.StatusConflict, CodeProcessing, "the order is being processed; retry shortly")
	default:
		errNotFound.Write(rctx)
	}
}

// refuseTransition maps the store's lifecycle refusals to 409 answers.
func refuseTransition(rctx *fasthttp.RequestCtx, action string, err error, log *slog.Logger) {
	conflict := func(code, msg string) { writeError(rctx, fasthttp.StatusConflict, code, msg) }
	switch {
	case errors.Is(err, store.ErrPaid) && action == "pay":
		conflict(CodeAlreadyPaid, "the order is already paid with another payment reference")
	case errors.Is(err, store.ErrPaid):
		conflict(CodeOrderPaid, "a paid order cannot be cancelled")
	case errors.Is(err, store.ErrExpired):
		conflict(CodeOrderExpired, "the payment window has closed; the unit went back on sale")
	case errors.Is(err, store.ErrCancelled):
		conflict(CodeOrderCancelled, "the order was cancelled")
	case errors.Is(err, store.ErrRejected):
		conflict(CodeOrderRejected, "the order was rejected; nothing to "+action)
	case errors.Is(err, store.ErrPaymentRefUsed):
		conflict(CodePaymentRefUsed, "this payment reference already paid another order")
	default:
		log.Warn("order transition failed", "action", action, "err", err)
		writeUnavailable(rctx)
	}
}
