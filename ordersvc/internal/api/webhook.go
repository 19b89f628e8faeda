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

func (w *PaymentWebhook) handle(base context.Context, rctx *fasthttp.RequestCtx) {
	body := rctx.PostBody()
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
		return
	}
	if tr.Changed {
		w.metrics.OrdersPaid.Add(1)
	}
	writeJSON(rctx, fasthttp.StatusOK, viewOf(tr.Order))
}
