package httpapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// The live state /metrics shows, read at each scrape: a reading, not a
// count kept on the request path.
var (
	descSaleStart = desc("sale_start_timestamp_seconds", "Unix time the sale opens (sales not yet ended).", "sale")
	descSaleEnd   = desc("sale_end_timestamp_seconds", "Unix time the sale ends (sales not yet ended).", "sale")
	descStockLeft = desc("stock_left", "Units left per item as last read from Redis; absent while the stock is not loaded.", "sale", "item")
	descLoaded    = desc("stock_loaded", "1 when the item's stock was found in Redis at the last read, 0 when it is not loaded.", "sale", "item")
	descSoldOut   = desc("sold_out", "1 when this gateway's sold-out flag is set for the item.", "sale", "item")
	descAdmitted  = desc("queue_admitted", "Admission watermark: places admitted so far.", "sale")
	descAdmission = desc("queue_admissions_per_second", "Places admitted per second.", "sale")
	descEnabled   = desc("rate_limit_enabled", "1 when the rate limit applies, 0 when it is off.", "route", "key")
	descLimitRate = desc("rate_limit_tokens_per_second", "Token bucket refill rate in force (requests per second), for limits that apply.", "route", "key")
	descBurst     = desc("rate_limit_burst_tokens", "Token bucket burst in force (requests), for limits that apply.", "route", "key")
	descKeys      = desc("rate_limit_keys", "Buckets (users or client addresses) the limiter holds.", "route", "key")
	descMaxKeys   = desc("rate_limit_max_keys", "Buckets the limiter can hold (FLASHSALE_LIMIT_MAX_KEYS); past it new keys go unlimited.", "route", "key")
	descOverflow  = desc("rate_limit_overflow_total", "Requests let through unlimited because the limiter's table was full (FLASHSALE_LIMIT_MAX_KEYS).", "route", "key")
)

// Collector exports the API's live state: the sales not yet ended (their
// times, each item's stock and sold-out flag), the queues' admission, and
// the rate limiters (rules in force, table size, overflows).
func (a *API) Collector() prometheus.Collector { return stateCollector{a} }

type stateCollector struct{ a *API }

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSaleStart, descSaleEnd, descStockLeft, descLoaded, descSoldOut,
		descAdmitted, descAdmission, descEnabled, descLimitRate, descBurst, descKeys, descMaxKeys, descOverflow} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectSales(ch, time.Now())
	c.collectQueues(ch)
	c.collectLimiters(ch)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c stateCollector) collectSales(ch chan<- prometheus.Metric, now time.Time) {
	if c.a.Catalog == nil {
		return
	}
	for id, s := range c.a.Catalog.Sales() {
		if !now.Before(s.EndsAt) {
			continue // its stock is no longer read; the numbers would be stale
		}
		sale := strconv.FormatInt(id, 10)
		gauge(ch, descSaleStart, float64(s.StartsAt.Unix()), sale)
		gauge(ch, descSaleEnd, float64(s.EndsAt.Unix()), sale)
		for _, it := range s.Items {
			item := strconv.FormatInt(it.ID, 10)
			left := it.Left()
			if left >= 0 {
				gauge(ch, descStockLeft, float64(left), sale, item)
			}
			gauge(ch, descLoaded, boolValue(left >= 0), sale, item)
			gauge(ch, descSoldOut, boolValue(it.SoldOut()), sale, item)
		}
	}
}

func (c stateCollector) collectQueues(ch chan<- prometheus.Metric) {
	g := &c.a.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, q := range g.queues {
		sale := strconv.FormatInt(id, 10)
		gauge(ch, descAdmitted, float64(q.Admitted), sale)
		gauge(ch, descAdmission, q.Rate, sale)
	}
}

func (c stateCollector) collectLimiters(ch chan<- prometheus.Metric) {
	for _, l := range []struct {
		route, key string
		lim        *ratelimit.Limiter
	}{{"purchase", "user", c.a.PurchaseLimits.User}, {"purchase", "ip", c.a.PurchaseLimits.IP},
		{"queue", "user", c.a.QueueLimits.User}, {"queue", "ip", c.a.QueueLimits.IP},
		{"poll", "user", c.a.PollLimits.User}} {
		if l.lim == nil {
			continue
		}
		r := l.lim.Rule()
		gauge(ch, descEnabled, boolValue(r.Enabled()), l.route, l.key)
		if r.Enabled() {
			gauge(ch, descLimitRate, r.Rate, l.route, l.key)
			gauge(ch, descBurst, float64(r.Burst), l.route, l.key)
		}
		gauge(ch, descKeys, float64(l.lim.Len()), l.route, l.key)
		gauge(ch, descMaxKeys, float64(l.lim.MaxKeys()), l.route, l.key)
		ch <- prometheus.MustNewConstMetric(descOverflow, prometheus.CounterValue, float64(l.lim.Overflows()), l.route, l.key)
	}
}
