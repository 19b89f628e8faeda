// Package metrics holds the counters of ordersvc and writes them in the
// Prometheus text exposition format. The set is small and fixed, so plain
// atomics do; there is no registry to configure.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Counters are the service's metrics. The zero value is ready to use.
type Counters struct {
	OrdersPersisted atomic.Int64 // new PENDING rows
	OrdersDuplicate atomic.Int64 // events whose order id was already stored (redelivery)
	Batches         atomic.Int64
	DLQ             atomic.Int64 // messages produced to the dead-letter topic
	Releases        atomic.Int64 // outbox rows handled by the relay
	BatchRetries    atomic.Int64 // failed attempts to persist or dead-letter a batch, retried
	OrdersPaid      atomic.Int64 // PENDING -> PAID
	OrdersCancelled atomic.Int64 // PENDING -> CANCELLED
	OrdersExpired   atomic.Int64 // PENDING -> EXPIRED by a sweeper of this process
	// AbandonedReleased: reservations no order backed (their gateway died
	// before publishing), written off and their units given back.
	AbandonedReleased atomic.Int64
	// AbandonedUnattributed: such reservations, at the last pass, that
	// could not be returned (item not noted): a repair's (a gauge).
	AbandonedUnattributed atomic.Int64
	// Panics: handler panics answered 500 (pkg/httpserver.Recover): a bug.
	Panics atomic.Int64

	batchNanos atomic.Int64 // sum of batch durations
	batchCount atomic.Int64

	mu       sync.Mutex
	rejected map[string]int64 // reason -> count
	recon    map[int64]Reconciliation
	lag      *ConsumerLag // nil until the first reading
}

// ConsumerLag is a reading of the order consumer group's lag on the orders
// topic: messages not yet committed, in all and per partition.
type ConsumerLag struct {
	OK         bool            // false: the reading failed (the numbers are the last good ones)
	Total      int64           // over every partition
	Partitions map[int32]int64 // partition -> lag
	At         time.Time       // of the last good reading
}

// ObserveConsumerLag records a lag reading; a failed one (ok false) keeps
// the last good numbers and clears consumer_lag_read_ok.
func (c *Counters) ObserveConsumerLag(ok bool, total int64, partitions map[int32]int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		if c.lag == nil {
			c.lag = &ConsumerLag{}
		}
		c.lag.OK = false
		return
	}
	c.lag = &ConsumerLag{OK: true, Total: total, Partitions: partitions, At: at}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recon == nil {
		c.recon = map[int64]Reconciliation{}
	}
	if _, ok := c.recon[sale]; !ok && len(c.recon) >= maxReconciledSales {
		var oldest int64
		for id, v := range c.recon {
			if oldest == 0 || v.At.Before(c.recon[oldest].At) {
				oldest = id
			}
		}
		delete(c.recon, oldest)
	}
	c.recon[sale] = r
}

// Reject counts orders rejected (visible REJECTED row or dead-lettered) for reason.
func (c *Counters) Reject(reason string, n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	if c.rejected == nil {
		c.rejected = map[string]int64{}
	}
	c.rejected[reason] += int64(n)
	c.mu.Unlock()
}

// ObserveBatch records one processed batch.
func (c *Counters) ObserveBatch(d time.Duration) {
	c.Batches.Add(1)
	c.batchNanos.Add(int64(d))
	c.batchCount.Add(1)
}

// Rejected returns the count for one reason.
func (c *Counters) Rejected(reason string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rejected[reason]
}

// WriteTo writes the Prometheus text format.
func (c *Counters) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("orders_persisted_total", "Orders written as PENDING.", c.OrdersPersisted.Load())
	counter("orders_duplicate_total", "Events whose order id was already stored.", c.OrdersDuplicate.Load())
	fmt.Fprintf(cw, "# HELP orders_rejected_total Orders rejected, by reason.\n# TYPE orders_rejected_total counter\n")
	c.mu.Lock()
	reasons := make([]string, 0, len(c.rejected))
	for r := range c.rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(cw, "orders_rejected_total{reason=%q} %d\n", r, c.rejected[r])
	}
	c.mu.Unlock()
	counter("batches_total", "Consumer batches processed.", c.Batches.Load())
	fmt.Fprintf(cw, "# HELP batch_seconds Time to persist a batch and commit its offsets.\n# TYPE batch_seconds summary\n")
	fmt.Fprintf(cw, "batch_seconds_sum %s\nbatch_seconds_count %d\n",
		formatFloat(time.Duration(c.batchNanos.Load()).Seconds()), c.batchCount.Load())
	counter("dlq_total", "Messages produced to the dead-letter topic.", c.DLQ.Load())
	counter("releases_total", "Stock-release outbox rows handled.", c.Releases.Load())
	counter("batch_retries_total", "Failed attempts to persist or dead-letter a batch, retried.", c.BatchRetries.Load())
	counter("orders_paid_total", "Orders paid.", c.OrdersPaid.Load())
	counter("http_panics_total", "Handler panics answered 500 (a bug: the log has the stack).", c.Panics.Load())
	counter("orders_cancelled_total", "Orders cancelled by their owner.", c.OrdersCancelled.Load())
	counter("orders_expired_total", "Orders expired by this process's sweeper.", c.OrdersExpired.Load())
	counter("reservations_abandoned_released_total", "Reservations no order backed (gateway died before publishing), released after the in-flight window.", c.AbandonedReleased.Load())
	fmt.Fprintf(cw, "# HELP reservations_abandoned_unattributed Abandoned reservations of open sales whose item is unknown at the last pass, left to a reconcile repair.\n# TYPE reservations_abandoned_unattributed gauge\nreservations_abandoned_unattributed %d\n", c.AbandonedUnattributed.Load())
	c.writeReconcile(cw)
	c.writeLag(cw)
	return cw.n, cw.err
}

// writeLag writes the last lag reading, once there was one; an alert on a
// growing consumer_lag_messages is what says the consumer is stuck.
func (c *Counters) writeLag(w io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lag == nil {
		return
	}
	l := c.lag
	ok := 0
	if l.OK {
		ok = 1
	}
	fmt.Fprintf(w, "# HELP consumer_lag_read_ok 1 when the last reading of the consumer lag succeeded.\n# TYPE consumer_lag_read_ok gauge\nconsumer_lag_read_ok %d\n", ok)
	if l.At.IsZero() {
		return
	}
	fmt.Fprintf(w, "# HELP consumer_lag_messages Orders-topic messages the consumer group has not committed, at the last good reading.\n# TYPE consumer_lag_messages gauge\nconsumer_lag_messages %d\n", l.Total)
	parts := make([]int32, 0, len(l.Partitions))
	for p := range l.Partitions {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	fmt.Fprintf(w, "# HELP consumer_lag_partition_messages Messages not yet committed, per partition.\n# TYPE consumer_lag_partition_messages gauge\n")
	for _, p := range parts {
		fmt.Fprintf(w, "consumer_lag_partition_messages{partition=\"%d\"} %d\n", p, l.Partitions[p])
	}
	fmt.Fprintf(w, "# HELP consumer_lag_timestamp_seconds Unix time of the last good reading of the consumer lag.\n# TYPE consumer_lag_timestamp_seconds gauge\nconsumer_lag_timestamp_seconds %d\n", l.At.Unix())
}

// writeReconcile writes the last verdict per sale as gauges; an alert on
// reconcile_differences > 0 (not repaired) is what pages an operator.
func (c *Counters) writeReconcile(w io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sales := make([]int64, 0, len(c.recon))
	for id := range c.recon {
		sales = append(sales, id)
	}
	sort.Slice(sales, func(i, j int) bool { return sales[i] < sales[j] })
	gauge := func(name, help string, v func(Reconciliation) string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, id := range sales {
			fmt.Fprintf(w, "%s{sale=\"%d\"} %s\n", name, id, v(c.recon[id]))
		}
	}
	itoa := func(n int) string { return fmt.Sprint(n) }
	gauge("reconcile_differences", "Differences between Redis and PostgreSQL found by the last reconciliation.",
		func(r Reconciliation) string { return itoa(r.Differences) })
	gauge("reconcile_repaired", "1 when the last reconciliation rewrote Redis from PostgreSQL.",
		func(r Reconciliation) string {
			if r.Repaired {
				return "1"
			}
			return "0"
		})
	gauge("reconcile_inflight_holders", "Redis holders of accepted, not yet persisted orders at the last reconciliation.",
		func(r Reconciliation) string { return itoa(r.InFlight) })
	gauge("reconcile_leaked_holders", "Redis holders with no order and no accepted record at the last reconciliation.",
		func(r Reconciliation) string { return itoa(r.Leaked) })
	gauge("reconcile_timestamp_seconds", "Unix time of the last reconciliation.",
		func(r Reconciliation) string { return fmt.Sprint(r.At.Unix()) })
}

func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "NaN"
	}
	return fmt.Sprintf("%g", f)
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
