package publish

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/tools/testenv"
)

// failingSince names the partitions open since the cutoff that failed a
// delivery lately, on the current client; not the deliveries that named
// no partition, not a partition nobody tried since an outage opened it,
// and not one that closed.
func TestBreakersFailingSince(t *testing.T) {
	bs := newBreakers(1, time.Second)
	t0 := time.Unix(1000, 0)
	bs.forPartition(3).failure(t0, false)
	bs.forPartition(unknownPartition).failure(t0, false)
	bs.forPartition(4).failure(t0.Add(time.Second), false)
	bs.forPartition(3).failure(t0.Add(2*time.Second), false) // still open: its opening stays t0
	bs.forPartition(5)
	bs.trip(t0) // an outage opens 5 too; nothing is published to it
	if got := bs.failingSince(t0, t0); !slices.Equal(got, []int32{3}) {
		t.Fatalf("failingSince(t0, t0) = %v, want [3]", got)
	}
	if got := bs.failingSince(t0.Add(time.Second), t0.Add(1500*time.Millisecond)); !slices.Equal(got, []int32{3}) {
		t.Fatalf("opened by t0+1s, failed since t0+1.5s: %v, want [3] (4 last failed at t0+1s)", got)
	}
	bs.replacedAt.Store(t0.Add(3 * time.Second).UnixNano())
	if got := bs.failingSince(t0.Add(time.Second), t0); len(got) != 0 {
		t.Fatalf("after a replacement at t0+3s: %v, want none (their failures were the old client's)", got)
	}
	bs.forPartition(3).failure(t0.Add(4*time.Second), false)
	if got := bs.failingSince(t0.Add(time.Second), t0); !slices.Equal(got, []int32{3}) {
		t.Fatalf("3 failed again on the new client: %v, want [3]", got)
	}
	bs.forPartition(3).success(false)
	if got := bs.failingSince(t0.Add(5*time.Second), t0); len(got) != 0 {
		t.Fatalf("after 3 closed: %v, want none", got)
	}
}

// On the real broker: a partition whose breaker stayed open while the
// cluster served it gets the producer a new client; the publishes running
// meanwhile all succeed, the old client is closed, and Close still closes
// Events. A cluster that does not answer gets no new client.
func TestStuckClientIsReplaced(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-stuck", 2)
	// newProducer: no upkeep goroutine, the test calls checkStuck itself.
	p, err := newProducer(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 5 * time.Second,
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
	stopPublishing := publishing(t, p, 4)

	// Partition 0's breaker opened long ago in an outage, and nothing was
	// published to it since: not a sign of a stuck client.
	first := p.client.Load()
	t0 := time.Now()
	p.breakers.forPartition(0)
	p.breakers.trip(t0.Add(-time.Hour))
	p.checkStuck(t0)
	p.checkStuck(t0.Add(p.stuck.watch.Grace))
	if p.client.Load() != first {
		t.Fatal("replaced for a partition whose breaker an outage opened and nobody tried since")
	}
	// Partition 1's breaker opened long ago, and its deliveries kept
	// failing (the trials of a stuck client); the cluster serves it.
	p.breakers.forPartition(1).failure(t0.Add(-time.Hour), false)
	p.breakers.forPartition(1).failure(t0.Add(-time.Second), false)
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
	// The new client delivers to partition 1; the old one is closed once
	// its deliveries have their reports.
	if _, err := p.publish(2, 1, []byte(`{}`)); err != nil {
		t.Fatalf("delivery to partition 1 by the new client: %v", err)
	}
	eventually(t, 15*time.Second, "the replaced client closed", first.IsClosed)
	// Within the every period no second replacement.
	p.breakers.forPartition(0).failure(t0.Add(p.stuck.watch.Grace), false)
	p.checkStuck(t0.Add(2 * p.stuck.watch.Grace))
	p.checkStuck(t0.Add(3 * p.stuck.watch.Grace))
	if n := testutil.ToFloat64(p.metrics.replaced); n != 1 {
		t.Fatalf("publish_client_replaced_total = %v within %v of the last, want 1", n, p.stuck.watch.Every)
	}
	time.Sleep(100 * time.Millisecond)
	if n := stopPublishing(); n == 0 {
		t.Fatal("nothing published during the replacement")
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
	p, err := newProducer(Config{Brokers: testenv.BlackHole(t), Topic: "flash-sale-orders", Timeout: 200 * time.Millisecond,
		FailFastAfter: 1, FailFastFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	first := p.client.Load()
	t0 := time.Now()
	p.breakers.forPartition(0).failure(t0.Add(-time.Hour), false)
	p.breakers.forPartition(0).failure(t0.Add(-time.Second), false)
	p.checkStuck(t0)
	p.checkStuck(t0.Add(p.stuck.watch.Grace))
	if p.client.Load() != first {
		t.Fatal("client replaced while the cluster did not answer")
	}
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// A producer whose events nobody reads still closes (its forwarders drop
// what they hold once Close began).
func TestCloseWithEventsUndrained(t *testing.T) {
	// Nothing listens there: librdkafka reports the refused connections as
	// events at once.
	p, err := New(Config{Brokers: "127.0.0.1:1", Topic: "flash-sale-orders", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for len(p.events) < cap(p.events) {
		p.events <- kafka.NewError(kafka.ErrAllBrokersDown, "test", false)
	}
	time.Sleep(time.Second) // a forwarder now holds one more
	closed := make(chan struct{})
	go func() { p.Close(time.Second); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with Events full and undrained")
	}
}

// Publishes running while the client is replaced again and again all get
// their acknowledgement: none reaches a client being closed (librdkafka's
// Produce racing its Close crashed the process, and one after its final
// flush never got a report).
func TestPublishesDuringReplacements(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-replaced", 1)
	p, err := newProducer(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 5 * time.Second, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range p.Events() {
		}
	}()
	if _, err := p.publish(1, 0, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	stopPublishing := publishing(t, p, 8)
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		p.replaceClient([]int32{0})
	}
	published := stopPublishing()
	if left := p.Close(5 * time.Second); left != 0 || published == 0 {
		t.Fatalf("%d published; Close left %d waiting", published, left)
	}
}

// publishing runs n goroutines that publish to partition 0 of p until the
// function it returns is called; that waits for them (20 s at most) and
// returns how many were acknowledged. A failed publish fails the test.
func publishing(t *testing.T, p *Producer, n int) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var published atomic.Int64
	for w := range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := p.publish(int64(100+w), 0, []byte(`{}`)); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				published.Add(1)
			}
		})
	}
	return func() int {
		t.Helper()
		close(done)
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
			t.Fatal("publishes still waiting 20s after they were stopped")
		}
		return int(published.Load())
	}
}

// The cluster's word on the topic comes through a client of its own when
// the current one has none: fault 6b caught a client that, after the
// broker's freeze, held every broker for down and answered no metadata,
// so its replacement never came.
func TestClusterTopicWithoutTheCurrentClient(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-cluster-topic", 2)
	p, err := newProducer(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	go func() {
		for range p.Events() {
		}
	}()
	// The current client: one that reaches no broker.
	wedged, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.BlackHole(t), "log_level": 0})
	if err != nil {
		t.Fatal(err)
	}
	p.client.Swap(wedged).Close()
	tm, ok := p.clusterTopic()
	if !ok || len(tm.Partitions) != 2 {
		t.Fatalf("cluster's topic through a fresh client: %v, %d partitions; want it, 2 partitions", ok, len(tm.Partitions))
	}
}

// A client that reported a fatal error refuses every publish from then on,
// locally, which no breaker counts: the gateway answered 503 to every
// purchase until a restart. Fatal, which the gateway calls on such an
// event, puts a new client in its place.
func TestFatalErrorReplacesTheClient(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-fatal", 1)
	p, err := newProducer(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 5 * time.Second, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(5 * time.Second)
	go func() {
		for ev := range p.Events() {
			if e, ok := ev.(kafka.Error); ok && e.IsFatal() {
				p.Fatal(e)
			}
		}
	}()
	if _, err := p.publish(1, 0, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	p.client.Load().TestFatalError(kafka.ErrOutOfOrderSequenceNumber, "test: a fatal error")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.publish(1, 0, []byte(`{}`))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publishes still refused 10 s after a fatal error: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
