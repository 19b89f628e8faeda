package httpapi

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/gateway/internal/ratelimit"
)

// The limiters' state comes out through client_golang: a rule in force as
// two gauges of one unit each, a limit that is off as enabled 0 with no
// rule series, the table's size and room, and the overflow counter
// (requests let through because a limiter's table was full).
func TestLimiterMetrics(t *testing.T) {
	full := NewLimits(ratelimit.Rule{Rate: 2.5, Burst: 4}, ratelimit.Rule{Rate: 1, Burst: 1}, 64)
	for i := range 100 { // more keys than the table holds
		full.User.Allow([]byte{byte('a' + i%26), byte('A' + i/26)})
	}
	a := &API{PurchaseLimits: full, QueueLimits: NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64)}
	reg := prometheus.NewPedanticRegistry() // also checks each metric against its description
	reg.MustRegister(a.Collector())
	want := `
# HELP flashsale_gateway_rate_limit_enabled 1 when the rate limit applies, 0 when it is off.
# TYPE flashsale_gateway_rate_limit_enabled gauge
flashsale_gateway_rate_limit_enabled{key="ip",route="purchase"} 1
flashsale_gateway_rate_limit_enabled{key="ip",route="queue"} 0
flashsale_gateway_rate_limit_enabled{key="user",route="purchase"} 1
flashsale_gateway_rate_limit_enabled{key="user",route="queue"} 0
# HELP flashsale_gateway_rate_limit_tokens_per_second Token bucket refill rate in force (requests per second), for limits that apply.
# TYPE flashsale_gateway_rate_limit_tokens_per_second gauge
flashsale_gateway_rate_limit_tokens_per_second{key="ip",route="purchase"} 1
flashsale_gateway_rate_limit_tokens_per_second{key="user",route="purchase"} 2.5
# HELP flashsale_gateway_rate_limit_burst_tokens Token bucket burst in force (requests), for limits that apply.
# TYPE flashsale_gateway_rate_limit_burst_tokens gauge
flashsale_gateway_rate_limit_burst_tokens{key="ip",route="purchase"} 1
flashsale_gateway_rate_limit_burst_tokens{key="user",route="purchase"} 4
# HELP flashsale_gateway_rate_limit_max_keys Buckets the limiter can hold (FLASHSALE_LIMIT_MAX_KEYS); past it new keys go unlimited.
# TYPE flashsale_gateway_rate_limit_max_keys gauge
flashsale_gateway_rate_limit_max_keys{key="ip",route="purchase"} 64
flashsale_gateway_rate_limit_max_keys{key="ip",route="queue"} 64
flashsale_gateway_rate_limit_max_keys{key="user",route="purchase"} 64
flashsale_gateway_rate_limit_max_keys{key="user",route="queue"} 64
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flashsale_gateway_rate_limit_enabled",
		"flashsale_gateway_rate_limit_tokens_per_second", "flashsale_gateway_rate_limit_burst_tokens",
		"flashsale_gateway_rate_limit_max_keys"); err != nil {
		t.Error(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{} // "name route/key" -> value
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			values[f.GetName()+" "+l["route"]+"/"+l["key"]] = v
		}
	}
	if got := values["flashsale_gateway_rate_limit_overflow_total purchase/user"]; got == 0 {
		t.Errorf("purchase/user overflow = 0 after 100 keys in a 64-key table: %v", values)
	}
	if got := values["flashsale_gateway_rate_limit_keys purchase/user"]; got == 0 || got > 64 {
		t.Errorf("purchase/user keys held = %v, want 1..64", got)
	}
	if got := values["flashsale_gateway_rate_limit_overflow_total queue/ip"]; got != 0 {
		t.Errorf("queue/ip overflow = %v, want 0", got)
	}
}
