package publish

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/tools/kafkatopic"
	"flashsale/tools/testenv"
)

// The spreader stays on a partition for stickFor, then moves to the next,
// passing over partitions whose breaker refuses.
func TestSpreaderPicks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(1, time.Second)
	s := &spreader{stickFor: 10 * time.Millisecond}
	pick := func(at time.Duration) (int32, bool) {
		t.Helper()
		p, b, trial, ok, known := s.pick(t0.Add(at), bs)
		if !known {
			t.Fatalf("pick at +%v: partition count not known", at)
		}
		if ok && trial {
			b.untried()
		}
		return p, ok
	}

	if _, _, _, _, known := s.pick(t0, bs); known {
		t.Fatal("pick before the partition count was read: known, want the keyed fallback")
	}
	s.setPartitions(3)
	s.setPartitions(0) // a failed read keeps the count

	// Within stickFor every order goes to one partition; over three
	// periods, to each of the three once.
	seen := map[int32]int{}
	for at := time.Duration(0); at < 30*time.Millisecond; at += time.Millisecond {
		p, ok := pick(at)
		if !ok {
			t.Fatalf("pick at +%v refused with every breaker closed", at)
		}
		seen[p]++
	}
	if len(seen) != 3 || seen[0] != 10 || seen[1] != 10 || seen[2] != 10 {
		t.Errorf("30 ms of orders, one a millisecond, over 3 partitions: %v, want 10 on each", seen)
	}

	// Partition 1's leader fails: its turn goes to the next partition.
	bs.forPartition(1).failure(t0.Add(30*time.Millisecond), false)
	seen = map[int32]int{}
	for at := 30 * time.Millisecond; at < 90*time.Millisecond; at += time.Millisecond {
		p, ok := pick(at)
		if !ok {
			t.Fatalf("pick at +%v refused with two partitions healthy", at)
		}
		seen[p]++
	}
	if seen[1] != 0 || seen[0] == 0 || seen[2] == 0 {
		t.Errorf("with partition 1 failing fast: %v, want none on 1 and some on 0 and 2", seen)
	}

	// Every partition failing: refused, the count still known.
	bs.forPartition(0).failure(t0.Add(90*time.Millisecond), false)
	bs.forPartition(2).failure(t0.Add(90*time.Millisecond), false)
	if _, ok := pick(100 * time.Millisecond); ok {
		t.Error("pick with every partition failing fast: ok")
	}

	// After the cooldown a failing partition gets its trial again.
	p, b, trial, ok, _ := s.pick(t0.Add(1200*time.Millisecond), bs)
	if !ok || !trial || b != bs.forPartition(p) {
		t.Errorf("pick after the cooldown = partition %d, ok %v, trial %v; want a trial on that partition's breaker", p, ok, trial)
	}
}

// With more than half the partitions failing fast the cluster is taken as
// down: the partitions not failing yet are not tried (each would hold its
// orders for the publish timeout), only the breakers' trials go out, and
// once a trial brings a partition back below half, every closed one is
// used again.
func TestSpreaderMostlyDown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(1, time.Second)
	s := &spreader{stickFor: 10 * time.Millisecond}
	s.setPartitions(4)
	bs.forPartition(0).failure(t0, false)
	bs.forPartition(1).failure(t0.Add(10*time.Millisecond), false)
	// Two of four is not more than half: partitions 2 and 3 take orders.
	if p, _, _, ok, _ := s.pick(t0.Add(20*time.Millisecond), bs); !ok || p < 2 {
		t.Fatalf("two of four failing: pick = partition %d, ok %v; want 2 or 3", p, ok)
	}
	bs.forPartition(2).failure(t0.Add(30*time.Millisecond), false)
	// Three of four: partition 3 is not tried.
	for at := 50 * time.Millisecond; at < time.Second; at += 50 * time.Millisecond {
		if p, _, _, ok, _ := s.pick(t0.Add(at), bs); ok {
			t.Fatalf("three of four failing, at +%v: pick = partition %d; want none", at, p)
		}
	}
	// Partition 0's cooldown is over: its trial goes, and nothing else.
	p, b, trial, ok, _ := s.pick(t0.Add(time.Second), bs)
	if !ok || !trial || p != 0 {
		t.Fatalf("after partition 0's cooldown: pick = partition %d, ok %v, trial %v; want partition 0's trial", p, ok, trial)
	}
	if p, _, _, ok, _ := s.pick(t0.Add(time.Second+time.Millisecond), bs); ok {
		t.Fatalf("with partition 0's trial in flight: pick = partition %d; want none", p)
	}
	// The trial is acknowledged: two of four again, so partition 3 (and 0)
	// take orders.
	b.success(true)
	seen := map[int32]bool{}
	for at := time.Second + 20*time.Millisecond; at < time.Second+200*time.Millisecond; at += 5 * time.Millisecond {
		p, b, trial, ok, _ := s.pick(t0.Add(at), bs)
		if ok && trial {
			b.untried()
		}
		if ok {
			seen[p] = true
		}
	}
	if !seen[3] || !seen[0] {
		t.Errorf("after the trial closed partition 0, partitions used: %v; want 0 and 3", seen)
	}
}

// On the real broker: spreading, one item's orders reach every partition
// of the topic; keyed by item, they all go to one.
func TestPublishSpread(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	const partitions = 4
	for _, tt := range []struct {
		spread bool
		want   int // partitions that got orders
	}{{true, partitions}, {false, 1}} {
		t.Run(fmt.Sprintf("spread=%v", tt.spread), func(t *testing.T) {
			topic := testTopic(t, ctx, ac, "test-publish-spread", partitions)
			p, err := New(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 10 * time.Second,
				Linger: time.Millisecond, FailFastAfter: 5, FailFastFor: time.Second, Spread: tt.spread})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close(5 * time.Second) })
			if tt.spread {
				for deadline := time.Now().Add(20 * time.Second); p.spread.partitions.Load() != partitions; {
					if time.Now().After(deadline) {
						t.Fatalf("partition count %d after 20s, want %d", p.spread.partitions.Load(), partitions)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			// The first order waits for the connection and the producer id.
			if err := p.Publish(7, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			// Then orders of the same item from 16 shoppers at once, for
			// longer than the spreader takes to visit every partition
			// twice.
			var wg sync.WaitGroup
			var mu sync.Mutex
			published := 1
			until := time.Now().Add(2 * partitions * spreadStick)
			for range 16 {
				wg.Go(func() {
					for time.Now().Before(until) {
						if err := p.Publish(7, []byte(`{}`)); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						published++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			counts := topicCounts(t, ctx, ac, topic, partitions)
			used, total := 0, int64(0)
			for _, n := range counts {
				total += n
				if n > 0 {
					used++
				}
			}
			if total != int64(published) || used != tt.want {
				t.Errorf("%d orders published, %d in the topic, over partitions %v: %d used, want %d", published, total, counts, used, tt.want)
			}
		})
	}
}

// brokerAdmin is an admin client of the local broker, and a context that
// bounds the test (2 minutes); the test is skipped without a broker.
func brokerAdmin(t *testing.T) (context.Context, *kafka.AdminClient) {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	ctx, cancel := context.WithTimeout(testenv.Context(t), 2*time.Minute)
	t.Cleanup(cancel)
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ac.Close)
	return ctx, ac
}

// testTopic makes a topic of the given partitions, named from prefix, and
// deletes it when the test is over.
func testTopic(t *testing.T, ctx context.Context, ac *kafka.AdminClient, prefix string, partitions int) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	spec := kafkatopic.Spec{Topics: []string{topic}, Partitions: partitions, ReplicationFactor: 1, MinInsyncReplicas: 1, Retention: time.Hour}
	if err := kafkatopic.Ensure(ctx, ac, spec, io.Discard); err != nil {
		t.Fatal(err)
	}
	kafkatopic.DeleteAtCleanup(t, testenv.KafkaBrokers(), topic)
	return topic
}

// topicCounts is each partition's high watermark.
func topicCounts(t *testing.T, ctx context.Context, ac *kafka.AdminClient, topic string, partitions int) []int64 {
	t.Helper()
	req := map[kafka.TopicPartition]kafka.OffsetSpec{}
	for p := range partitions {
		req[kafka.TopicPartition{Topic: &topic, Partition: int32(p)}] = kafka.LatestOffsetSpec
	}
	res, err := ac.ListOffsets(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, partitions)
	for tp, info := range res.ResultInfos {
		if info.Error.Code() != kafka.ErrNoError {
			t.Fatalf("offsets of %s[%d]: %v", topic, tp.Partition, info.Error)
		}
		counts[tp.Partition] = int64(info.Offset)
	}
	return counts
}
