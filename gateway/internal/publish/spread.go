package publish

import (
	"sync/atomic"
	"time"
)

// spreader chooses the partition of each order when one item's orders go
// to every partition of the topic (Config.Spread), so that a hot item's
// sale is carried by every partition leader and consumer instead of one.
// It stays on one partition for stickFor, so librdkafka's batches stay
// as large as with a key and each broker serves one partition's batches
// at a time, then moves on to the next. A partition whose
// breaker refuses is passed over, so a leader that stopped acknowledging
// costs the orders in flight to it, not the sale; only when every
// partition refuses is the order refused. While more than half the
// partitions are failing fast, the cluster has lost more than one leader
// (a quorum, or the gateway's reach): the partitions not failing yet
// would most likely fail too, and each would hold its orders for the
// publish timeout before its breaker learnt it. Then only the breakers'
// trials go out, and the rest is refused at once, as a keyed sale's
// purchases are once its one partition fails.
//
// Until the topic's partition count is known (setPartitions, from the
// topic's metadata) pick answers ok=false and the producer keys the order
// by item as when spreading is off.
type spreader struct {
	stickFor   time.Duration
	partitions atomic.Int32 // 0: not known yet
	current    atomic.Int32
	moveAt     atomic.Int64 // unix nanoseconds: when to move to the next partition
	countedAt  atomic.Int64 // unix nanoseconds: when mostlyDown was last counted
	mostlyDown atomic.Bool  // more than half the partitions failing fast
}

// recount is how often the partitions failing fast are counted again.
const recount = 10 * time.Millisecond

// setPartitions records the topic's partition count (n <= 0 is ignored:
// a failed metadata read keeps the last count).
func (s *spreader) setPartitions(n int) {
	if n > 0 {
		s.partitions.Store(int32(n))
	}
}

// pick chooses the partition of an order published at now, the breaker
// that allowed it and whether that is its trial. known is false while the
// partition count is not known; ok is false when every partition's breaker
// refuses.
func (s *spreader) pick(now time.Time, bs *breakers) (part int32, b *breaker, trial, ok, known bool) {
	n := s.partitions.Load()
	if n <= 0 {
		return 0, nil, false, false, false
	}
	raw := s.current.Load()
	cur := raw % n
	if at := s.moveAt.Load(); now.UnixNano() >= at && s.moveAt.CompareAndSwap(at, now.Add(s.stickFor).UnixNano()) {
		cur = (cur + 1) % n
		// Not Store: a pick that passed over an open partition since raw
		// was read moved current on, and that must not be undone.
		s.current.CompareAndSwap(raw, cur)
	}
	down := s.down(now, bs, n)
	for i := range n {
		p := (cur + i) % n
		b := bs.forPartition(p)
		if down && !b.open() {
			continue // mostly down: only trials go out
		}
		if ok, trial := b.allow(now); ok {
			if i > 0 {
				s.current.CompareAndSwap(cur, p)
			}
			return p, b, trial, true, true
		}
	}
	return 0, nil, false, false, true
}

// down reports whether more than half the n partitions are failing fast,
// counted at most every recount.
func (s *spreader) down(now time.Time, bs *breakers, n int32) bool {
	at := s.countedAt.Load()
	if now.UnixNano()-at >= int64(recount) && s.countedAt.CompareAndSwap(at, now.UnixNano()) {
		open := int32(0)
		for p := range n {
			if bs.forPartition(p).open() {
				open++
			}
		}
		s.mostlyDown.Store(2*open > n)
	}
	return s.mostlyDown.Load()
}
