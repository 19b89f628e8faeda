package telemetry_test

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"

	"flashsale/pkg/telemetry"
)

// The registry carries the runtime and process collectors and the peak
// resident memory, and the handler serves them in the text format that
// Prometheus' own parser reads back.
func TestRegistryServed(t *testing.T) {
	reg, err := telemetry.NewRegistry("flashsale_test")
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flashsale_test", Name: "things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/metrics")
	telemetry.Handler(reg)(&ctx)
	if got := ctx.Response.StatusCode(); got != 200 {
		t.Fatalf("status %d: %s", got, ctx.Response.Body())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(ctx.Response.Body()))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, ctx.Response.Body())
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "flashsale_test_process_peak_resident_memory_bytes"} {
		if mf := fams[name]; mf == nil || mf.GetMetric()[0].GetGauge().GetValue() <= 0 {
			t.Errorf("%s: got %v, want a positive gauge", name, mf)
		}
	}
	if got := fams["flashsale_test_things_total"].GetMetric()[0].GetCounter().GetValue(); got != 3 {
		t.Errorf("things_total %v, want 3", got)
	}
}
