package httpapi

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"flashsale/pkg/httpserver"
)

// Namespace prefixes every metric of the gateway.
const Namespace = "flashsale_gateway"

// outcome of a purchase request, the label of the requests counter.
type outcome int

const (
	outAccepted outcome = iota
	outSoldOutFlag
	outSoldOut
	outAlreadyPurchased
	outNotFound
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
	"unauthorized", "not_loaded", "unavailable", "rate_limited_user", "rate_limited_ip", "not_admitted",
	"gate_closed",
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

// latencyBuckets are the upper bounds (seconds) of the purchase histogram.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Metrics are the request path's counters on client_golang. Every labelled
// child is created here, once, and kept: a request only adds to a counter
// it already holds, which costs no allocation and no lock (the refusal
// paths' zero-allocation test runs through these).
type Metrics struct {
	purchases [outCount]prometheus.Counter
	latency   prometheus.Histogram
	panics    prometheus.Counter

	rateLimited prometheus.Counter // every route
	queueJoins  prometheus.Counter
	admissions  prometheus.Counter // admission tokens issued
	badProof    prometheus.Counter
	// replays: purchases answered 202 with the order the shopper already
	// held for that item (her first answer was lost).
	replays prometheus.Counter
	// orderLookups: GET /api/flash-sales/{saleId}/order answers, by outcome.
	orderLookups [lookupCount]prometheus.Counter
	// connsRefused: connections refused by a listener's limit, by reason.
	connsRefused *prometheus.CounterVec
}

// NewMetrics creates the counters and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	}
	purchases := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "purchases_total",
		Help: "Purchase requests by outcome."}, []string{"outcome"})
	lookups := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "order_lookups_total",
		Help: "Answers to GET /api/flash-sales/{saleId}/order, by outcome."}, []string{"outcome"})
	m := &Metrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "purchase_duration_seconds",
			Help: "Latency of purchases that reached Redis (reservation, publish, settlement).", Buckets: latencyBuckets}),
		panics:      counter("panics_total", "HTTP handler panics recovered (answered 500)."),
		rateLimited: counter("rate_limited_total", "Requests refused by a rate limit, all routes."),
		queueJoins:  counter("queue_joins_total", "Queue joins answered."),
		admissions:  counter("admissions_total", "Admission tokens issued."),
		badProof:    counter("bad_proof_total", "Queue joins refused for a missing or wrong proof of work."),
		replays:     counter("purchase_replays_total", "Purchases answered with the order the shopper already held for that item."),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "connections_refused_total",
			Help: "Connections refused by FLASHSALE_MAX_CONNS_PER_IP (per_ip) or FLASHSALE_CONCURRENCY (concurrency), answered 429 or 503."}, []string{"reason"}),
	}
	for i, name := range outcomeNames {
		m.purchases[i] = purchases.WithLabelValues(name)
	}
	for i, name := range lookupNames {
		m.orderLookups[i] = lookups.WithLabelValues(name)
	}
	for _, r := range []string{httpserver.RefusedPerIP, httpserver.RefusedConcurrency} {
		m.connsRefused.WithLabelValues(r) // present at 0 from the start
	}
	for _, c := range []prometheus.Collector{purchases, lookups, m.latency, m.panics, m.rateLimited,
		m.queueJoins, m.admissions, m.badProof, m.replays, m.connsRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register gateway metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) count(o outcome) { m.purchases[o].Inc() }

// observe records the latency of a purchase that reached Redis.
func (m *Metrics) observe(d time.Duration) { m.latency.Observe(d.Seconds()) }

// Purchases returns the counter of one outcome name (for tests and reports).
func (m *Metrics) Purchases(name string) uint64 {
	for i, n := range outcomeNames {
		if n == name {
			var v dto.Metric
			if err := m.purchases[i].Write(&v); err != nil {
				return 0
			}
			return uint64(v.GetCounter().GetValue())
		}
	}
	return 0
}
