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

	batchNanos atomic.Int64 // sum of batch durations
	batchCount atomic.Int64

	mu       sync.Mutex
	rejected map[string]int64 // reason -> count
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
	return cw.n, cw.err
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
