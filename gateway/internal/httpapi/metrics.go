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
	outRateLimitedUser
	outRateLimitedIP
	outNotAdmitted
	outGateClosed
	outCount
)

var outcomeNames = [outCount]string{
	"accepted", "sold_out_flag", "sold_out", "already_purchased", "not_found",
	"bad_request", "unauthorized", "not_loaded", "unavailable", "rate_limited_user", "rate_limited_ip", "not_admitted",
	"gate_closed",
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

	rateLimited atomic.Uint64 // every route
	queueJoins  atomic.Uint64
	admissions  atomic.Uint64 // admission tokens issued
	badProof    atomic.Uint64
	// replays: purchases answered 202 with the order the shopper already
	// held for that item (her first answer was lost).
	replays atomic.Uint64
	// orderLookups: GET /api/flash-sales/{saleId}/order answers, by outcome
	// (found, none, unconfirmed, unavailable).
	orderLookups [lookupCount]atomic.Uint64
}

// lookup is the outcome of a "my order" call.
type lookup int

const (
	lookupFound lookup = iota
	lookupNone
	lookupUnconfirmed
	lookupUnavailable
	lookupCount
)

var lookupNames = [lookupCount]string{"found", "none", "unconfirmed", "unavailable"}

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
	p("# HELP flashsale_gateway_rate_limited_total Requests refused by a rate limit, all routes.\n# TYPE flashsale_gateway_rate_limited_total counter\nflashsale_gateway_rate_limited_total %d\n", m.rateLimited.Load())
	p("# HELP flashsale_gateway_queue_joins_total Queue joins answered.\n# TYPE flashsale_gateway_queue_joins_total counter\nflashsale_gateway_queue_joins_total %d\n", m.queueJoins.Load())
	p("# HELP flashsale_gateway_admissions_total Admission tokens issued.\n# TYPE flashsale_gateway_admissions_total counter\nflashsale_gateway_admissions_total %d\n", m.admissions.Load())
	p("# HELP flashsale_gateway_bad_proof_total Queue joins refused for a missing or wrong proof of work.\n# TYPE flashsale_gateway_bad_proof_total counter\nflashsale_gateway_bad_proof_total %d\n", m.badProof.Load())
	p("# HELP flashsale_gateway_purchase_replays_total Purchases answered with the order the shopper already held for that item.\n# TYPE flashsale_gateway_purchase_replays_total counter\nflashsale_gateway_purchase_replays_total %d\n", m.replays.Load())
	p("# HELP flashsale_gateway_order_lookups_total Answers to GET /api/flash-sales/{saleId}/order, by outcome.\n# TYPE flashsale_gateway_order_lookups_total counter\n")
	for i, name := range lookupNames {
		p("flashsale_gateway_order_lookups_total{outcome=%q} %d\n", name, m.orderLookups[i].Load())
	}
	p("# HELP flashsale_gateway_panics_total Handler panics recovered.\n# TYPE flashsale_gateway_panics_total counter\nflashsale_gateway_panics_total %d\n", m.panics.Load())
	return n, nil
}
