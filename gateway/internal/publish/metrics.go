package publish

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ackBuckets are the upper bounds (seconds) of the produce→acknowledgement
// histogram: a healthy local broker answers in a millisecond or two, a
// replicated one in a few, a failing one at the publish timeout.
var ackBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

const namespace = "flashsale_gateway"

// metrics are the producer's: the time from Produce to the broker's
// acknowledgement of every acknowledged publish, the publishes that failed
// and those refused while failing fast. Observing costs no lock and no
// allocation.
type metrics struct {
	ack      prometheus.Histogram
	failed   prometheus.Counter
	refused  prometheus.Counter // failing fast, never handed to librdkafka
	replaced prometheus.Counter // librdkafka clients replaced (stuckCheck)
}

var descFailingFast = prometheus.NewDesc(namespace+"_publish_failing_fast",
	"Partitions of the orders topic whose sales' purchases are refused at once because the broker failed the last deliveries to them (0: none).", nil, nil)

func newMetrics() metrics {
	return metrics{
		ack: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "publish_ack_duration_seconds",
			Help:    "Time from handing an order to the producer to the broker's acknowledgement (acks=all), acknowledged publishes only.",
			Buckets: ackBuckets}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "publish_failed_total",
			Help: "Publishes the broker did not acknowledge within the publish timeout."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "publish_refused_total",
			Help: "Publishes refused at once while failing fast."}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "publish_client_replaced_total",
			Help: "Kafka producers replaced because they failed every delivery to partitions the cluster reports led and in sync."}),
	}
}

// Describe and Collect make the producer a prometheus.Collector: the
// gateway registers it beside its other metrics.
func (p *Producer) Describe(ch chan<- *prometheus.Desc) {
	p.metrics.ack.Describe(ch)
	p.metrics.failed.Describe(ch)
	p.metrics.refused.Describe(ch)
	p.metrics.replaced.Describe(ch)
	ch <- descFailingFast
}

// Collect reads the counters and whether the producer is failing fast now.
func (p *Producer) Collect(ch chan<- prometheus.Metric) {
	p.metrics.ack.Collect(ch)
	p.metrics.failed.Collect(ch)
	p.metrics.refused.Collect(ch)
	p.metrics.replaced.Collect(ch)
	ch <- prometheus.MustNewConstMetric(descFailingFast, prometheus.GaugeValue, float64(p.FailingFast()))
}
