// Package deadline hands out contexts whose deadline many calls share.
//
// context.WithTimeout costs an allocation of a context, a runtime timer
// started and, at cancel, stopped again: 5 % of the gateway's Go samples
// in a selling demo, for the two Redis calls of every accepted purchase.
// A purchase needs its Redis call bounded, not a timer of its own: calls
// that begin within a few milliseconds of each other can share one
// deadline. Shared hands out one context for every call that begins
// within its slack of the first, so a call's deadline is its timeout less
// at most the slack (and never more than the timeout plus the slack, for a
// call whose clock reading is older than the context's). A shared context
// is never cancelled early: its own deadline releases it.
package deadline

import (
	"context"
	"sync/atomic"
	"time"
)

// Shared is a source of contexts ending timeout after their first call,
// shared by the calls of the same parent within slack of it. The zero
// value is not usable; see New.
type Shared struct {
	timeout time.Duration
	slack   time.Duration
	cur     atomic.Pointer[shared]
}

type shared struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc // kept, never called: the deadline releases the context
	from   time.Time
}

// New returns a Shared for contexts ending timeout after their call, to
// within slack.
func New(timeout, slack time.Duration) *Shared {
	return &Shared{timeout: timeout, slack: slack}
}

// At returns a context of parent that ends about s's timeout after now
// (the caller's reading of the clock as its call begins). Calls of one
// parent share it; a call of another parent gets one of its own, which
// the calls of that parent then share. Parents are compared with ==, so
// their dynamic types must be comparable (every context of package
// context is). Callers must not cancel the context.
func (s *Shared) At(parent context.Context, now time.Time) context.Context {
	cur := s.cur.Load()
	if cur != nil && cur.parent == parent {
		if d := now.Sub(cur.from); d >= -s.slack && d < s.slack {
			return cur.ctx
		}
	}
	ctx, cancel := context.WithDeadline(parent, now.Add(s.timeout))
	// Losing the swap to a call minting at the same moment leaves both
	// contexts good; the one stored serves the calls that follow.
	s.cur.CompareAndSwap(cur, &shared{parent: parent, ctx: ctx, cancel: cancel, from: now})
	return ctx
}
