package consumer

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/kafkastuck"
)

// stallCheck replaces the group consumer's client when it stopped reading
// partitions the cluster serves (pkg/kafkastuck: confluentinc/librdkafka#5430).
// Fault scenario 6b caught an order service that persisted nothing more
// after the broker had been fenced for a moment: its partitions had
// messages, its client never fetched them again.
//
// Run looks every `every`, between batches: a partition it holds that
// gave no message (nor error) to a finished batch for `after` while the group's lag on it is
// above zero (Config.Lag: the service's periodic lag reading, so an idle
// stack sends the brokers nothing more) and the client's own position is
// short of the end that reading saw is a suspect; once the cluster has served a
// suspect for the watch's grace, the client is the fault, and a new one
// joins the group in its place (the old one leaves first, committing what
// was persisted). A partition the cluster does not serve is an outage:
// librdkafka reads it again when it is back. Without a lag reading (none
// yet, a failed one, or an old one) no partition it holds is a suspect;
// a member that lost them all is (see lostAt). Only Run's
// goroutine (and the rebalance callback, which Poll calls there) touches
// it.
type stallCheck struct {
	after    time.Duration
	every    time.Duration
	next     time.Time
	progress map[int32]time.Time // the partitions held: their last batch (or message error), or their assignment
	// lostAt is when the group took the member's partitions away as lost
	// (its session timed out: a broker outage longer than
	// session.timeout.ms), zero once an assignment, even an empty one,
	// came back. A member that cannot rejoin (fault scenario 2 caught one
	// whose rejoin request sat in its coordinator's queue for a minute
	// after the broker was back) holds no partition, so no partition of it
	// can look stalled: while it has none and the cluster serves the
	// topic's partitions, the member is the suspect, with or without a
	// lag reading (fault 6b: the readings failed too).
	lostAt time.Time
	watch  kafkastuck.Watch
}

func newStallCheck() *stallCheck {
	return &stallCheck{after: 15 * time.Second, every: 5 * time.Second, progress: map[int32]time.Time{},
		watch: kafkastuck.Watch{Grace: 5 * time.Second, Every: 30 * time.Second}}
}

// closeWait bounds the wait for a replaced client to leave the group; past
// it the client is left behind (librdkafka's close can block while the
// group coordinator moves) and the group gives its partitions away after
// its session timeout.
const closeWait = 10 * time.Second

// closeWithin closes kc, waiting at most d for it to leave its group. It
// reports whether the close returned in time, and its error.
func closeWithin(kc *kafka.Consumer, d time.Duration) (returned bool, err error) {
	closed := make(chan error, 1)
	go func() { closed <- kc.Close() }()
	select {
	case err := <-closed:
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

func (s *stallCheck) due(now time.Time) bool { return !now.Before(s.next) }

func (s *stallCheck) read(part int32, now time.Time) { s.progress[part] = now }

func (s *stallCheck) assigned(tps []kafka.TopicPartition, now time.Time) {
	s.lostAt = time.Time{}
	for _, tp := range tps {
		s.progress[tp.Partition] = now
	}
}

func (s *stallCheck) revoked(tps []kafka.TopicPartition, lost bool, now time.Time) {
	for _, tp := range tps {
		delete(s.progress, tp.Partition)
	}
	if lost && len(s.progress) == 0 {
		s.lostAt = now
	}
}

// checkStall returns the partitions the current client has stopped
// reading though the cluster serves them (see stallCheck).
func (c *Consumer) checkStall(now time.Time) []int32 {
	s := c.stall
	s.next = now.Add(s.every)
	if !s.watch.Due(now) {
		return nil
	}
	lost := !s.lostAt.IsZero() && len(s.progress) == 0 && now.Sub(s.lostAt) >= s.after
	ends := c.ends(now)
	var suspects []int32
	for part, at := range s.progress {
		if end, ok := ends[part]; ok && now.Sub(at) >= s.after && c.behind(part, end) {
			suspects = append(suspects, part)
		}
	}
	if len(suspects) == 0 && !lost {
		return s.watch.Stuck(now, nil)
	}
	t, ok := c.topicMetadata()
	if !ok {
		return s.watch.Stuck(now, nil)
	}
	if lost {
		// Lost and not back for s.after: every partition of the topic is
		// its concern (see lostAt), whatever the lag reading says. A lag
		// reading needs the group's coordinator, and the coordinator's
		// queue is where a rejoin that never leaves sits: fault 6b saw the
		// member's rejoin and the lag reader's requests both wait there
		// for a minute after a 3 s broker freeze, the readings failing, and
		// no member persisting anything. A healthy member rejoins within
		// a session timeout.
		suspects = suspects[:0]
		for _, pm := range t.Partitions {
			suspects = append(suspects, pm.ID)
		}
	}
	return s.watch.Stuck(now, kafkastuck.Served(t, suspects))
}

// topicMetadata is the orders topic as the cluster shows it, through the
// current client or a fresh one (kafkastuck.ClusterTopic), with its
// partitions.
func (c *Consumer) topicMetadata() (kafka.TopicMetadata, bool) {
	fresh := func() (kafkastuck.MetadataSource, func(), error) {
		cm := kafka.ConfigMap{"bootstrap.servers": c.cfg.Brokers, "log_level": 3}
		c.cfg.Security.Apply(cm)
		adm, err := kafka.NewAdminClient(&cm)
		if err != nil {
			return nil, nil, err
		}
		return adm, adm.Close, nil
	}
	t, ok := kafkastuck.ClusterTopic(c.consumer, c.cfg.Topic, time.Second, fresh, 2*time.Second)
	return t, ok && len(t.Partitions) > 0
}

// partitionEnd is where a partition ended, and the group's committed
// offset there, at the last lag reading.
type partitionEnd struct{ end, committed int64 }

// ends is the last lag reading's partitions with a lag above zero, if the
// reading is good and recent (taken within after+every; a lag interval
// longer than that turns the check off).
func (c *Consumer) ends(now time.Time) map[int32]partitionEnd {
	if c.cfg.Lag == nil {
		return nil
	}
	rd := c.cfg.Lag.Last()
	if rd.Err != nil || rd.At.IsZero() || now.Sub(rd.At) > c.stall.after+c.stall.every {
		return nil
	}
	out := map[int32]partitionEnd{}
	for _, p := range rd.Lag.Partitions {
		if p.Lag > 0 {
			out[p.Partition] = partitionEnd{end: p.End, committed: p.Committed}
		}
	}
	return out
}

// behind reports whether the client's own position in part (what it has
// read, whether or not the group committed it: a commit that fails while
// the client reads on is not a stuck client) is short of the end the
// reading saw; with no position yet, the committed offset counts.
func (c *Consumer) behind(part int32, e partitionEnd) bool {
	pos := e.committed
	got, err := c.consumer.Position([]kafka.TopicPartition{{Topic: &c.cfg.Topic, Partition: part}})
	if err == nil && len(got) == 1 && got[0].Offset >= 0 {
		pos = int64(got[0].Offset)
	}
	return pos < e.end
}

// replaceClient closes the current client (its callback retired: the
// batch is already finished) and subscribes a new one to the group. It
// returns the new callback's retirement flag; an error only when no new
// client can be made.
func (c *Consumer) replaceClient(stuck []int32, retired *atomic.Bool, flush func() error, failed *error) (*atomic.Bool, error) {
	kc, err := newGroupClient(c.cfg)
	if err != nil {
		return retired, fmt.Errorf("replace the stuck kafka consumer: %w", err)
	}
	if len(c.stall.progress) == 0 && !c.stall.lostAt.IsZero() {
		c.log.Warn("replacing the kafka consumer: it lost its partitions and never got an assignment back, while the cluster serves the topic's partitions",
			"partitions", stuck, "lost_since", c.stall.lostAt)
	} else {
		c.log.Warn("replacing the kafka consumer: partitions the cluster serves have messages it stopped reading (confluentinc/librdkafka#5430)",
			"partitions", stuck, "no_message_for_at_least", c.stall.after)
	}
	retired.Store(true)
	c.processing.Store(true) // Ready: busy, not stalled, while the old client leaves
	defer c.processing.Store(false)
	if left, err := closeWithin(c.consumer, closeWait); !left {
		c.log.Error("the stuck kafka consumer did not leave the group; left behind, its partitions move after its session timeout", "waited", closeWait)
	} else {
		if err != nil {
			c.log.Warn("close the stuck kafka consumer", "err", err)
		}
		<-c.logsDone
	}
	c.consumer = kc
	c.logsDone = forwardLog(c.log, kc.Logs())
	clear(c.stall.progress)
	c.stall.lostAt = time.Now() // the new member has no assignment yet: see lostAt
	c.metrics.ConsumerReplaced.Inc()
	next, err := c.subscribe(flush, failed)
	if err != nil {
		return retired, err
	}
	return next, nil
}
