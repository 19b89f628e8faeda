package publish

import (
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// stuckCheck replaces a librdkafka client that stopped delivering to
// partitions the cluster serves. librdkafka (2.11 to 2.14 at least) can
// lose a partition for good when a produce response names no leader for
// it: a KRaft broker fenced for a moment (its controller missed its
// heartbeats, a pause longer than broker.session.timeout.ms) answers
// leader -1, the client skips that update and keeps the partition with no
// broker, and every later message to it times out although metadata
// shows the leader back a few milliseconds later
// (confluentinc/librdkafka#5430, "new leader-1 not found in cache" in the
// log). The client never recovers by itself: fault scenario 6b caught a
// gateway answering 503 to every purchase for a minute after the broker's
// freeze. A new client learns the partitions afresh.
//
// The check is cheap when nothing fails: it looks only at partitions whose
// breaker has been open for after (several publish timeouts: many trials
// failed), and asks the cluster about them, once a second. When the
// cluster has answered for grace (time for trials to reach the partition
// and fail) that such a partition has a leader and every replica in sync,
// and its breaker is still open, the fault is the client's: a new client
// takes the next publishes, and the old one is closed once its deliveries
// in flight have their reports (no publish is failed for it). A partition
// that the cluster reports leaderless or short of replicas, or a cluster
// that does not answer, is an outage the breakers already handle; a client
// that recovers by itself closes the breaker with its next trial.
type stuckCheck struct {
	mu       sync.Mutex    // keepUp's goroutine, and tests calling checkStuck
	after    time.Duration // a partition failing this long is a suspect
	grace    time.Duration // and served this long, a stuck one
	every    time.Duration // at most one replacement per every
	timeout  time.Duration // the publish timeout: a retired client's drain
	last     time.Time     // the last replacement
	servedAt map[int32]time.Time
}

func newStuckCheck(publishTimeout time.Duration) *stuckCheck {
	return &stuckCheck{after: max(3*publishTimeout, 5*time.Second), grace: 2*publishTimeout + time.Second,
		every: 30 * time.Second, timeout: publishTimeout, servedAt: map[int32]time.Time{}}
}

// stuck takes the partitions the cluster serves now among the failing
// ones, and answers those it has served for grace.
func (s *stuckCheck) stuck(now time.Time, served []int32) []int32 {
	var out []int32
	for part := range s.servedAt {
		if !slices.Contains(served, part) {
			delete(s.servedAt, part)
		}
	}
	for _, part := range served {
		at, ok := s.servedAt[part]
		if !ok {
			s.servedAt[part] = now
		} else if now.Sub(at) >= s.grace {
			out = append(out, part)
		}
	}
	return out
}

// checkStuck replaces the client when a partition failing since before
// now-after is one the cluster serves (see stuckCheck).
func (p *Producer) checkStuck(now time.Time) {
	p.stuck.mu.Lock()
	defer p.stuck.mu.Unlock()
	if !p.stuck.last.IsZero() && now.Sub(p.stuck.last) < p.stuck.every {
		return
	}
	suspects := p.breakers.failingSince(now.Add(-p.stuck.after))
	if len(suspects) == 0 {
		clear(p.stuck.servedAt)
		return
	}
	md, err := p.client.Load().GetMetadata(&p.topic, false, int(partitionsRetry/time.Millisecond))
	t, ok := topicOf(md, p.topic)
	if err != nil || !ok || t.Error.Code() != kafka.ErrNoError {
		clear(p.stuck.servedAt) // the cluster does not answer: an outage, not the client
		return
	}
	stuck := p.stuck.stuck(now, served(t, suspects))
	if len(stuck) == 0 {
		return
	}
	p.stuck.last = now
	clear(p.stuck.servedAt)
	p.replaceClient(stuck)
}

// served is the partitions among suspects that t shows with a leader and
// every replica in sync.
func served(t kafka.TopicMetadata, suspects []int32) []int32 {
	var out []int32
	for _, pm := range t.Partitions {
		if slices.Contains(suspects, pm.ID) && pm.Error.Code() == kafka.ErrNoError &&
			pm.Leader >= 0 && len(pm.Isrs) >= len(pm.Replicas) {
			out = append(out, pm.ID)
		}
	}
	slices.Sort(out)
	return out
}

// replaceClient makes a new client take the next publishes, and closes
// the old one in the background once its deliveries have their reports
// (within the publish timeout; Close waits for it).
func (p *Producer) replaceClient(partitions []int32) {
	c, err := p.newClient()
	if err != nil {
		p.log.Error("kafka producer stuck, and no new one", "partitions", partitions, "err", err)
		return
	}
	old := p.client.Swap(c)
	p.metrics.replaced.Inc()
	p.log.Warn("replaced the kafka producer: the cluster serves partitions it has failed every delivery to (confluentinc/librdkafka#5430)",
		"partitions", partitions, "failing_for_at_least", p.stuck.after)
	p.clients.Add(1)
	go func() {
		defer p.clients.Done()
		left := old.Flush(int((p.stuck.timeout + purgeServe) / time.Millisecond))
		closeClient(old, left > 0)
	}()
}
