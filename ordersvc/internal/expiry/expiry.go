// Package expiry ends PENDING orders whose payment window has closed and
// puts their units back on sale: EXPIRED, sold decremented and an outbox row
// in one PostgreSQL transaction, then the Redis release through the relay,
// only after that commit. A crash in between leaves the outbox row, which
// any relay drains later; the release is keyed by order id, so a unit goes
// back once. Any number of sweepers may run at once (see store.ExpireDue).
package expiry

import (
	"context"
	"log/slog"
	"time"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
)

// batchTimeout bounds one batch. A batch is not cut short by shutdown: it
// is one short transaction plus its releases, and finishing it is cheaper
// than leaving the releases to the next start.
const batchTimeout = 10 * time.Second

// Sweeper expires due orders.
type Sweeper struct {
	store   *store.Store
	relay   *relay.Relay
	log     *slog.Logger
	metrics *metrics.Counters
	batch   int
}

// New builds a sweeper that expires up to batch orders per transaction.
func New(st *store.Store, rl *relay.Relay, log *slog.Logger, m *metrics.Counters, batch int) *Sweeper {
	return &Sweeper{store: st, relay: rl, log: log, metrics: m, batch: max(batch, 1)}
}

// Sweep expires every due order, batch by batch, releasing each batch's
// units after its commit, and returns how many orders it expired. It
// stops between batches when ctx ends. A failed release is left to the
// relay's next pass (the outbox rows are committed) and is not an error.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := s.sweepBatch(context.WithoutCancel(ctx))
		total += n
		if err != nil || n < s.batch {
			return total, err
		}
	}
	return total, nil
}

func (s *Sweeper) sweepBatch(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	res, err := s.store.ExpireDue(ctx, s.batch)
	if err != nil {
		return 0, err
	}
	if len(res.SoldDrift) > 0 {
		s.log.Error("sold counter below active orders, clamped at 0; reconcile the sale and find the cause",
			"items", res.SoldDrift)
	}
	ids := res.IDs
	if len(ids) == 0 {
		return 0, nil
	}
	s.metrics.OrdersExpired.Add(float64(len(ids)))
	if _, err := s.relay.Drain(ctx, ids); err != nil {
		s.log.Warn("release of expired orders deferred to the relay", "count", len(ids), "err", err)
	}
	return len(ids), nil
}

// Run sweeps every interval until ctx ends. Failures are logged and the
// next pass retries: nothing was committed by a failed transaction.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil {
			s.log.Warn("expiry pass failed; retrying at the next one", "err", err)
		} else if n > 0 {
			s.log.Debug("orders expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
