package httpapi

import (
	"log/slog"
	"testing"

	"flashsale/tools/admincheck"
)

// Every admin route needs the credential and answers its absence as the
// order service's do (pkg/adminauth); the dashboard's state is checked by
// faults' hostile test.
func TestEveryAdminRouteNeedsTheCredential(t *testing.T) {
	a := &API{AdminToken: []byte("admin-token-0123456789"), Log: slog.New(slog.DiscardHandler), Metrics: &Metrics{}}
	r := a.adminRouter()
	admincheck.Routes(t, r.List(), r.Handler, "GET /metrics", "GET /healthz", "GET /readyz")
}
