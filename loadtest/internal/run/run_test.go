package run

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// A small whole sale through the real binaries: the audit must pass and the
// last stdout line must be the JSON summary with the documented keys.
func TestSmallSaleEndToEnd(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string]string{"FLASHSALE_TRUSTED_PROXIES": "127.0.0.1/32"}})
	o := Defaults()
	o.GatewayURL, o.GatewayAdminURL, o.AdminURL, o.AdminToken = s.GatewayURL, s.GatewayAdminURL, s.AdminURL, harness.AdminToken
	o.JWTKey = harness.JWTKey
	o.PostgresDSN, o.RedisAddr = testenv.PostgresDSN(), testenv.RedisAddr()
	o.Users, o.Stock, o.Items = 3000, 300, 2
	o.Connections, o.Workers, o.MaxWorkers = 32, 16, 32
	o.Duration, o.OpenIn, o.PersistTimeout = 60*time.Second, time.Second, 30*time.Second
	o.QuietWait = 2 * time.Second // the test database may hold other tests' due orders
	o.PollSample = 300
	o.OutDir = t.TempDir()

	var out bytes.Buffer
	rep, err := Run(testenv.Context(t), o, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if rep.Outcomes["accepted"] != 300 || rep.Requests != 3000 {
		t.Fatalf("outcomes %v over %d requests: want 300 accepted of 3000", rep.Outcomes, rep.Requests)
	}
	if rep.Polled["PENDING"] != 300 {
		t.Errorf("polling endpoint statuses %v, want all 300 PENDING", rep.Polled)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var summary map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("last stdout line is not JSON: %q", lines[len(lines)-1])
	}
	for _, k := range []string{"requests", "accepted", "sold_out", "already_purchased", "rate_limited", "not_admitted", "errors",
		"sell_out_ms", "persist_ms", "p50_ms", "p99_ms", "oversold", "lost", "duplicates", "stock_conserved"} {
		if _, ok := summary[k]; !ok {
			t.Errorf("summary lacks %q: %v", k, summary)
		}
	}
	if rep.GatewayPeakRSSMiB <= 0 {
		t.Errorf("gateway peak memory not read: %v", rep.GatewayPeakRSSMiB)
	}
	if summary["oversold"] != 0.0 || summary["lost"] != 0.0 || summary["duplicates"] != 0.0 || summary["stock_conserved"] != true {
		t.Errorf("audit in summary: %v", summary)
	}
}

// The same through the virtual queue: everyone joins before the opening, is
// admitted at the operator's rate, buys with an admission token; half the
// winners pay.
func TestQueuedSaleEndToEnd(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string]string{"FLASHSALE_TRUSTED_PROXIES": "127.0.0.1/32"}})
	o := Defaults()
	o.GatewayURL, o.GatewayAdminURL, o.AdminURL, o.AdminToken = s.GatewayURL, s.GatewayAdminURL, s.AdminURL, harness.AdminToken
	o.JWTKey = harness.JWTKey
	o.PostgresDSN, o.RedisAddr = testenv.PostgresDSN(), testenv.RedisAddr()
	o.Users, o.Stock, o.Items = 600, 60, 1
	o.Queue, o.AdmissionRate, o.PayShare = true, 400, 0.5
	o.Connections, o.Workers, o.MaxWorkers = 32, 16, 32
	o.Duration, o.OpenIn, o.PersistTimeout = 30*time.Second, 4*time.Second, 30*time.Second
	o.QuietWait = 2 * time.Second
	o.OutDir = t.TempDir()
	var out bytes.Buffer
	rep, err := Run(testenv.Context(t), o, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if rep.Outcomes["accepted"] != 60 || rep.Outcomes["not_admitted"] != 0 {
		t.Fatalf("outcomes %v: want 60 accepted and no purchase refused for admission", rep.Outcomes)
	}
	if rep.Paid != 30 {
		t.Errorf("paid %d, want 30", rep.Paid)
	}
}
