package publish

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// errBrokerDown is what Publish returns while the breaker of the
// partition an order would go to is open (spreading: while no partition's
// breaker allows it): the event never reached the producer, so the caller
// gives the unit back at once. Built once: under an outage every refused
// purchase meets it.
var errBrokerDown = fmt.Errorf("%w: the broker failed the last deliveries to the item's partition; failing fast until a trial delivery succeeds", ErrNotPublished)

// breaker makes purchases fail fast while the broker is known to be down.
// Without it, with the broker unreachable or short of in-sync replicas,
// every purchase would hold its reservation and its shopper for the whole
// publish timeout (librdkafka retries a retriable error until
// message.timeout.ms), only to be refused. After threshold deliveries in a
// row failed, or when librdkafka reports every broker down, it opens for
// cooldown; then one trial delivery goes through while the others keep
// failing fast; its success closes the breaker, its failure opens it again.
// Any acknowledged delivery closes it. All methods are safe for concurrent
// use and take the current time from the caller, so tests need no clock.
type breaker struct {
	threshold int64         // failures in a row that open it; 0: never opens
	cooldown  time.Duration // how long it stays open before a trial
	failures  atomic.Int64
	openUntil atomic.Int64 // unix nanoseconds; 0: closed
	openedAt  atomic.Int64 // unix nanoseconds: when it opened, about (see openFor); 0: closed
	failedAt  atomic.Int64 // unix nanoseconds: the last delivery that failed
	trial     atomic.Bool  // a trial delivery is in flight
}

// openFor opens the breaker until until, noting when it opened unless a
// time is noted already. Not a lock: a success closing it at the same
// moment may clear the time after this noted it, and the next opening
// notes it again (the stuck check, its only reader, then waits longer).
func (b *breaker) openFor(now time.Time, until int64) {
	b.openUntil.Store(until)
	b.openedAt.CompareAndSwap(0, now.UnixNano())
}

// allow reports whether a delivery may be attempted at now, and whether it
// is the trial one (whose outcome the caller must report with trial=true).
func (b *breaker) allow(now time.Time) (ok, trial bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if now.UnixNano() < until {
		return false, false
	}
	if b.trial.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// success records an acknowledged delivery.
func (b *breaker) success(trial bool) {
	b.failures.Store(0)
	b.openUntil.Store(0)
	b.openedAt.Store(0)
	if trial {
		b.trial.Store(false)
	}
}

// failure records a delivery the broker did not acknowledge. A trial's
// failure opens the breaker again only while it is open: when a late
// acknowledgement closed it meanwhile, the trial counts as one failure.
func (b *breaker) failure(now time.Time, trial bool) {
	b.failedAt.Store(now.UnixNano())
	n := b.failures.Add(1)
	if b.threshold > 0 && (n >= b.threshold || trial && b.open()) {
		b.openFor(now, now.Add(b.cooldown).UnixNano())
	}
	if trial {
		b.trial.Store(false)
	}
}

// untried gives the trial back without a verdict (the producer refused
// the event locally, which says nothing about the broker): the next publish
// is the trial.
func (b *breaker) untried() { b.trial.Store(false) }

// trip opens the breaker at once (librdkafka reports every broker down).
func (b *breaker) trip(now time.Time) {
	if b.threshold > 0 {
		b.openFor(now, now.Add(b.cooldown).UnixNano())
	}
}

// open reports whether publishes are failing fast: from the moment it
// opened until a delivery succeeds (the trial's, or a late one), including
// while the trial is in flight and every other publish is refused.
func (b *breaker) open() bool { return b.openUntil.Load() != 0 }

// unknownPartition keys the breaker of the items whose partition no
// delivery report has named yet (librdkafka's kafka.PartitionAny). Every
// delivery that fails before the topic's metadata arrives lands there too,
// as a broker that cannot be reached names no partition.
const unknownPartition int32 = -1

// maxItemsLearned bounds the item-to-partition map; past it the map starts
// over and each item's next delivery names its partition again.
const maxItemsLearned = 1 << 16

// breakers keeps one breaker per partition of the topic, so a broker that
// fails the deliveries of the partitions it leads stops only the orders
// bound there. Spreading, the spreader passes over those partitions (see
// spreader). Keyed by item, librdkafka chooses the partition from the key:
// which one an item's orders go to is learned from their delivery reports,
// which name it, and the sales on the failing partitions fail fast while
// the others keep selling.
//
// librdkafka's report that it reaches no broker (trip) opens every breaker
// and holds until a delivery is acknowledged: a partition's breaker made
// meanwhile (a spreading producer makes them on its first pick) starts
// open too, with its trial after the trip's cooldown, or at once if that
// has passed.
type breakers struct {
	threshold int64
	cooldown  time.Duration
	unknown   *breaker     // byPart[unknownPartition]
	tripped   atomic.Int64 // unix nanoseconds: the last trip's cooldown end, until an acknowledgement; 0: none
	// replacedAt: unix nanoseconds of the client's last replacement (the
	// stuck check's); failures before it were another client's.
	replacedAt atomic.Int64

	mu     sync.RWMutex
	byPart map[int32]*breaker
	items  map[int64]int32 // item id -> the partition its last delivery report named
}

func newBreakers(threshold int64, cooldown time.Duration) *breakers {
	unknown := &breaker{threshold: threshold, cooldown: cooldown}
	return &breakers{threshold: threshold, cooldown: cooldown, unknown: unknown,
		byPart: map[int32]*breaker{unknownPartition: unknown},
		items:  map[int64]int32{}}
}

// forItem is the breaker that decides whether an order of itemID may be
// published now.
func (bs *breakers) forItem(itemID int64) *breaker {
	bs.mu.RLock()
	defer bs.mu.RUnlock()
	part, ok := bs.items[itemID]
	if !ok {
		part = unknownPartition
	}
	return bs.byPart[part]
}

// record counts a delivery for rb, the breaker of the partition its report
// named. b is the breaker allow was asked of, trial what it answered: when
// rb is another (the item's first report, or its partition moved), b's
// trial ends with the same outcome. An acknowledgement also ends a trip
// and closes the breaker of the deliveries that named no partition: the
// cluster is reachable, and once every item is placed nothing would ask
// that breaker for a trial again (it would count as failing fast for ever).
func (bs *breakers) record(b, rb *breaker, trial, acked bool, now time.Time) {
	if acked {
		if bs.tripped.Load() != 0 {
			bs.tripped.Store(0)
		}
		if bs.unknown.open() {
			bs.unknown.success(false)
		}
	}
	count := func(x *breaker, trial bool) {
		if acked {
			x.success(trial)
		} else {
			x.failure(now, trial)
		}
	}
	if rb == b {
		count(b, trial)
		return
	}
	count(rb, false)
	if trial {
		count(b, true)
	}
}

// forReport is the breaker of the partition a delivery report of itemID
// named (part; negative: none), and it remembers that partition for the
// item.
func (bs *breakers) forReport(itemID int64, part int32) *breaker {
	if part < 0 {
		return bs.forPartition(unknownPartition)
	}
	bs.mu.RLock()
	learned, ok := bs.items[itemID]
	bs.mu.RUnlock()
	b := bs.forPartition(part)
	if !ok || learned != part {
		bs.mu.Lock()
		if len(bs.items) >= maxItemsLearned {
			clear(bs.items)
		}
		bs.items[itemID] = part
		bs.mu.Unlock()
	}
	return b
}

// forPartition is the breaker of partition part, made on first use.
func (bs *breakers) forPartition(part int32) *breaker {
	bs.mu.RLock()
	b := bs.byPart[part]
	bs.mu.RUnlock()
	if b != nil {
		return b
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b = bs.byPart[part]; b == nil {
		b = &breaker{threshold: bs.threshold, cooldown: bs.cooldown}
		// Made while every broker is known down: open like the others.
		// trip stores tripped under the read lock, so it either sees this
		// breaker in byPart or stored tripped before it was made.
		if until := bs.tripped.Load(); until != 0 {
			b.openFor(time.Now(), until)
		}
		bs.byPart[part] = b
	}
	return b
}

// trip opens every partition's breaker (librdkafka reaches no broker),
// the ones made before the next acknowledgement too.
func (bs *breakers) trip(now time.Time) {
	if bs.threshold <= 0 {
		return
	}
	bs.mu.RLock()
	defer bs.mu.RUnlock()
	bs.tripped.Store(now.Add(bs.cooldown).UnixNano())
	for _, b := range bs.byPart {
		b.trip(now)
	}
}

// failingSince lists the partitions (not unknownPartition) whose breaker
// has been open since opened or earlier and failed a delivery since
// failed, on the current client (after its last replacement).
func (bs *breakers) failingSince(opened, failed time.Time) []int32 {
	since := max(failed.UnixNano(), bs.replacedAt.Load())
	bs.mu.RLock()
	defer bs.mu.RUnlock()
	var out []int32
	for part, b := range bs.byPart {
		at := b.openedAt.Load()
		if part != unknownPartition && b.open() && at != 0 && at <= opened.UnixNano() && b.failedAt.Load() >= since {
			out = append(out, part)
		}
	}
	return out
}

// open counts the partitions whose sales are failing fast now.
func (bs *breakers) open() int {
	bs.mu.RLock()
	defer bs.mu.RUnlock()
	n := 0
	for _, b := range bs.byPart {
		if b.open() {
			n++
		}
	}
	return n
}
