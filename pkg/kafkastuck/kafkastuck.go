// Package kafkastuck tells a librdkafka client that lost partitions for
// good from a cluster that is down. librdkafka (2.11 to 2.14 at least) can
// keep a partition without a leader for ever when a produce or fetch
// response names leader -1 for it: a KRaft broker fenced for a moment (its
// controller missed its heartbeats in a pause longer than
// broker.session.timeout.ms) answers so for a few milliseconds, the client
// skips that update, and every later message to or from the partition
// waits, though metadata shows the leader back at once
// (confluentinc/librdkafka#5430; "new leader-1 not found in cache" in the
// client's log). The client never recovers by itself; a new client learns
// the partitions afresh. The gateway's producer and the order service's
// consumer each watch their partitions and replace their client when a
// partition they cannot use is one the cluster serves (Watch).
package kafkastuck

import (
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Served is the partitions among parts that t shows with a leader, every
// replica in sync and no error: the cluster serves them.
func Served(t kafka.TopicMetadata, parts []int32) []int32 {
	var out []int32
	for _, pm := range t.Partitions {
		if slices.Contains(parts, pm.ID) && pm.Error.Code() == kafka.ErrNoError &&
			pm.Leader >= 0 && len(pm.Isrs) >= len(pm.Replicas) {
			out = append(out, pm.ID)
		}
	}
	slices.Sort(out)
	return out
}

// MetadataSource answers metadata requests: a librdkafka producer,
// consumer or admin client.
type MetadataSource interface {
	GetMetadata(topic *string, allTopics bool, timeoutMs int) (*kafka.Metadata, error)
}

// ClusterTopic is what the cluster says of topic (shown without error):
// asked of current within wait, or, when that one has no answer, of the
// client fresh makes for this one question (closed after), within
// freshWait. The current client may be the stuck one: fault 6b caught a
// gateway's producer, and later an order service's consumer, that after
// the broker's freeze answered no metadata for a minute while the cluster
// served every partition, so a check that asked it alone never found a
// suspect served and never replaced it. A fresh client costs a
// connection, made only while the current one has no answer.
func ClusterTopic(current MetadataSource, topic string, wait time.Duration,
	fresh func() (MetadataSource, func(), error), freshWait time.Duration) (kafka.TopicMetadata, bool) {
	ask := func(c MetadataSource, d time.Duration) (kafka.TopicMetadata, bool) {
		md, err := c.GetMetadata(&topic, false, int(d/time.Millisecond))
		if err != nil || md == nil {
			return kafka.TopicMetadata{}, false
		}
		t, ok := md.Topics[topic]
		return t, ok && t.Error.Code() == kafka.ErrNoError
	}
	if t, ok := ask(current, wait); ok {
		return t, true
	}
	c, done, err := fresh()
	if err != nil {
		return kafka.TopicMetadata{}, false
	}
	defer done()
	return ask(c, freshWait)
}

// Watch decides when failing partitions are the client's fault: when the
// cluster has served them for Grace (time for the client to use them, had
// it been able to) while they kept failing, and no replacement happened
// in the last Every. A replacement that did not help (another one is due
// within twice the wait) doubles the wait, up to 16 Every: something else
// is wrong (a client cut off from one broker that the others report in
// sync), and a new client every Every would only cost connections, or for a
// consumer a rebalance of the group each time. Not safe for concurrent use.
type Watch struct {
	Grace    time.Duration
	Every    time.Duration
	last     time.Time     // the last replacement
	wait     time.Duration // after it; Every until replacements repeat
	servedAt map[int32]time.Time
}

// Due reports whether a replacement may happen at now (the wait has passed
// since the last one); when it may not, a caller skips its checks.
func (w *Watch) Due(now time.Time) bool {
	return w.last.IsZero() || now.Sub(w.last) >= w.wait
}

// Stuck takes the failing partitions the cluster serves now (served; nil
// when none fail or the cluster did not answer) and returns those it has
// served for Grace. A non-empty answer counts as a replacement.
func (w *Watch) Stuck(now time.Time, served []int32) []int32 {
	if w.servedAt == nil {
		w.servedAt = map[int32]time.Time{}
	}
	for part := range w.servedAt {
		if !slices.Contains(served, part) {
			delete(w.servedAt, part)
		}
	}
	var out []int32
	for _, part := range served {
		at, ok := w.servedAt[part]
		if !ok {
			w.servedAt[part] = now
		} else if now.Sub(at) >= w.Grace {
			out = append(out, part)
		}
	}
	if len(out) > 0 {
		if !w.last.IsZero() && now.Sub(w.last) < 2*w.wait {
			w.wait = min(2*w.wait, 16*w.Every)
		} else {
			w.wait = w.Every
		}
		w.last = now
		clear(w.servedAt)
	}
	return out
}
