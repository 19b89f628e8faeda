package metrics_test

import (
	"strings"
	"testing"
	"time"

	"flashsale/ordersvc/internal/metrics"
)

func TestWriteTo(t *testing.T) {
	var c metrics.Counters
	c.OrdersPersisted.Add(3)
	c.Reject("SOLD_OUT_IN_DB", 2)
	c.Reject("ALREADY_ACTIVE", 1)
	c.Reject("ALREADY_ACTIVE", 0)
	c.ObserveBatch(1500 * time.Millisecond)
	var b strings.Builder
	if _, err := c.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE orders_persisted_total counter\norders_persisted_total 3\n",
		"orders_rejected_total{reason=\"ALREADY_ACTIVE\"} 1\norders_rejected_total{reason=\"SOLD_OUT_IN_DB\"} 2\n",
		"batches_total 1\n",
		"batch_seconds_sum 1.5\nbatch_seconds_count 1\n",
		"dlq_total 0\n", "releases_total 0\n", "orders_duplicate_total 0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
