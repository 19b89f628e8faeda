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
	admincheck.Routes(t, r.List(), r.Handler, "GET /metrics", "GET /healthz", "GET /readyz", "GET /openapi.yaml")
}

// A refresh whose read of the shared bypass list may predate a change made
// through this gateway's admin API does not put the older list back; the
// next refresh applies what it reads.
func TestBypassRefreshNeverStepsBack(t *testing.T) {
	a := &API{}
	a.SetConfiguredBypass([]string{"configured"})
	before := a.BypassChanges() // a refresh starts reading: the list is [alice]
	a.SetBypass([]string{"alice", "bob"})
	if a.RefreshBypass(before, []string{"alice"}) {
		t.Error("a refresh read before the admin API's change was applied over it")
	}
	for _, u := range []string{"configured", "alice", "bob"} {
		if !a.bypasses(u) {
			t.Errorf("%s lost the bypass to a stale refresh", u)
		}
	}
	if !a.RefreshBypass(a.BypassChanges(), []string{"alice"}) {
		t.Fatal("a refresh read after the change was not applied")
	}
	if a.bypasses("bob") || !a.bypasses("alice") || !a.bypasses("configured") {
		t.Error("the later refresh (bob removed by another gateway) not applied")
	}
}
