// Package scrape reads a service's /metrics the way Prometheus does, with
// Prometheus' own text parser (github.com/prometheus/common/expfmt), for
// the tests, the fault scenarios and the load test's report, or gathers a
// registry in process. Nothing here parses the exposition format by hand.
package scrape

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are a scrape's metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads the text exposition format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

// Gather reads a registry in process, as a scrape of it would.
func Gather(g prometheus.Gatherer) (Families, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	fams := make(Families, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return fams, nil
}

// Get scrapes url (the /metrics address itself) with hc (nil: the default
// client). It asks for the text format, as a scraper may.
func Get(ctx context.Context, hc *http.Client, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	fams, err := Parse(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return fams, nil
}

// Value is the value of the series of name whose labels include the given
// name/value pairs (none: the first series); ok is false when there is
// none. A histogram or summary gives its sample count.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	for _, m := range f[name].GetMetric() {
		if has(m, labels) {
			return value(m), true
		}
	}
	return 0, false
}

// Sum adds the values of every series of name whose labels include the
// given pairs (0 when the family is absent).
func (f Families) Sum(name string, labels ...string) float64 {
	var sum float64
	for _, m := range f[name].GetMetric() {
		if has(m, labels) {
			sum += value(m)
		}
	}
	return sum
}

func has(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}
