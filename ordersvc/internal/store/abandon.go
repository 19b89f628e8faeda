package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flashsale/pkg/event"
)

// ReasonAbandoned marks the outbox row of a reservation no order backs:
// its unit goes back to Redis like an expired order's.
const ReasonAbandoned = "ABANDONED"

// Abandoned is a reservation Redis holds for an order that never reached
// the topic, with the item its reservation noted.
type Abandoned struct {
	OrderID  uuid.UUID
	SaleID   int64
	ItemID   int64
	UserID   string
	PlacedAt time.Time // the time in the UUIDv7 order id
}

// sqlAbandon writes each order REJECTED (event.RejectAbandoned) unless its
// id exists, and an outbox row for each one written, in one statement: the
// row takes the id, so a copy of the event arriving later is a duplicate
// the consumer ignores, and the relay returns the unit only after commit.
// The join keeps only items of the order's own sale (a wrong note must not
// return a unit to another sale); rows go in item order, the order in
// which the consumer locks items.
const sqlAbandon = `
	WITH written AS (
		INSERT INTO flash_sale_order
		  (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
		SELECT t.id, t.sale_id, t.item_id, t.user_id, 'REJECTED', t.placed_at, t.placed_at, now(), $6
		FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[])
		  AS t(id, sale_id, item_id, user_id, placed_at)
		JOIN flash_sale_item i ON i.id = t.item_id AND i.sale_id = t.sale_id
		ORDER BY t.item_id, t.id
		ON CONFLICT (id) DO NOTHING
		RETURNING id, sale_id, item_id, user_id
	)
	INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
	SELECT id, sale_id, item_id, user_id, $7 FROM written
	RETURNING order_id`

// Abandon writes the REJECTED rows and outbox rows of reservations no
// order backs, and returns the ids it wrote (an id already taken, by the
// order itself or an earlier pass, is left alone). The caller drains the
// outbox for them.
func (s *Store) Abandon(ctx context.Context, orders []Abandoned) ([]uuid.UUID, error) {
	if len(orders) == 0 {
		return nil, nil
	}
	n := len(orders)
	ids, sales, items := make([]uuid.UUID, n), make([]int64, n), make([]int64, n)
	users, placed := make([]string, n), make([]time.Time, n)
	for i, o := range orders {
		ids[i], sales[i], items[i], users[i], placed[i] = o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt
	}
	var written []uuid.UUID
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlShareItems, items); err != nil {
			return fmt.Errorf("lock items: %w", err)
		}
		rows, err := tx.Query(ctx, sqlAbandon, uuidArray(ids), sales, items, users, placed, event.RejectAbandoned, ReasonAbandoned)
		if err != nil {
			return err
		}
		written, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("abandon %d reservations: %w", n, err)
	}
	return written, nil
}

// sqlShareItems takes the items' rows FOR KEY SHARE, in id order, before
// Abandon inserts anything. The insert's foreign-key check takes the same
// lock, but only once the order id is in the primary key's index: a
// consumer batch holding the item FOR UPDATE and inserting the same id (an
// event later than the in-flight window) would wait on our uncommitted id
// while we waited on its item lock, until the deadlock detector aborted
// one. Locked first, the pass waits for the batch and then finds the id
// taken.
const sqlShareItems = `SELECT 1 FROM flash_sale_item WHERE id = ANY($1::bigint[]) ORDER BY id FOR KEY SHARE`
