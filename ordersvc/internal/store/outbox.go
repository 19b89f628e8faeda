package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"flashsale/pkg/event"
)

// Release outcomes recorded on stock_release rows.
const (
	OutcomeReleased       = "released"         // the unit went back to Redis
	OutcomeNotHeld        = "not_held"         // the order held nothing in Redis (already released, or never reserved)
	OutcomeStockNotLoaded = "stock_not_loaded" // the stock key is missing; reconciliation from PostgreSQL decides
)

// ReasonRejectedSoldOut marks the outbox row of an order refused because
// PostgreSQL had no unit left: its holder is dropped, no unit returned.
const ReasonRejectedSoldOut = "REJECTED_SOLD_OUT"

// ReasonRejected marks the outbox row of an order the consumer refused for
// another reason (persist.go writes it).
const ReasonRejected = "REJECTED"

// PendingRelease is an outbox row whose unit has not been given back yet.
type PendingRelease struct {
	OrderID uuid.UUID
	SaleID  int64
	ItemID  int64
	UserID  string
	Reason  string
}

// NeverPlaced reports whether the row's order never came to exist as a
// live order: refused by the consumer, abandoned by the order service, or
// given up by its gateway. Its reservation bought nothing, so the
// admission token it spent goes back with the unit; an order that ended
// (expired, cancelled) used its admission.
func (p PendingRelease) NeverPlaced() bool {
	switch p.Reason {
	case ReasonRejected, ReasonRejectedSoldOut, ReasonAbandoned, event.RejectPublishFailed:
		return true
	}
	return false
}

// ReleaseFunc gives back the units of rows and returns one outcome per row;
// "" leaves that row pending for a later pass (e.g. Redis was unreachable).
type ReleaseFunc func(ctx context.Context, rows []PendingRelease) []string

// Cursor is a place in the outbox's order (oldest first); the zero Cursor
// is before every row.
type Cursor struct {
	CreatedAt time.Time
	OrderID   uuid.UUID
}

// DrainReleases claims up to limit pending outbox rows after the cursor
// after (only those of orderIDs when it is non-empty) with FOR UPDATE SKIP
// LOCKED, so several relays can run at once without handing a row out
// twice, calls release on them inside the transaction, and records the
// outcomes. It returns how many rows it claimed and how many it marked
// done, and the cursor of the last row it claimed, from which the next
// call goes on. A pass that goes on from there, instead of from the oldest
// row again, is not held by rows whose releases keep failing (a Redis node
// down for one sale's keys): every row gets its turn.
func (s *Store) DrainReleases(ctx context.Context, orderIDs []uuid.UUID, limit int, after Cursor, release ReleaseFunc) (claimed, done int, last Cursor, err error) {
	q, args := claimAll+" SKIP LOCKED", []any{limit, after.CreatedAt, after.OrderID}
	if len(orderIDs) > 0 {
		q, args = claimGiven+" SKIP LOCKED", []any{uuidArray(orderIDs), limit, after.CreatedAt, after.OrderID}
	}
	claimed, done, last, err = s.drain(ctx, 0, q, args, release)
	if err != nil {
		return 0, 0, after, err
	}
	if claimed == 0 {
		last = after
	}
	return claimed, done, last, nil
}

// ErrLockWait: DrainReleasesWaiting gave up on a row another pass held
// longer than it would wait; that pass, or the relay's next, releases it.
var ErrLockWait = errors.New("store: an outbox row stayed held by another pass")

// DrainReleasesWaiting is DrainReleases of the given orders (all of them in
// one claim: a few) that waits up to wait for rows another
// pass holds, instead of skipping them, and skips them only once that pass
// marked them done. It is for a caller that answers a shopper: a cancel
// promises its unit is back on sale when the answer arrives, and a skipped
// row would break that while the relay's pass held it. Background passes
// must not wait (one slow sale's releases would hold every caller and a
// connection each); they use DrainReleases. The wait cannot deadlock:
// every claim locks in the outbox's order, and the skipping passes never
// wait. ErrLockWait when the rows stayed held.
func (s *Store) DrainReleasesWaiting(ctx context.Context, orderIDs []uuid.UUID, wait time.Duration, release ReleaseFunc) (claimed, done int, err error) {
	if len(orderIDs) == 0 {
		return 0, 0, nil
	}
	args := []any{uuidArray(orderIDs), len(orderIDs), time.Time{}, uuid.Nil}
	claimed, done, _, err = s.drain(ctx, max(wait, time.Millisecond), claimGiven, args, release)
	return claimed, done, err
}

// The claims of DrainReleases and DrainReleasesWaiting, which add how a
// held row is met (SKIP LOCKED, or nothing: wait).
const (
	claimAll = `
		SELECT r.order_id, r.sale_id, r.item_id, r.user_id, r.reason, s.stock_shards, r.created_at
		FROM stock_release r LEFT JOIN flash_sale s ON s.id = r.sale_id
		WHERE r.released_at IS NULL AND (r.created_at, r.order_id) > ($2, $3)
		ORDER BY r.created_at, r.order_id
		LIMIT $1
		FOR UPDATE OF r`
	claimGiven = `
		SELECT r.order_id, r.sale_id, r.item_id, r.user_id, r.reason, s.stock_shards, r.created_at
		FROM stock_release r LEFT JOIN flash_sale s ON s.id = r.sale_id
		WHERE r.released_at IS NULL AND r.order_id = ANY($1::uuid[]) AND (r.created_at, r.order_id) > ($3, $4)
		ORDER BY r.created_at, r.order_id
		LIMIT $2
		FOR UPDATE OF r`
)

// drain runs one claim (query q over args), release and the marking in
// one transaction; lockWait > 0 bounds how long the claim waits for a
// held row (lock_timeout), for a claim that does not skip them.
func (s *Store) drain(ctx context.Context, lockWait time.Duration, q string, args []any, release ReleaseFunc) (claimed, done int, last Cursor, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if lockWait > 0 {
			if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", lockWait.Milliseconds())); err != nil {
				return fmt.Errorf("bound the claim's wait: %w", err)
			}
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		pending, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingRelease, error) {
			var p PendingRelease
			var shards *int
			err := r.Scan(&p.OrderID, &p.SaleID, &p.ItemID, &p.UserID, &p.Reason, &shards, &last.CreatedAt)
			if err == nil && shards != nil {
				// The release's stock calls read it (ShardsOf) without a
				// second connection of the pool.
				s.shards.Store(p.SaleID, *shards)
			}
			last.OrderID = p.OrderID
			return p, err
		})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		claimed = len(pending)
		if claimed == 0 {
			return nil
		}
		outcomes := release(ctx, pending)
		ids := make([]uuid.UUID, 0, len(pending))
		outs := make([]string, 0, len(pending))
		for i, p := range pending {
			if i < len(outcomes) && outcomes[i] != "" {
				ids = append(ids, p.OrderID)
				outs = append(outs, outcomes[i])
			}
		}
		done = len(ids)
		if done == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `
			UPDATE stock_release r SET released_at = now(), outcome = v.outcome
			FROM unnest($1::uuid[], $2::text[]) AS v(order_id, outcome)
			WHERE r.order_id = v.order_id`, uuidArray(ids), outs); err != nil {
			return fmt.Errorf("mark released: %w", err)
		}
		return nil
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: lock_timeout ran out
		return 0, 0, Cursor{}, fmt.Errorf("drain stock releases: %w (waited %v)", ErrLockWait, lockWait)
	case err != nil:
		return 0, 0, Cursor{}, fmt.Errorf("drain stock releases: %w", err)
	}
	return claimed, done, last, nil
}

// RequeueReleases makes the outbox rows of orderIDs in saleID pending
// again (those already marked), and returns the ids it requeued. A copy of
// the sale written into Redis from an earlier read of PostgreSQL (a
// reload, a repair) may hold a holder for an order that ended after the
// read; that order's release ran before the copy, found nothing, and was
// marked done. Requeued, the relay releases it again: keyed by order id,
// it frees the copy's holder, and is a no-op where there is none.
func (s *Store) RequeueReleases(ctx context.Context, saleID int64, orderIDs []uuid.UUID) ([]uuid.UUID, error) {
	if len(orderIDs) == 0 {
		return nil, nil
	}
	return collect(ctx, s.pool, fmt.Sprintf("requeue releases of sale %d", saleID), pgx.RowTo[uuid.UUID], `
		UPDATE stock_release SET released_at = NULL, outcome = NULL
		WHERE sale_id = $1 AND order_id = ANY($2::uuid[]) AND released_at IS NOT NULL
		RETURNING order_id`, saleID, uuidArray(orderIDs))
}
