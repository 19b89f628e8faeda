package publish

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/tools/testenv"
)

// failingSince names the partitions open since the cutoff, not the
// deliveries that named none, and forgets a partition once it closes.
func TestBreakersFailingSince(t *testing.T) {
	bs := newBreakers(1, time.Second)
	t0 := time.Unix(1000, 0)
	bs.forPartition(3).failure(t0, false)
	bs.forPartition(unknownPartition).failure(t0, false)
	bs.forPartition(4).failure(t0.Add(time.Second), false)
	bs.forPartition(3).failure(t0.Add(2*time.Second), false) // still open: its opening stays t0
	if got := bs.failingSince(t0); !slices.Equal(got, []int32{3}) {
		t.Fatalf("failingSince(t0) = %v, want [3]", got)
	}
	bs.forPartition(3).success(false)
	if got := bs.failingSince(t0.Add(time.Second)); !slices.Equal(got, []int32{4}) {
		t.Fatalf("after 3 closed: %v, want [4]", got)
	}
}

// On the real broker: a partition whose breaker stayed open while the
// cluster served it gets the producer a new client; the publishes running
// meanwhile all succeed, the old client is closed, and Close still closes
// Events. A cluster that does not answer gets no new client.
func TestStuckClientIsReplaced(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-stuck", 2)
	p, err := New(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 5 * time.Second,
		Linger: time.Millisecond, FailFastAfter: 1, FailFastFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	events := p.Events()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range events {
		}
	}()
	if err := p.Publish(1, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	// Publishes keep running meanwhile, on partition 0 (past the breakers:
	// partition 1's is about to be opened by hand).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var published, failed int
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := p.publish(int64(100+w), 0, []byte(`{}`))
				mu.Lock()
				if err != nil {
					failed++
					t.Errorf("publish during the replacement: %v", err)
				}
				published++
				mu.Unlock()
			}
		})
	}

	// Partition 1's breaker opened long ago (as after deliveries that all
	// timed out); the cluster serves it.
	first := p.client.Load()
	t0 := time.Now()
	p.breakers.forPartition(1).failure(t0.Add(-time.Hour), false)
	p.checkStuck(t0)
	if p.client.Load() != first {
		t.Fatal("replaced at the first sight of a served partition, want a grace period")
	}
	p.checkStuck(t0.Add(p.stuck.watch.Grace))
	if p.client.Load() == first {
		t.Fatal("client not replaced: partition 1 failed for an hour while the cluster served it")
	}
	if n := testutil.ToFloat64(p.metrics.replaced); n != 1 {
		t.Fatalf("publish_client_replaced_total = %v, want 1", n)
	}
	// The new client delivers to partition 1.
	if _, err := p.publish(2, 1, []byte(`{}`)); err != nil {
		t.Fatalf("delivery to partition 1 by the new client: %v", err)
	}
	// Within the every period no second replacement.
	p.breakers.forPartition(0).failure(t0.Add(-time.Hour), false)
	p.checkStuck(t0.Add(2 * p.stuck.watch.Grace))
	p.checkStuck(t0.Add(3 * p.stuck.watch.Grace))
	if n := testutil.ToFloat64(p.metrics.replaced); n != 1 {
		t.Fatalf("publish_client_replaced_total = %v within %v of the last, want 1", n, p.stuck.watch.Every)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if published == 0 || failed > 0 {
		t.Fatalf("%d published during the replacement, %d failed", published, failed)
	}
	if left := p.Close(5 * time.Second); left != 0 {
		t.Fatalf("Close left %d publishes waiting", left)
	}
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("Events not closed 10s after Close")
	}
}

// A partition failing while the cluster does not answer (every broker
// gone) is an outage, not a stuck client.
func TestUnreachableClusterKeepsTheClient(t *testing.T) {
	p, err := New(Config{Brokers: blackHole(t), Topic: "flash-sale-orders", Timeout: 200 * time.Millisecond,
		FailFastAfter: 1, FailFastFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	go func() {
		for range p.Events() {
		}
	}()
	first := p.client.Load()
	t0 := time.Now()
	p.breakers.forPartition(0).failure(t0.Add(-time.Hour), false)
	p.checkStuck(t0)
	p.checkStuck(t0.Add(p.stuck.watch.Grace))
	if p.client.Load() != first {
		t.Fatal("client replaced while the cluster did not answer")
	}
}
