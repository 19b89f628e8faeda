package sale

import (
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
)

// The decisions of a reconciliation, as pure functions of what Redis and
// PostgreSQL say: compare gathers the facts and assembles the verdicts.

// holderVerdict is what a Redis holder that no active order explains turns
// out to be.
type holderVerdict int

const (
	// holderSuperseded: PostgreSQL holds another active order of the user.
	// It wins, and HOLDER_MISSING reports it; an order behind this holder
	// can only end REJECTED when it is persisted.
	holderSuperseded holderVerdict = iota + 1
	// holderPersisted: persisted (PENDING or PAID) after the snapshot: in
	// flight with a known item.
	holderPersisted
	// holderReleasing: the order ended and its release is still queued:
	// left to the relay.
	holderReleasing
	// holderStale: the order ended and no release is queued (or the row is
	// another user's): HOLDER_STALE.
	holderStale
	// holderInFlight: no row yet, but accepted for this user, or still
	// waiting for the broker's acknowledgement (the gateway records an
	// accepted order only after the ack): in flight, item unknown.
	holderInFlight
	// holderLeaked: neither a row, an accepted record nor a recent id: a
	// reservation nobody was given: HOLDER_LEAKED.
	holderLeaked
)

// diff is the kind of difference the verdict reports, "" for none.
func (v holderVerdict) diff() string {
	switch v {
	case holderStale:
		return DiffHolderStale
	case holderLeaked:
		return DiffHolderLeaked
	}
	return ""
}

// keep tells whether a repair keeps the holder in Redis. Those it drops
// give their unit back: a releasing holder's later release then finds
// nothing to do; a superseded one yields to the active order's holder.
func (v holderVerdict) keep() bool { return v == holderPersisted || v == holderInFlight }

// holderFacts is what is known of one holder.
type holderFacts struct {
	user       string          // the holder's user in Redis
	userActive bool            // PostgreSQL has an active order of this user
	row        store.HeldOrder // the row of the holder's order, if hasRow
	hasRow     bool
	accepted   bool // the gateway's accepted record names this user
	// The order id, and the in-flight window at now: a UUIDv7 id minted
	// within it may still be waiting for the broker.
	id     uuid.UUID
	now    time.Time
	window time.Duration
}

// judgeHolder decides what a holder no active order explains is.
func judgeHolder(f holderFacts) holderVerdict {
	mine := f.hasRow && f.row.UserID == f.user
	switch {
	case f.userActive:
		return holderSuperseded
	case mine && (f.row.Status == store.StatusPending || f.row.Status == store.StatusPaid):
		return holderPersisted
	case mine && f.row.ReleasePending:
		return holderReleasing
	case f.hasRow:
		return holderStale
	case f.accepted || placedRecently(f.id, f.now, f.window):
		return holderInFlight
	}
	return holderLeaked
}

// stockVerdict is the decision on one item's units left.
type stockVerdict struct {
	// expected units left in Redis: quantity - active - inFlight - releasing.
	expected int64
	diff     string // DiffStockNotLoaded, DiffStockMismatch or ""
	// write is what a repair writes: quantity - active - inFlight, at least
	// 0. Releasing units are counted as returned (the repair drops their
	// holders). More orders in flight than PostgreSQL has units for: some
	// will be REJECTED when persisted, and their releases bring the units
	// back.
	write int64
}

// judgeStock compares an item's units left in Redis (loaded false: the key
// is missing) with what PostgreSQL implies.
func judgeStock(it ItemReconciliation, left int64, loaded bool) stockVerdict {
	v := stockVerdict{
		expected: it.Quantity - it.Active - it.InFlight - it.Releasing,
		write:    max(it.Quantity-it.Active-it.InFlight, 0),
	}
	switch {
	case !loaded:
		v.diff = DiffStockNotLoaded
	case left != v.expected:
		v.diff = DiffStockMismatch
	}
	return v
}
