package publish

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// ackBuckets are the upper bounds (seconds) of the produce→acknowledgement
// histogram: a healthy local broker answers in a millisecond or two, a
// replicated one in a few, a failing one at the publish timeout.
var ackBuckets = [...]float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// ackLatency is a histogram of publish latencies in atomics: no lock and no
// allocation per observation.
type ackLatency struct {
	buckets   [len(ackBuckets) + 1]atomic.Uint64
	sumMicros atomic.Uint64
	failed    atomic.Uint64
	refused   atomic.Uint64 // failing fast, never handed to librdkafka
}

func (h *ackLatency) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(ackBuckets) && s > ackBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumMicros.Add(uint64(d.Microseconds()))
}

// WriteMetrics writes the producer's metrics in the Prometheus text format:
// the time from Produce to the broker's acknowledgement of every
// acknowledged publish, the publishes that failed, and whether it is
// failing fast.
func (p *Producer) WriteMetrics(w io.Writer) {
	h := &p.latency
	fmt.Fprint(w, "# HELP flashsale_gateway_publish_ack_seconds Time from handing an order to the producer to the broker's acknowledgement (acks=all), acknowledged publishes only.\n# TYPE flashsale_gateway_publish_ack_seconds histogram\n")
	var cum uint64
	for i, le := range ackBuckets {
		cum += h.buckets[i].Load()
		fmt.Fprintf(w, "flashsale_gateway_publish_ack_seconds_bucket{le=\"%g\"} %d\n", le, cum)
	}
	cum += h.buckets[len(ackBuckets)].Load()
	fmt.Fprintf(w, "flashsale_gateway_publish_ack_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(w, "flashsale_gateway_publish_ack_seconds_sum %g\n", float64(h.sumMicros.Load())/1e6)
	fmt.Fprintf(w, "flashsale_gateway_publish_ack_seconds_count %d\n", cum)
	fmt.Fprintf(w, "# HELP flashsale_gateway_publish_failed_total Publishes the broker did not acknowledge within the publish timeout.\n# TYPE flashsale_gateway_publish_failed_total counter\nflashsale_gateway_publish_failed_total %d\n", h.failed.Load())
	fmt.Fprintf(w, "# HELP flashsale_gateway_publish_refused_total Publishes refused at once while failing fast.\n# TYPE flashsale_gateway_publish_refused_total counter\nflashsale_gateway_publish_refused_total %d\n", h.refused.Load())
	failing := 0
	if p.FailingFast() {
		failing = 1
	}
	fmt.Fprintf(w, "# HELP flashsale_gateway_publish_failing_fast 1 while purchases are refused at once because the broker failed the last deliveries.\n# TYPE flashsale_gateway_publish_failing_fast gauge\nflashsale_gateway_publish_failing_fast %d\n", failing)
}
