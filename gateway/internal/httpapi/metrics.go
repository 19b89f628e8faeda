package httpapi

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// outcome of a purchase request, the label of the requests counter.
type outcome int

const (
	outAccepted outcome = iota
	outSoldOutFlag
	outSoldOut
	outAlreadyPurchased
	outNotFound
	outBadRequest
	outUnauthorized
	outNotLoaded
	outUnavailable
	outCount
)

var outcomeNames = [outCount]string{
	"accepted", "sold_out_flag", "sold_out", "already_purchased", "not_found",
	"bad_request", "unauthorized", "not_loaded", "unavailable",
}

// latencyBuckets are the upper bounds (seconds) of the purchase histogram.
var latencyBuckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Metrics are the gateway's counters, kept in atomics and written in the
// Prometheus text format. No per-request allocation, no lock.
type Metrics struct {
	purchases [outCount]atomic.Uint64
	buckets   [len(latencyBuckets) + 1]atomic.Uint64
	sumMicros atomic.Uint64
	panics    atomic.Uint64
}

func (m *Metrics) count(o outcome) { m.purchases[o].Add(1) }

// observe records the latency of a purchase that reached Redis.
func (m *Metrics) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBuckets) && s > latencyBuckets[i] {
		i++
	}
	m.buckets[i].Add(1)
	m.sumMicros.Add(uint64(d.Microseconds()))
}

// Purchases returns the counter of one outcome name (for tests and reports).
func (m *Metrics) Purchases(name string) uint64 {
	for i, n := range outcomeNames {
		if n == name {
			return m.purchases[i].Load()
		}
	}
	return 0
}

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var n int64
	p := func(format string, a ...any) {
		k, _ := fmt.Fprintf(w, format, a...)
		n += int64(k)
	}
	p("# HELP flashsale_gateway_purchases_total Purchase requests by outcome.\n# TYPE flashsale_gateway_purchases_total counter\n")
	for i, name := range outcomeNames {
		p("flashsale_gateway_purchases_total{outcome=%q} %d\n", name, m.purchases[i].Load())
	}
	p("# HELP flashsale_gateway_purchase_seconds Latency of purchases that reached Redis.\n# TYPE flashsale_gateway_purchase_seconds histogram\n")
	var cum uint64
	for i, le := range latencyBuckets {
		cum += m.buckets[i].Load()
		p("flashsale_gateway_purchase_seconds_bucket{le=\"%g\"} %d\n", le, cum)
	}
	cum += m.buckets[len(latencyBuckets)].Load()
	p("flashsale_gateway_purchase_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	p("flashsale_gateway_purchase_seconds_sum %g\n", float64(m.sumMicros.Load())/1e6)
	p("flashsale_gateway_purchase_seconds_count %d\n", cum)
	p("# HELP flashsale_gateway_panics_total Handler panics recovered.\n# TYPE flashsale_gateway_panics_total counter\nflashsale_gateway_panics_total %d\n", m.panics.Load())
	return n, nil
}
