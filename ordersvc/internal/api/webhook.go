package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/httperr"
)

// HeaderPaymentSignature carries "sha256=" and the hex HMAC-SHA256 of the
// raw body under the shared webhook secret.
const HeaderPaymentSignature = "X-Payment-Signature"

// CodeInvalidSignature refuses a webhook call whose signature does not match.
const CodeInvalidSignature = "INVALID_SIGNATURE"

// PaymentConfirmation is the body the payment provider posts.
type PaymentConfirmation struct {
	OrderID    string `json:"orderId"`
	PaymentRef string `json:"paymentRef"`
}

// PaymentWebhook marks orders PAID on the payment provider's signed
// confirmation, under the same rules as a shopper's pay call (owner aside:
// the signature vouches for the payment). A replayed confirmation is
// harmless: the same reference on a PAID order is a no-op.
type PaymentWebhook struct {
	store   *store.Store
	redis   rueidis.Client
	secret  []byte
	metrics *metrics.Counters
	log     *slog.Logger
}

// NewPaymentWebhook builds the webhook; secret must not be empty.
func NewPaymentWebhook(st *store.Store, rc rueidis.Client, secret []byte, m *metrics.Counters, log *slog.Logger) (*PaymentWebhook, error) {
	if len(secret) == 0 {
		return nil, errors.New("payment webhook: empty secret")
	}
	return &PaymentWebhook{store: st, redis: rc, secret: secret, metrics: m, log: log}, nil
}

// Sign returns the signature header value of body under secret (the
// provider's side; tests use it).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

var errInvalidConfirmation = errors.New("want {\"orderId\": UUID, \"paymentRef\": 1..128 printable characters}")

// noteRefusal keeps a signed confirmation refused for good (a 404 or a
// 409 other than ORDER_PROCESSING, which the provider retries): the
// provider has taken the money and the order will not be paid, so someone
// must refund it or honour it by hand. The refusal answer alone reached
// only the provider; the row in payment_refused stays until an operator
// marks it settled (GET /admin/payments/refused lists them).
//
// When the row cannot be written the answer becomes 503, which the
// provider retries: the refusal alone would be final to the provider, and
// a log line all that is left of the money.
func (w *PaymentWebhook) noteRefusal(base context.Context, rctx *fasthttp.RequestCtx, id uuid.UUID, ref string) {
	status := rctx.Response.StatusCode()
	if status != fasthttp.StatusNotFound && status != fasthttp.StatusConflict {
		return // unavailable: the provider retries
	}
	var answer struct {
		Code string `json:"error"`
	}
	_ = json.Unmarshal(rctx.Response.Body(), &answer)
	if answer.Code == CodeProcessing {
		return // not stored yet: the provider retries
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	kept, err := w.store.RecordRefusedPayment(ctx, ref, id, answer.Code)
	if err != nil {
		w.log.Warn("provider payment refused and not recorded; answered 503 so that the provider retries",
			"order", id, "paymentRef", ref, "code", answer.Code, "err", err)
		rctx.Response.Reset()
		writeUnavailable(rctx)
		return
	}
	w.metrics.PaymentsRefused.WithLabelValues(answer.Code).Inc()
	if kept.Attempts > 1 {
		w.log.Warn("provider payment refused again (already listed)", "order", id, "paymentRef", ref, "code", answer.Code, "attempts", kept.Attempts)
		return
	}
	w.log.Error("provider payment refused: the money was taken and the order will not be paid; refund it or honour it by hand, then mark it settled (POST /admin/payments/refused/settle)",
		"order", id, "paymentRef", ref, "code", answer.Code)
	w.CountUnsettled(base)
}

// CountUnsettled sets the unsettled-refusals gauge from PostgreSQL. The
// service calls it every interval (and this webhook after each refusal
// and settlement it makes), so an alert on it holds until the refunds are
// made, on whichever instance took the confirmation.
func (w *PaymentWebhook) CountUnsettled(base context.Context) {
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	n, err := w.store.UnsettledRefusedPayments(ctx)
	if err != nil {
		if base.Err() == nil {
			w.log.Warn("unsettled refused payments not counted; the gauge keeps its last value", "err", err)
		}
		return
	}
	w.metrics.PaymentsUnsettled.Set(float64(n))
}

// maxRefusedListed bounds one listing of refused payments.
const maxRefusedListed = 1000

// listRefused answers GET /admin/payments/refused: the refused
// confirmations not settled yet (?all=true: every one), oldest first, at
// most maxRefusedListed; more says there were others.
func (w *PaymentWebhook) listRefused(base context.Context, rctx *fasthttp.RequestCtx) {
	all, ok := boolQuery(rctx, "all")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	got, err := w.store.RefusedPayments(ctx, all, maxRefusedListed+1)
	if err != nil {
		w.log.Warn("list refused payments", "err", err)
		writeUnavailable(rctx)
		return
	}
	more := len(got) > maxRefusedListed
	if more {
		got = got[:maxRefusedListed]
	}
	writeJSON(rctx, fasthttp.StatusOK, struct {
		Payments []store.RefusedPayment `json:"payments"`
		More     bool                   `json:"more"`
	}{Payments: got, More: more})
}

var errInvalidSettlement = errors.New(`want {"paymentRef": 1..128 printable characters, "orderId": UUID, "resolution": "refunded" or "honoured"}`)

// settleRefused answers POST /admin/payments/refused/settle with body
// {"paymentRef", "orderId", "resolution"}: the refused payment settled as
// refunded or honoured by hand, once (again: the first settlement); 404
// for a confirmation no refusal kept.
func (w *PaymentWebhook) settleRefused(base context.Context, rctx *fasthttp.RequestCtx) {
	var req struct {
		PaymentRef string `json:"paymentRef"`
		OrderID    string `json:"orderId"`
		Resolution string `json:"resolution"`
	}
	dec := json.NewDecoder(bytes.NewReader(rctx.PostBody()))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	id, idErr := uuid.Parse(req.OrderID)
	if err != nil || dec.More() || idErr != nil || len(req.OrderID) != 36 || !ValidPaymentRef(req.PaymentRef) || !store.ValidResolution(req.Resolution) {
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, errInvalidSettlement.Error())
		return
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	p, err := w.store.SettleRefusedPayment(ctx, req.PaymentRef, id, req.Resolution)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(rctx, fasthttp.StatusNotFound, CodeNotFound, "no refused payment of this order under this reference")
		return
	case err != nil:
		w.log.Warn("settle refused payment", "paymentRef", req.PaymentRef, "err", err)
		writeUnavailable(rctx)
		return
	}
	w.log.Info("refused payment settled", "paymentRef", p.PaymentRef, "order", p.OrderID, "code", p.Code, "resolution", *p.Resolution)
	w.CountUnsettled(base)
	writeJSON(rctx, fasthttp.StatusOK, p)
}

// DecodePaymentConfirmation decodes and validates a webhook body from
// untrusted bytes (after its signature was checked).
func DecodePaymentConfirmation(b []byte) (uuid.UUID, string, error) {
	var c PaymentConfirmation
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return uuid.Nil, "", fmt.Errorf("%w: %v", errInvalidConfirmation, err)
	}
	if dec.More() {
		return uuid.Nil, "", fmt.Errorf("%w: trailing data", errInvalidConfirmation)
	}
	id, err := uuid.Parse(c.OrderID)
	if err != nil || len(c.OrderID) != 36 || !ValidPaymentRef(c.PaymentRef) {
		return uuid.Nil, "", errInvalidConfirmation
	}
	return id, c.PaymentRef, nil
}

// maxConfirmationBytes bounds a confirmation's body: one is about 100
// bytes, and the signature is checked over the whole body (the admin
// listener's own limit, 2 MiB, cost 1.1 ms of HMAC per unsigned request).
const maxConfirmationBytes = 8 << 10

func (w *PaymentWebhook) handle(base context.Context, rctx *fasthttp.RequestCtx) {
	body := rctx.PostBody()
	if len(body) > maxConfirmationBytes {
		writeError(rctx, fasthttp.StatusRequestEntityTooLarge, httperr.CodeTooLarge, "a payment confirmation is at most 8 KiB")
		return
	}
	got := rctx.Request.Header.Peek(HeaderPaymentSignature)
	if !hmac.Equal(got, []byte(Sign(w.secret, body))) {
		writeError(rctx, fasthttp.StatusUnauthorized, CodeInvalidSignature, "missing or invalid "+HeaderPaymentSignature)
		return
	}
	id, ref, err := DecodePaymentConfirmation(body)
	if err != nil {
		writeError(rctx, fasthttp.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(base, QueryTimeout)
	defer cancel()
	tr, err := w.store.PayConfirmed(ctx, id, ref)
	if err != nil {
		refuseOrder(ctx, rctx, w.redis, w.log, "pay", id, "", err)
		w.noteRefusal(base, rctx, id, ref)
		return
	}
	if tr.Changed {
		w.metrics.OrdersPaid.Add(1)
		// Refused before (its order not there yet) and paid now: not a
		// refund any more. A failure leaves the row for an operator.
		if settled, err := w.store.SettlePaidRefusal(ctx, ref, id); err != nil {
			w.log.Warn("a payment refused before and accepted now is still listed as refused; settle it as honoured", "order", id, "paymentRef", ref, "err", err)
		} else if settled {
			w.log.Info("a payment refused before was accepted: its refusal is settled as paid", "order", id, "paymentRef", ref)
			w.CountUnsettled(base)
		}
	}
	writeJSON(rctx, fasthttp.StatusOK, viewOf(tr.Order))
}
