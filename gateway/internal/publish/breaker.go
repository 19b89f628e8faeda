package publish

import (
	"fmt"
	"sync/atomic"
	"time"
)

// errBrokerDown is what Publish returns while the breaker is open: the
// event never reached the producer, so the caller gives the unit back at
// once. Built once: under an outage every purchase meets it.
var errBrokerDown = fmt.Errorf("%w: the broker failed the last deliveries; failing fast until a trial delivery succeeds", ErrNotPublished)

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
	trial     atomic.Bool  // a trial delivery is in flight
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
	if trial {
		b.trial.Store(false)
	}
}

// failure records a delivery the broker did not acknowledge.
func (b *breaker) failure(now time.Time, trial bool) {
	n := b.failures.Add(1)
	if b.threshold > 0 && (trial || n >= b.threshold) {
		b.openUntil.Store(now.Add(b.cooldown).UnixNano())
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
		b.openUntil.Store(now.Add(b.cooldown).UnixNano())
	}
}

// open reports whether publishes are failing fast: from the moment it
// opened until a delivery succeeds (the trial's, or a late one), including
// while the trial is in flight and every other publish is refused.
func (b *breaker) open() bool { return b.openUntil.Load() != 0 }
