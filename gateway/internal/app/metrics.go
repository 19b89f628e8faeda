package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"flashsale/gateway/internal/httpapi"
	"flashsale/pkg/telemetry"
)

// newMetrics builds the gateway's registry (with the Go and process
// collectors) and the request path's counters in it.
func newMetrics() (*prometheus.Registry, *httpapi.Metrics, error) {
	reg, err := telemetry.NewRegistry(httpapi.Namespace)
	if err != nil {
		return nil, nil, err
	}
	m, err := httpapi.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	return reg, m, nil
}

// register adds the collectors that read live state at each scrape: the
// catalog, queues and limiters through the API, the producer, the buyer.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register gateway metrics: %w", err)
		}
	}
	return nil
}
