// Package metrics holds ordersvc's metrics on prometheus/client_golang,
// every name under the flashsale_ordersvc namespace, in one registry that
// also carries the Go runtime's and the process's collectors. Counters are
// fields the components add to; the reconcile verdicts and the consumer lag
// are state, read at each scrape.
package metrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"flashsale/pkg/httpserver"
	"flashsale/pkg/telemetry"
)

// Namespace prefixes every metric of the order service.
const Namespace = "flashsale_ordersvc"

// Counters are the service's metrics; build them with New.
type Counters struct {
	reg *prometheus.Registry

	OrdersPersisted prometheus.Counter // new PENDING rows
	OrdersDuplicate prometheus.Counter // events whose order id was already stored (redelivery)
	DLQ             prometheus.Counter // messages produced to the dead-letter topic
	Releases        prometheus.Counter // outbox rows handled by the relay
	BatchRetries    prometheus.Counter // failed attempts to persist or dead-letter a batch, retried
	// ConsumerReplaced: group consumers replaced because partitions the
	// cluster serves had messages they did not read (librdkafka#5430).
	ConsumerReplaced prometheus.Counter
	OrdersPaid       prometheus.Counter // PENDING -> PAID
	OrdersCancelled  prometheus.Counter // PENDING -> CANCELLED
	OrdersExpired    prometheus.Counter // PENDING -> EXPIRED by a sweeper of this process
	// AbandonedReleased: reservations no order backed (their gateway died
	// before publishing), written off and their units given back.
	AbandonedReleased prometheus.Counter
	// AbandonedUnattributed: such reservations, at the last pass, that
	// could not be returned (item not noted): a repair's.
	AbandonedUnattributed prometheus.Gauge
	// Panics: handler panics recovered (a 500 answered).
	Panics prometheus.Counter
	// ConnsRefused: connections refused by a listener's limit, by reason.
	ConnsRefused *prometheus.CounterVec
	// PaymentsRefused: provider confirmations (signed) refused for good,
	// by the order's state: money taken for an order that will not be
	// paid, to refund or honour by hand.
	PaymentsRefused *prometheus.CounterVec
	// PaymentsUnsettled: refused confirmations not marked settled, read
	// from PostgreSQL (every instance reads the same table).
	PaymentsUnsettled prometheus.Gauge

	batch    prometheus.Histogram
	rejected *prometheus.CounterVec

	state *state // reconcile verdicts and consumer lag, read at scrape
}

// batchBuckets (seconds) span a batch of a few rows on a quiet database to
// one that waited on locks or retried.
var batchBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// New builds the metrics in a registry of their own. Registration only
// fails on a name or label mistake in this file, which every test that
// builds Counters would hit; so New panics then rather than make each of
// its many callers handle an error that cannot happen at run time.
func New() *Counters {
	reg, err := telemetry.NewRegistry(Namespace)
	if err != nil {
		panic(err)
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	c := &Counters{reg: reg,
		OrdersPersisted:   counter("orders_persisted_total", "Orders written as PENDING."),
		OrdersDuplicate:   counter("orders_duplicate_total", "Events whose order id was already stored (redeliveries)."),
		DLQ:               counter("dlq_messages_total", "Messages produced to the dead-letter topic."),
		Releases:          counter("stock_releases_total", "Stock-release outbox rows handled by the relay."),
		BatchRetries:      counter("batch_retries_total", "Failed attempts to persist or dead-letter a batch, retried."),
		ConsumerReplaced:  counter("consumer_replaced_total", "Kafka group consumers replaced because partitions the cluster serves had messages they did not read."),
		OrdersPaid:        counter("orders_paid_total", "Orders paid."),
		OrdersCancelled:   counter("orders_cancelled_total", "Orders cancelled by their owner."),
		OrdersExpired:     counter("orders_expired_total", "Orders expired by this process's sweeper."),
		AbandonedReleased: counter("reservations_abandoned_released_total", "Reservations no order backed (gateway died before publishing), released after the in-flight window."),
		Panics:            counter("panics_total", "HTTP handler panics recovered (answered 500)."),
		AbandonedUnattributed: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "reservations_abandoned_unattributed",
			Help: "Abandoned reservations of sales in play (open, or within their payment and in-flight windows after the end) whose item is unknown at the last pass, left to a reconcile repair."}),
		ConnsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "connections_refused_total",
			Help: "Connections refused by FLASHSALE_CONCURRENCY (concurrency), answered 503."}, []string{"reason"}),
		PaymentsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "payments_refused_total",
			Help: "Signed payment confirmations refused for good (the money taken, the order not paid: refund or honour it), by the refusal's code."}, []string{"code"}),
		PaymentsUnsettled: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "payments_refused_unsettled",
			Help: "Refused payment confirmations not yet marked settled (GET /admin/payments/refused): refunds still to make."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "batch_duration_seconds",
			Help: "Time to persist a consumer batch and commit its offsets.", Buckets: batchBuckets}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "orders_rejected_total",
			Help: "Orders rejected (REJECTED row or dead-lettered), by reason."}, []string{"reason"}),
	}
	c.ConnsRefused.WithLabelValues(httpserver.RefusedConcurrency) // present at 0 from the start
	c.state = newState()
	reg.MustRegister(c.AbandonedUnattributed, c.ConnsRefused, c.PaymentsRefused, c.PaymentsUnsettled, c.batch, c.rejected, c.state)
	return c
}

// CountCheckedBatches exports read (store.Store.CheckedBatches) as
// batches_checked_total, one series per cause.
func (c *Counters) CountCheckedBatches(read func(cause string) uint64, causes ...string) error {
	for _, cause := range causes {
		f := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "batches_checked_total",
			Help:        "Consumer batches written after reading their stored orders and active shoppers, rather than fresh, by cause: rejection (an event would not be accepted against its item) or conflict (the fresh insert met a stored order or an active shopper).",
			ConstLabels: prometheus.Labels{"cause": cause}},
			func() float64 { return float64(read(cause)) })
		if err := c.reg.Register(f); err != nil {
			return err
		}
	}
	return nil
}

// Register adds a collector that reads live state at each scrape (the
// Redis watch's clock skew).
func (c *Counters) Register(col prometheus.Collector) error { return c.reg.Register(col) }

// Gatherer is what /metrics serves.
func (c *Counters) Gatherer() prometheus.Gatherer { return c.reg }

// Reject counts orders rejected (visible REJECTED row or dead-lettered) for reason.
func (c *Counters) Reject(reason string, n int) {
	if n == 0 {
		return
	}
	c.rejected.WithLabelValues(reason).Add(float64(n))
}

// Rejected returns the count for one reason.
func (c *Counters) Rejected(reason string) float64 {
	var m dto.Metric
	if err := c.rejected.WithLabelValues(reason).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// ObserveBatch records one processed batch.
func (c *Counters) ObserveBatch(d time.Duration) { c.batch.Observe(d.Seconds()) }

// ConsumerLag is a reading of the order consumer group's lag on the orders
// topic: messages not yet committed, in all and per partition.
type ConsumerLag struct {
	OK         bool            // false: the reading failed (the numbers are the last good ones)
	Total      int64           // over every partition
	Partitions map[int32]int64 // partition -> lag
	At         time.Time       // of the last good reading
}

// ObservePostgresClockSkew records how far this host's clock was ahead of
// PostgreSQL's.
func (c *Counters) ObservePostgresClockSkew(skew time.Duration) {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	v := skew.Seconds()
	s.pgSkew = &v
}

// ObserveConsumerLag records a lag reading; a failed one (ok false) keeps
// the last good numbers and clears consumer_lag_read_ok.
func (c *Counters) ObserveConsumerLag(ok bool, total int64, partitions map[int32]int64, at time.Time) {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		if s.lag == nil {
			s.lag = &ConsumerLag{}
		}
		s.lag.OK = false
		return
	}
	s.lag = &ConsumerLag{OK: true, Total: total, Partitions: partitions, At: at}
}

// Reconciliation is the verdict of the last comparison of a sale's Redis
// copy with PostgreSQL in this process.
type Reconciliation struct {
	Differences int
	InFlight    int // holders kept: accepted orders not yet persisted
	Leaked      int // holders with neither an order row nor an accepted record
	Repaired    bool
	At          time.Time
}

// maxReconciledSales bounds the per-sale series; the oldest verdict goes.
const maxReconciledSales = 64

// ObserveReconcile records the verdict of a reconciliation of sale.
func (c *Counters) ObserveReconcile(sale int64, r Reconciliation) {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recon[sale]; !ok && len(s.recon) >= maxReconciledSales {
		var oldest int64
		for id, v := range s.recon {
			if oldest == 0 || v.At.Before(s.recon[oldest].At) {
				oldest = id
			}
		}
		delete(s.recon, oldest)
	}
	s.recon[sale] = r
}

// RetainReconciles drops the verdict series of every sale not in live.
// The periodic reconcile calls it with the sales not ended, so a sale that
// ended takes its series, and the alerts on them, with it: a drift left in
// a sale nobody buys from any more paged until the process restarted.
// What a reconcile found stays in the log and in the sale's status.
func (c *Counters) RetainReconciles(live []int64) {
	s := c.state
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.recon {
		if !slices.Contains(live, id) {
			delete(s.recon, id)
		}
	}
}

// state is the part of the metrics that is a reading, not a count: the
// last reconcile verdict per sale and the last consumer-lag reading. It is
// a collector, so a series exists only once there is a reading to show
// (no lag gauge at 0 before the first reading, no verdict for a sale never
// reconciled).
type state struct {
	mu    sync.Mutex
	recon map[int64]Reconciliation
	lag   *ConsumerLag // nil until the first reading

	differences, repaired, inflight, leaked, reconciledAt *prometheus.Desc
	lagReadOK, lagMessages, lagPartition, lagAt           *prometheus.Desc

	pgSkew     *float64 // seconds; nil before the first measure
	pgSkewDesc *prometheus.Desc
}

func newState() *state {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &state{recon: map[int64]Reconciliation{},
		differences:  d("reconcile_differences", "Differences between Redis and PostgreSQL found by the last reconciliation of the sale.", "sale"),
		repaired:     d("reconcile_repaired", "1 when the last reconciliation of the sale rewrote Redis from PostgreSQL.", "sale"),
		inflight:     d("reconcile_inflight_holders", "Redis holders of accepted, not yet persisted orders at the last reconciliation.", "sale"),
		leaked:       d("reconcile_leaked_holders", "Redis holders with no order and no accepted record at the last reconciliation.", "sale"),
		reconciledAt: d("reconcile_timestamp_seconds", "Unix time of the last reconciliation of the sale.", "sale"),
		lagReadOK:    d("consumer_lag_read_ok", "1 when the last reading of the consumer lag succeeded."),
		lagMessages:  d("consumer_lag_messages", "Orders-topic messages the consumer group has not committed, at the last good reading."),
		lagPartition: d("consumer_lag_partition_messages", "Orders-topic messages not yet committed, per partition, at the last good reading.", "partition"),
		lagAt:        d("consumer_lag_timestamp_seconds", "Unix time of the last good reading of the consumer lag."),
		pgSkewDesc:   d("postgres_clock_skew_seconds", "How far this host's clock was ahead of PostgreSQL's at the last measure (behind when negative)."),
	}
}

func (s *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.differences, s.repaired, s.inflight, s.leaked, s.reconciledAt,
		s.lagReadOK, s.lagMessages, s.lagPartition, s.lagAt, s.pgSkewDesc} {
		ch <- d
	}
}

func (s *state) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pgSkew != nil {
		gauge(s.pgSkewDesc, *s.pgSkew)
	}
	for id, r := range s.recon {
		sale := strconv.FormatInt(id, 10)
		gauge(s.differences, float64(r.Differences), sale)
		gauge(s.repaired, boolValue(r.Repaired), sale)
		gauge(s.inflight, float64(r.InFlight), sale)
		gauge(s.leaked, float64(r.Leaked), sale)
		gauge(s.reconciledAt, float64(r.At.Unix()), sale)
	}
	if s.lag == nil {
		return
	}
	gauge(s.lagReadOK, boolValue(s.lag.OK))
	if s.lag.At.IsZero() {
		return // every reading so far failed: no number to show
	}
	gauge(s.lagMessages, float64(s.lag.Total))
	for p, n := range s.lag.Partitions {
		gauge(s.lagPartition, float64(n), strconv.FormatInt(int64(p), 10))
	}
	gauge(s.lagAt, float64(s.lag.At.Unix()))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
