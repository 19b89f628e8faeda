package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

// PendingRelease is an outbox row whose unit has not been given back yet.
type PendingRelease struct {
	OrderID uuid.UUID
	SaleID  int64
	ItemID  int64
	UserID  string
	Reason  string
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
// after (only those of orderIDs when it is non-empty), calls release on
// them inside the transaction, and records the outcomes. A pass over the
// whole outbox claims with FOR UPDATE SKIP LOCKED, so several relays run at
// once without handing a row out twice. A claim of given orders waits
// instead for a row another pass holds, and skips it once that pass marked
// it done: a caller that returns the unit of the order it just ended (a
// cancel, whose shopper buys again as soon as the answer arrives) finds it
// returned, by itself or by the other pass, unless the release failed.
// The waits cannot deadlock: every claim locks in the outbox's order, and
// the whole-outbox passes never wait. It returns how many rows it claimed and how many it marked
// done, and the cursor of the last row it claimed, from which the next
// call goes on. A pass that goes on from there, instead of from the oldest
// row again, is not held by rows whose releases keep failing (a Redis node
// down for one sale's keys): every row gets its turn.
func (s *Store) DrainReleases(ctx context.Context, orderIDs []uuid.UUID, limit int, after Cursor, release ReleaseFunc) (claimed, done int, last Cursor, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if len(orderIDs) > 0 {
			rows, err = tx.Query(ctx, `
				SELECT r.order_id, r.sale_id, r.item_id, r.user_id, r.reason, s.stock_shards, r.created_at
				FROM stock_release r LEFT JOIN flash_sale s ON s.id = r.sale_id
				WHERE r.released_at IS NULL AND r.order_id = ANY($1::uuid[]) AND (r.created_at, r.order_id) > ($3, $4)
				ORDER BY r.created_at, r.order_id
				LIMIT $2
				FOR UPDATE OF r`, uuidArray(orderIDs), limit, after.CreatedAt, after.OrderID)
		} else {
			rows, err = tx.Query(ctx, `
				SELECT r.order_id, r.sale_id, r.item_id, r.user_id, r.reason, s.stock_shards, r.created_at
				FROM stock_release r LEFT JOIN flash_sale s ON s.id = r.sale_id
				WHERE r.released_at IS NULL AND (r.created_at, r.order_id) > ($2, $3)
				ORDER BY r.created_at, r.order_id
				LIMIT $1
				FOR UPDATE OF r SKIP LOCKED`, limit, after.CreatedAt, after.OrderID)
		}
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
	if err != nil {
		return 0, 0, after, fmt.Errorf("drain stock releases: %w", err)
	}
	if claimed == 0 {
		last = after
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
	rows, err := s.pool.Query(ctx, `
		UPDATE stock_release SET released_at = NULL, outcome = NULL
		WHERE sale_id = $1 AND order_id = ANY($2::uuid[]) AND released_at IS NOT NULL
		RETURNING order_id`, saleID, uuidArray(orderIDs))
	if err != nil {
		return nil, fmt.Errorf("requeue releases of sale %d: %w", saleID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("requeue releases of sale %d: %w", saleID, err)
	}
	return ids, nil
}
