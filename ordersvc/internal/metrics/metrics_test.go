package metrics_test

import (
	"flashsale/pkg/redisconn"
	"flashsale/tools/testenv"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/tools/metricdoc"
)

// The counters and the reconcile verdict come out of the registry under
// the service's namespace, as the exposition a scraper reads.
func TestGathered(t *testing.T) {
	c := metrics.New()
	c.OrdersPersisted.Add(3)
	c.Reject("SOLD_OUT_IN_DB", 2)
	c.Reject("ALREADY_ACTIVE", 1)
	c.Reject("ALREADY_ACTIVE", 0)
	c.ObserveBatch(1500 * time.Millisecond)
	c.OrdersPaid.Add(2)
	c.OrdersExpired.Add(5)
	c.ObserveReconcile(7, metrics.Reconciliation{Differences: 3, InFlight: 1, Leaked: 2, Repaired: true, At: time.Unix(1700000000, 0)})
	c.ObserveReconcile(7, metrics.Reconciliation{Differences: 0, InFlight: 1, At: time.Unix(1700000001, 0)})
	want := `
# HELP flashsale_ordersvc_orders_persisted_total Orders written as PENDING.
# TYPE flashsale_ordersvc_orders_persisted_total counter
flashsale_ordersvc_orders_persisted_total 3
# HELP flashsale_ordersvc_orders_rejected_total Orders rejected (REJECTED row or dead-lettered), by reason.
# TYPE flashsale_ordersvc_orders_rejected_total counter
flashsale_ordersvc_orders_rejected_total{reason="ALREADY_ACTIVE"} 1
flashsale_ordersvc_orders_rejected_total{reason="SOLD_OUT_IN_DB"} 2
# HELP flashsale_ordersvc_orders_paid_total Orders paid.
# TYPE flashsale_ordersvc_orders_paid_total counter
flashsale_ordersvc_orders_paid_total 2
# HELP flashsale_ordersvc_orders_expired_total Orders expired by this process's sweeper.
# TYPE flashsale_ordersvc_orders_expired_total counter
flashsale_ordersvc_orders_expired_total 5
# HELP flashsale_ordersvc_reconcile_differences Differences between Redis and PostgreSQL found by the last reconciliation of the sale.
# TYPE flashsale_ordersvc_reconcile_differences gauge
flashsale_ordersvc_reconcile_differences{sale="7"} 0
# HELP flashsale_ordersvc_reconcile_repaired 1 when the last reconciliation of the sale rewrote Redis from PostgreSQL.
# TYPE flashsale_ordersvc_reconcile_repaired gauge
flashsale_ordersvc_reconcile_repaired{sale="7"} 0
# HELP flashsale_ordersvc_reconcile_inflight_holders Redis holders of accepted, not yet persisted orders at the last reconciliation.
# TYPE flashsale_ordersvc_reconcile_inflight_holders gauge
flashsale_ordersvc_reconcile_inflight_holders{sale="7"} 1
# HELP flashsale_ordersvc_reconcile_timestamp_seconds Unix time of the last reconciliation of the sale.
# TYPE flashsale_ordersvc_reconcile_timestamp_seconds gauge
flashsale_ordersvc_reconcile_timestamp_seconds{sale="7"} 1.700000001e+09
`
	names := []string{"flashsale_ordersvc_orders_persisted_total", "flashsale_ordersvc_orders_rejected_total",
		"flashsale_ordersvc_orders_paid_total", "flashsale_ordersvc_orders_expired_total",
		"flashsale_ordersvc_reconcile_differences", "flashsale_ordersvc_reconcile_repaired",
		"flashsale_ordersvc_reconcile_inflight_holders", "flashsale_ordersvc_reconcile_timestamp_seconds"}
	if err := testutil.GatherAndCompare(c.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	fams, err := c.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range fams {
		have[f.GetName()] = true
	}
	// The runtime and process collectors come with the registry, and the
	// batch histogram holds the one batch.
	for _, n := range []string{"go_goroutines", "process_resident_memory_bytes", "flashsale_ordersvc_batch_duration_seconds"} {
		if !have[n] {
			t.Errorf("registry lacks %s", n)
		}
	}
	if got := c.Rejected("SOLD_OUT_IN_DB"); got != 2 {
		t.Errorf("Rejected(SOLD_OUT_IN_DB) = %v, want 2", got)
	}
}

// The per-sale verdicts are bounded: the oldest goes first.
func TestObserveReconcileBounded(t *testing.T) {
	c := metrics.New()
	for i := range 100 {
		c.ObserveReconcile(int64(i+1), metrics.Reconciliation{At: time.Unix(int64(1000+i), 0)})
	}
	if n, err := testutil.GatherAndCount(c.Gatherer(), "flashsale_ordersvc_reconcile_differences"); err != nil || n != 64 {
		t.Errorf("sales exposed: got %d (%v), want 64", n, err)
	}
	sales := labelValues(t, c, "flashsale_ordersvc_reconcile_differences", "sale")
	if sales["1"] || !sales["100"] {
		t.Errorf("kept the wrong sales: %v", sales)
	}
}

// The periodic reconcile keeps the series of the sales still open only.
func TestRetainReconciles(t *testing.T) {
	c := metrics.New()
	for i := range 3 {
		c.ObserveReconcile(int64(i+1), metrics.Reconciliation{Differences: 1, At: time.Unix(int64(1000+i), 0)})
	}
	c.RetainReconciles([]int64{2, 7})
	sales := labelValues(t, c, "flashsale_ordersvc_reconcile_differences", "sale")
	if len(sales) != 1 || !sales["2"] {
		t.Errorf("sales exposed: %v, want only 2", sales)
	}
}

// The lag gauges appear with the first reading; a failed reading keeps the
// last good numbers and says so.
func TestConsumerLag(t *testing.T) {
	c := metrics.New()
	lagNames := []string{"flashsale_ordersvc_consumer_lag_read_ok", "flashsale_ordersvc_consumer_lag_messages",
		"flashsale_ordersvc_consumer_lag_partition_messages", "flashsale_ordersvc_consumer_lag_timestamp_seconds"}
	if n, err := testutil.GatherAndCount(c.Gatherer(), lagNames...); err != nil || n != 0 {
		t.Errorf("%d lag series before any reading (%v), want none", n, err)
	}
	c.ObserveConsumerLag(true, 7, map[int32]int64{1: 5, 0: 2}, time.Unix(1700000000, 0))
	c.ObserveConsumerLag(false, 0, nil, time.Unix(1700000005, 0))
	want := `
# HELP flashsale_ordersvc_consumer_lag_read_ok 1 when the last reading of the consumer lag succeeded.
# TYPE flashsale_ordersvc_consumer_lag_read_ok gauge
flashsale_ordersvc_consumer_lag_read_ok 0
# HELP flashsale_ordersvc_consumer_lag_messages Orders-topic messages the consumer group has not committed, at the last good reading.
# TYPE flashsale_ordersvc_consumer_lag_messages gauge
flashsale_ordersvc_consumer_lag_messages 7
# HELP flashsale_ordersvc_consumer_lag_partition_messages Orders-topic messages not yet committed, per partition, at the last good reading.
# TYPE flashsale_ordersvc_consumer_lag_partition_messages gauge
flashsale_ordersvc_consumer_lag_partition_messages{partition="0"} 2
flashsale_ordersvc_consumer_lag_partition_messages{partition="1"} 5
# HELP flashsale_ordersvc_consumer_lag_timestamp_seconds Unix time of the last good reading of the consumer lag.
# TYPE flashsale_ordersvc_consumer_lag_timestamp_seconds gauge
flashsale_ordersvc_consumer_lag_timestamp_seconds 1.7e+09
`
	if err := testutil.GatherAndCompare(c.Gatherer(), strings.NewReader(want), lagNames...); err != nil {
		t.Error(err)
	}
}

func labelValues(t *testing.T, c *metrics.Counters, family, label string) map[string]bool {
	t.Helper()
	fams, err := c.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}

// README.md's metrics table lists every metric of the service, and only
// those: each family is made to show (a verdict, a lag reading, a
// rejection, a refused payment) before the registry is gathered.
func TestREADMEListsEveryMetric(t *testing.T) {
	c := metrics.New()
	c.ObserveReconcile(1, metrics.Reconciliation{At: time.Unix(1, 0)})
	c.ObserveConsumerLag(true, 1, map[int32]int64{0: 1}, time.Unix(1, 0))
	c.Reject("SOLD_OUT_IN_DB", 1)
	c.PaymentsRefused.WithLabelValues("ORDER_EXPIRED").Inc()
	c.ObservePostgresClockSkew(time.Millisecond)
	// The Redis watch's clock skew, registered as the service does.
	w := redisconn.NewWatch(testenv.RedisClient(t, testenv.ThrowawayRedis(t)), time.Hour, time.Minute, slog.New(slog.DiscardHandler))
	if err := w.Err(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(w.Collector(metrics.Namespace)); err != nil {
		t.Fatal(err)
	}
	if err := c.CountCheckedBatches(func(string) uint64 { return 1 }, "rejection", "conflict"); err != nil {
		t.Fatal(err)
	}
	d, err := metricdoc.Compare(c.Gatherer(), metrics.Namespace+"_")
	if err != nil {
		t.Fatal(err)
	}
	if d != "" {
		t.Error(d)
	}
}
