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
	c.OrdersPaid.Add(2)
	c.OrdersExpired.Add(5)
	c.ObserveReconcile(7, metrics.Reconciliation{Differences: 3, InFlight: 1, Leaked: 2, Repaired: true, At: time.Unix(1700000000, 0)})
	c.ObserveReconcile(7, metrics.Reconciliation{Differences: 0, InFlight: 1, At: time.Unix(1700000001, 0)})
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
		"orders_paid_total 2\n", "orders_cancelled_total 0\n", "orders_expired_total 5\n",
		"# TYPE reconcile_differences gauge\nreconcile_differences{sale=\"7\"} 0\n",
		"reconcile_repaired{sale=\"7\"} 0\n", "reconcile_inflight_holders{sale=\"7\"} 1\n",
		"reconcile_leaked_holders{sale=\"7\"} 0\n", "reconcile_timestamp_seconds{sale=\"7\"} 1700000001\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// The per-sale verdicts are bounded: the oldest goes first.
func TestObserveReconcileBounded(t *testing.T) {
	var c metrics.Counters
	for i := range 100 {
		c.ObserveReconcile(int64(i+1), metrics.Reconciliation{At: time.Unix(int64(1000+i), 0)})
	}
	var b strings.Builder
	if _, err := c.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "reconcile_differences{"); n != 64 {
		t.Errorf("sales exposed: got %d, want 64", n)
	}
	if strings.Contains(b.String(), `reconcile_differences{sale="1"}`) || !strings.Contains(b.String(), `reconcile_differences{sale="100"}`) {
		t.Errorf("kept the wrong sales:\n%s", b.String())
	}
}

// The lag gauges appear with the first reading; a failed reading keeps the
// last good numbers and says so.
func TestConsumerLag(t *testing.T) {
	var c metrics.Counters
	write := func() string {
		var b strings.Builder
		if _, err := c.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if out := write(); strings.Contains(out, "consumer_lag") {
		t.Errorf("lag gauges before any reading:\n%s", out)
	}
	c.ObserveConsumerLag(true, 7, map[int32]int64{1: 5, 0: 2}, time.Unix(1700000000, 0))
	c.ObserveConsumerLag(false, 0, nil, time.Unix(1700000005, 0))
	out := write()
	for _, want := range []string{
		"consumer_lag_read_ok 0\n",
		"# TYPE consumer_lag_messages gauge\nconsumer_lag_messages 7\n",
		"consumer_lag_partition_messages{partition=\"0\"} 2\nconsumer_lag_partition_messages{partition=\"1\"} 5\n",
		"consumer_lag_timestamp_seconds 1700000000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
