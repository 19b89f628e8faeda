package httpapi

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"flashsale/gateway/internal/ratelimit"
)

// The limiters' families parse with Prometheus' own parser, and the
// overflow counter (requests let through because a limiter's table was
// full) is exported per limiter.
func TestLimiterMetrics(t *testing.T) {
	full := NewLimits(ratelimit.Rule{Rate: 1, Burst: 1}, ratelimit.Rule{Rate: 1, Burst: 1}, 64)
	for i := range 100 { // more keys than the table holds
		full.User.Allow([]byte{byte('a' + i%26), byte('A' + i/26)})
	}
	a := &API{PurchaseLimits: full, QueueLimits: NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64)}
	var buf bytes.Buffer
	a.writeLimiterGauges(&buf)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, buf.String())
	}
	of := fams["flashsale_gateway_rate_limit_overflow_total"]
	if of == nil || len(of.GetMetric()) != 4 {
		t.Fatalf("overflow family %v, want 4 series", of)
	}
	var purchaseUser float64
	for _, m := range of.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["route"] == "purchase" && labels["key"] == "user" {
			purchaseUser = m.GetCounter().GetValue()
		}
	}
	if purchaseUser == 0 {
		t.Errorf("purchase/user overflow = 0 after 100 keys in a 64-key table:\n%s", buf.String())
	}
}
