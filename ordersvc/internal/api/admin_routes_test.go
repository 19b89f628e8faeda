package api

import (
	"context"
	"log/slog"
	"testing"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/tools/admincheck"
)

// Every admin route needs the credential and answers its absence as the
// gateway's do (pkg/adminauth); the payment webhook is signed by the
// provider instead.
func TestEveryAdminRouteNeedsTheCredential(t *testing.T) {
	a := NewAdmin(nil, []byte("admin-token-0123456789"), NewHealth(nil, metrics.New(), nil), &PaymentWebhook{}, slog.New(slog.DiscardHandler))
	r := a.router(context.Background())
	admincheck.Routes(t, r.List(), r.Handler, "GET /metrics", "GET /healthz", "GET /readyz", "GET /openapi.yaml", "POST /webhooks/payment")
}
