package httpapi

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"flashsale/gateway/internal/ratelimit"
)

// queueGauge is the last view of a sale's queue this gateway advanced.
type queueGauge struct {
	Admitted int64
	Rate     float64
}

// gauges holds the per-sale queue view for /metrics.
type gauges struct {
	mu     sync.Mutex
	queues map[int64]queueGauge
}

// SetQueueGauge records a sale's admission watermark and rate.
func (a *API) SetQueueGauge(saleID, admitted int64, rate float64) {
	a.gauges.mu.Lock()
	if a.gauges.queues == nil {
		a.gauges.queues = map[int64]queueGauge{}
	}
	a.gauges.queues[saleID] = queueGauge{Admitted: admitted, Rate: rate}
	a.gauges.mu.Unlock()
	a.SetAdmissionRate(saleID, rate)
}

// writeGauges adds the live state to /metrics: stock left per item, the
// queues' admission watermarks and rates, and the rate-limit rules in force
// (so a live change shows).
func (a *API) writeGauges(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# HELP flashsale_gateway_stock_left Units left per item as last read from Redis (-1 unknown).\n# TYPE flashsale_gateway_stock_left gauge\n")
	p("# HELP flashsale_gateway_sold_out Whether this gateway's sold-out flag is set for the item.\n# TYPE flashsale_gateway_sold_out gauge\n")
	sales := a.Catalog.Sales()
	ids := make([]int64, 0, len(sales))
	for id := range sales {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		for _, it := range sales[id].Items {
			so := 0
			if it.SoldOut() {
				so = 1
			}
			p("flashsale_gateway_stock_left{sale=\"%d\",item=\"%d\"} %d\n", id, it.ID, it.Left())
			p("flashsale_gateway_sold_out{sale=\"%d\",item=\"%d\"} %d\n", id, it.ID, so)
		}
	}
	a.gauges.mu.Lock()
	p("# HELP flashsale_gateway_queue_admitted Admission watermark: places admitted so far.\n# TYPE flashsale_gateway_queue_admitted gauge\n")
	p("# HELP flashsale_gateway_queue_admission_rate Places admitted per second.\n# TYPE flashsale_gateway_queue_admission_rate gauge\n")
	for id, q := range a.gauges.queues {
		p("flashsale_gateway_queue_admitted{sale=\"%d\"} %d\n", id, q.Admitted)
		p("flashsale_gateway_queue_admission_rate{sale=\"%d\"} %g\n", id, q.Rate)
	}
	a.gauges.mu.Unlock()
	a.writeLimiterGauges(w)
}

// writeLimiterGauges writes the rate limiters' rules, table sizes and
// overflows.
func (a *API) writeLimiterGauges(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	limiters := []struct {
		route, key string
		lim        *ratelimit.Limiter
	}{{"purchase", "user", a.PurchaseLimits.User}, {"purchase", "ip", a.PurchaseLimits.IP}, {"queue", "user", a.QueueLimits.User}, {"queue", "ip", a.QueueLimits.IP}}
	// One family after the other: a family's samples stay together.
	p("# HELP flashsale_gateway_rate_limit Token bucket rule in force (rate per second, burst).\n# TYPE flashsale_gateway_rate_limit gauge\n")
	for _, l := range limiters {
		r := l.lim.Rule()
		p("flashsale_gateway_rate_limit{route=%q,key=%q,param=\"rate\"} %g\n", l.route, l.key, r.Rate)
		p("flashsale_gateway_rate_limit{route=%q,key=%q,param=\"burst\"} %d\n", l.route, l.key, r.Burst)
	}
	p("# HELP flashsale_gateway_rate_limit_buckets Buckets held.\n# TYPE flashsale_gateway_rate_limit_buckets gauge\n")
	for _, l := range limiters {
		p("flashsale_gateway_rate_limit_buckets{route=%q,key=%q} %d\n", l.route, l.key, l.lim.Len())
	}
	p("# HELP flashsale_gateway_rate_limit_overflow_total Requests let through unlimited because the limiter's table was full (FLASHSALE_LIMIT_MAX_KEYS).\n# TYPE flashsale_gateway_rate_limit_overflow_total counter\n")
	for _, l := range limiters {
		p("flashsale_gateway_rate_limit_overflow_total{route=%q,key=%q} %d\n", l.route, l.key, l.lim.Overflows())
	}
}
