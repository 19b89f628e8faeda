package lag

import (
	"context"
	"sync"
	"time"
)

// Reading is one periodic reading of the lag.
type Reading struct {
	Lag Lag
	Err error     // why this reading failed; Lag is then the zero value
	At  time.Time // zero: nothing read yet
}

// Tracker reads the lag periodically and keeps the last reading, so that
// /metrics scrapes and status requests never wait on the brokers.
type Tracker struct {
	reader  *Reader
	observe func(Reading)

	mu   sync.Mutex
	last Reading
}

// NewTracker tracks r; observe (may be nil) sees every reading, e.g. to
// export it as metrics.
func NewTracker(r *Reader, observe func(Reading)) *Tracker {
	return &Tracker{reader: r, observe: observe}
}

// Run reads the lag now and then every interval until ctx ends.
func (t *Tracker) Run(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		t.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Refresh takes one reading now.
func (t *Tracker) Refresh(ctx context.Context) Reading {
	l, err := t.reader.Lag(ctx)
	rd := Reading{Lag: l, Err: err, At: time.Now()}
	if ctx.Err() != nil && err != nil {
		return rd // shutting down: keep the last real reading
	}
	t.mu.Lock()
	t.last = rd
	t.mu.Unlock()
	if t.observe != nil {
		t.observe(rd)
	}
	return rd
}

// Last is the last reading (At is zero before the first).
func (t *Tracker) Last() Reading {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
