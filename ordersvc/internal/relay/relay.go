// Package relay gives units back to Redis from the stock_release outbox.
// Rows are written in the same transaction that ends an order (rejection,
// expiry, cancel) and drained here only after commit, so a crash in between
// is repaired by the next pass and a unit is returned once: the release
// script is keyed by order id.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/stock"
)

// BatchLimit is how many outbox rows one transaction claims.
const BatchLimit = 500

// batchTimeout bounds one batch: its claim, its releases and its commit.
const batchTimeout = 10 * time.Second

// releaseParallelism bounds concurrent release scripts; rueidis pipelines
// concurrent calls on one connection, so this is a pipeline depth.
const releaseParallelism = 32

// Relay drains the outbox. Several may run at once, in one process or many.
type Relay struct {
	store   *store.Store
	stock   *stock.Store
	log     *slog.Logger
	metrics *metrics.Counters
	kick    chan struct{}
	// background counts ReleaseNow's releases still running after their
	// callers answered (Wait).
	background sync.WaitGroup
}

// New builds a relay.
func New(st *store.Store, stk *stock.Store, log *slog.Logger, m *metrics.Counters) *Relay {
	return &Relay{store: st, stock: stk, log: log, metrics: m, kick: make(chan struct{}, 1)}
}

// Kick asks Run for a pass now, without waiting for it.
func (r *Relay) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run drains the outbox every interval and on Kick until ctx ends. Failures
// are logged and retried at the next pass: the rows stay in the outbox.
func (r *Relay) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.Drain(ctx, nil); err != nil && ctx.Err() == nil {
			r.log.Warn("stock release pass failed; rows stay queued", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.kick:
		}
	}
}

// Drain releases pending outbox rows (only those of orderIDs when given),
// oldest first, once each, and returns how many it marked. A row whose
// release fails stays queued for the next pass, and the pass goes on past
// it: a block of failing rows (a Redis node down for one sale's keys) must
// not hold back the releases of every other sale.
//
// A batch begun is finished even when ctx ends meanwhile (a shutdown),
// within batchTimeout: ended between its releases in Redis and its commit,
// its rows stayed queued with their units already back, and the next pass
// marked them not_held.
func (r *Relay) Drain(ctx context.Context, orderIDs []uuid.UUID) (int, error) {
	total, failed := 0, 0
	var after store.Cursor
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		claimed, done, last, err := r.store.DrainReleases(bctx, orderIDs, BatchLimit, after, r.release)
		cancel()
		total += done
		failed += claimed - done
		r.metrics.Releases.Add(float64(done))
		if err != nil {
			return total, err
		}
		if claimed < BatchLimit {
			if failed > 0 {
				return total, fmt.Errorf("relay: %d releases failed; they stay queued", failed)
			}
			return total, nil
		}
		after = last
	}
}

// ReleaseNow releases the outbox rows of a few orders now, for a caller
// that answers a shopper when it returns (a cancel: her unit is back on
// sale by then). Unlike Drain it waits, up to wait, for a row the relay's
// pass holds at that moment, instead of skipping it: that pass may be
// failing it. A row still held after wait (store.ErrLockWait), or whose
// release failed, is left to the relay's next pass, and the error says so.
//
// It returns by ctx's deadline, which the caller sizes to its answer: a
// release still running then (Redis slow to answer) goes on in the
// background and finishes its batch, within wait and batchTimeout, and the
// error says so. Before, the caller waited for it: a cancel with Redis
// slow held its answer up to 10 s, past the gateway's proxy's 3 s, and the
// shopper was told of a failure although her order was cancelled.
func (r *Relay) ReleaseNow(ctx context.Context, orderIDs []uuid.UUID, wait time.Duration) (int, error) {
	type result struct {
		done int
		err  error
	}
	out := make(chan result, 1)
	r.background.Go(func() {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+batchTimeout)
		defer cancel()
		claimed, done, err := r.store.DrainReleasesWaiting(bctx, orderIDs, wait, r.release)
		r.metrics.Releases.Add(float64(done))
		if err == nil && claimed > done {
			err = fmt.Errorf("relay: %d releases failed; they stay queued", claimed-done)
		}
		out <- result{done, err}
	})
	select {
	case res := <-out:
		return res.done, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("relay: release still running at the caller's deadline; it goes on in the background: %w", ctx.Err())
	}
}

// Wait waits, until ctx ends, for the releases ReleaseNow left running in
// the background, so that a shutdown closes Redis and the pool after them
// (a release cut between Redis and its commit leaves a row whose unit is
// back; the next start marks it not_held).
func (r *Relay) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		r.background.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("relay: releases still running at shutdown: %w", ctx.Err())
	}
}

// release runs the release script for each row; "" leaves a row queued.
func (r *Relay) release(ctx context.Context, rows []store.PendingRelease) []string {
	out := make([]string, len(rows))
	var g errgroup.Group
	g.SetLimit(releaseParallelism)
	for i, p := range rows {
		g.Go(func() error {
			give := r.stock.Release // an order that ended used its admission
			switch {
			case p.Reason == store.ReasonRejectedSoldOut:
				// PostgreSQL had no unit for it: free the shopper, add no
				// stock, give her admission back.
				give = r.stock.Drop
			case p.NeverPlaced():
				give = r.stock.WriteOff // unit and admission back
			}
			ok, err := give(ctx, p.SaleID, p.ItemID, p.UserID, p.OrderID.String())
			switch {
			case errors.Is(err, stock.ErrPaused):
				// Left queued for the next pass. A repair of a sharded sale
				// took the stock away for a moment, and its copy keeps this
				// order's holder: marked done now, the release would be lost
				// (the shopper blocked, her unit with her).
			case errors.Is(err, stock.ErrNotLoaded):
				out[i] = store.OutcomeStockNotLoaded
			case err != nil:
				r.log.Debug("stock release failed", "order", p.OrderID, "err", err)
			case ok:
				out[i] = store.OutcomeReleased
			default:
				out[i] = store.OutcomeNotHeld
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through out, never an error
	return out
}
