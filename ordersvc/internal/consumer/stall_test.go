package consumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/ordersvc/internal/consumer"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// A client that stops reading partitions the cluster serves (as
// librdkafka#5430 leaves one after a broker's fencing; here its partitions
// are paused, which it never undoes) is replaced, and the new member of
// the group persists what was waiting. A client that keeps reading is not.
func TestStalledClientIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sale := testdb.Sale(t, e.store, 100)
	tracker := e.lagTracker()

	var mu sync.Mutex
	var stalled *kafka.Consumer // the client whose partitions were paused
	stall := make(chan struct{})
	r := e.startWith(e.store, 5*time.Second, func(cfg *consumer.Config) { cfg.Lag = tracker }, func(c *consumer.Consumer) {
		consumer.SetStallTimes(c, time.Second, 100*time.Millisecond, 500*time.Millisecond)
		consumer.SetOnPoll(c, func(kc *kafka.Consumer) {
			select {
			case <-stall:
			default:
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if stalled != nil {
				return
			}
			parts, err := kc.Assignment()
			if err != nil || len(parts) == 0 {
				return
			}
			if err := kc.Pause(parts); err != nil {
				t.Errorf("pause: %v", err)
				return
			}
			stalled = kc
		})
	})
	var first []event.OrderPlaced
	for i := range 10 {
		first = append(first, orderEvent(sale, 0, "first-"+string(rune('a'+i))))
	}
	e.publishEvents(first...)
	e.waitCommitted(10)
	// Reading for longer than the stall's wait, with nothing waiting,
	// replaces nothing.
	time.Sleep(2 * time.Second)
	if n := testutil.ToFloat64(r.metrics.ConsumerReplaced); n != 0 {
		t.Fatalf("consumer replaced %v times with nothing left to read, want 0", n)
	}

	close(stall)
	eventually(t, 10*time.Second, "the client paused", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return stalled != nil, "not yet"
	})
	e.persistedByANewClient(r, sale, "of the stalled partitions")
}

// A member whose partitions were taken away as lost (its session timed out
// during a broker outage) and that never got an assignment back (fault
// scenario 2 caught its rejoin sitting in the coordinator's queue for a
// minute) holds no partition, so none of it looked stalled, and nothing
// was persisted again. While it has none and the cluster serves the
// topic's partitions, it is replaced, with or without a lag reading.
func TestLostMemberIsReplaced(t *testing.T) {
	t.Parallel()
	t.Run("with a lag reading", func(t *testing.T) { lostMemberIsReplaced(t, true) })
	// Fault 6b: after a 3 s broker freeze the member's rejoin and the lag
	// reader's requests both sat in the group coordinator's queue for a
	// minute, and no reading came; the member must be replaced all the
	// same.
	t.Run("without one", func(t *testing.T) { lostMemberIsReplaced(t, false) })
}

func lostMemberIsReplaced(t *testing.T, withLag bool) {
	t.Parallel()
	e := newEnv(t)
	sale := testdb.Sale(t, e.store, 100)
	var tracker *lag.Tracker
	if withLag {
		tracker = e.lagTracker()
	}

	var dropped atomic.Bool
	drop := make(chan struct{})
	r := e.startWith(e.store, 5*time.Second, func(cfg *consumer.Config) {
		if tracker != nil {
			cfg.Lag = tracker
		}
	}, func(c *consumer.Consumer) {
		consumer.SetStallTimes(c, time.Second, 100*time.Millisecond, 500*time.Millisecond)
		consumer.SetOnPoll(c, func(kc *kafka.Consumer) {
			select {
			case <-drop:
			default:
				return
			}
			if parts, err := kc.Assignment(); err != nil || len(parts) == 0 || !dropped.CompareAndSwap(false, true) {
				return
			}
			if err := consumer.DropAssignment(c, kc); err != nil {
				t.Errorf("drop the assignment: %v", err)
			}
		})
	})
	var first []event.OrderPlaced
	for i := range 10 {
		first = append(first, orderEvent(sale, 0, "first-"+string(rune('a'+i))))
	}
	e.publishEvents(first...)
	e.waitCommitted(10)
	close(drop)
	eventually(t, 10*time.Second, "the assignment dropped", func() (bool, string) { return dropped.Load(), "not yet" })
	e.persistedByANewClient(r, sale, "published after the member lost its partitions")
}

// lagTracker reads the env's group lag every 100 ms until the test ends:
// the reading the stall check needs.
func (e *env) lagTracker() *lag.Tracker {
	e.t.Helper()
	reader, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: e.topic, Group: e.group})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(reader.Close)
	tracker := lag.NewTracker(reader, nil)
	ctx, cancel := context.WithCancel(testenv.Context(e.t))
	e.t.Cleanup(cancel)
	go tracker.Run(ctx, 100*time.Millisecond)
	return tracker
}

// persistedByANewClient publishes 10 orders of sale after 10 committed
// ones and checks that r's consumer was replaced once and that the new
// client persisted every one (what names them in the failure).
func (e *env) persistedByANewClient(r *running, sale store.Sale, what string) {
	e.t.Helper()
	var second []event.OrderPlaced
	for i := range 10 {
		second = append(second, orderEvent(sale, 0, "second-"+string(rune('a'+i))))
	}
	e.publishEvents(second...)
	e.waitCommitted(20) // within 20 s: the new client's
	if n := testutil.ToFloat64(r.metrics.ConsumerReplaced); n != 1 {
		e.t.Fatalf("consumer replaced %v times, want 1", n)
	}
	for _, ev := range second {
		if st, _ := e.status(ev.OrderID); st == "" {
			e.t.Fatalf("order %s %s not persisted", ev.OrderID, what)
		}
	}
}
