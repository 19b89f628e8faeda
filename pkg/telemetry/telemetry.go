// Package telemetry is the Prometheus plumbing both services share: a
// registry that already holds the Go runtime's and the process's
// collectors, and the fasthttp handler that serves a registry on /metrics.
// Each service registers its own metrics, under its own namespace, into the
// registry this returns.
package telemetry

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// NewRegistry returns a registry holding the Go collector (go_*), the
// process collector (process_*: CPU, resident memory, file descriptors) and
// <namespace>_process_peak_resident_memory_bytes, the peak the capacity
// figures are read from after a sale (the process collector has no peak).
func NewRegistry(namespace string) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	peak := peakRSS{desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "process", "peak_resident_memory_bytes"),
		"Peak resident memory of the process (VmHWM), in bytes.", nil, nil)}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		peak,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register collector: %w", err)
		}
	}
	return reg, nil
}

// peakRSS reads VmHWM through procfs at each scrape; where /proc cannot
// tell (not Linux), the series is absent rather than 0.
type peakRSS struct{ desc *prometheus.Desc }

func (c peakRSS) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c peakRSS) Collect(ch chan<- prometheus.Metric) {
	p, err := procfs.NewProc(os.Getpid())
	if err != nil {
		return
	}
	st, err := p.NewStatus()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(st.VmHWM))
}

// Handler serves g in the exposition format the scraper asks for (text or
// protobuf, gzip when accepted), through client_golang's own handler.
// A collector's failure answers 500 rather than a silently partial page.
func Handler(g prometheus.Gatherer) fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
}
