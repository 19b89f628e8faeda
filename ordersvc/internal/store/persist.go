package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"flashsale/pkg/event"
)

// Kind is what became of one event of a batch.
type Kind int

const (
	// Accepted: a new PENDING order row.
	Accepted Kind = iota + 1
	// Rejected: a new, visible REJECTED row (Reason says why) whose unit goes
	// back to Redis through the stock_release outbox.
	Rejected
	// Duplicate: the order id was already stored, or appeared earlier in the
	// same batch. Status and Reason describe the stored row when it was read.
	Duplicate
	// Unpersistable: no row is possible (Reason ReasonUnknownItem); the
	// caller dead-letters the event and releases its reservation directly.
	Unpersistable
)

func (k Kind) String() string {
	switch k {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	case Duplicate:
		return "duplicate"
	case Unpersistable:
		return "unpersistable"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is the fate of one event of a batch.
type Outcome struct {
	Kind   Kind
	Status string // Duplicate: status of the stored row, "" when not read
	Reason string // Rejected, Unpersistable; Duplicate of a REJECTED row: its reason
}

// Redead reports whether a duplicate is a REJECTED row written by an earlier
// delivery, whose dead-letter message may have been lost in a crash between
// the commit and the produce; the caller dead-letters it again (the DLQ is
// at least once, keyed by the order-id header).
func (o Outcome) Redead() bool { return o.Kind == Duplicate && o.Status == StatusRejected }

const (
	// Locks the batch's items in id order, so concurrent consumers touching
	// the same items queue up instead of deadlocking.
	sqlLockItems = `
		SELECT i.id, i.sale_id, i.quantity - i.sold, (extract(epoch FROM s.payment_ttl) * 1000000)::bigint
		FROM flash_sale_item i JOIN flash_sale s ON s.id = i.sale_id
		WHERE i.id = ANY($1::bigint[])
		ORDER BY i.id
		FOR UPDATE OF i`
	sqlExisting = `
		SELECT id, status, coalesce(reject_reason, '')
		FROM flash_sale_order WHERE id = ANY($1::uuid[])`
	sqlActive = `
		SELECT o.sale_id, o.user_id
		FROM flash_sale_order o
		JOIN unnest($1::bigint[], $2::text[]) AS u(sale_id, user_id)
		  ON o.sale_id = u.sale_id AND o.user_id = u.user_id
		WHERE o.status IN ('PENDING', 'PAID')`
	// One statement writes the orders, bumps each item's sold counter once
	// (from the rows actually inserted, so a row lost to ON CONFLICT is not
	// counted) and queues the units of REJECTED rows for release. Foreign
	// keys are checked at the end of the statement, so stock_release may
	// reference rows inserted by its sibling.
	sqlInsert = `
		WITH input AS (
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[],
			                     $6::timestamptz[], $7::timestamptz[], $8::text[])
			  AS t(id, sale_id, item_id, user_id, status, created_at, expires_at, reject_reason)
		), ins AS (
			INSERT INTO flash_sale_order
			  (id, sale_id, item_id, user_id, status, created_at, expires_at, reject_reason, closed_at)
			SELECT id, sale_id, item_id, user_id, status, created_at, expires_at, nullif(reject_reason, ''),
			       CASE WHEN status = 'REJECTED' THEN now() END
			FROM input
			ON CONFLICT (id) DO NOTHING
			RETURNING id, sale_id, item_id, user_id, status, reject_reason
		), sold AS (
			UPDATE flash_sale_item i SET sold = i.sold + c.n
			FROM (SELECT item_id, count(*)::int AS n FROM ins WHERE status = 'PENDING' GROUP BY item_id) c
			WHERE i.id = c.item_id
		), outbox AS (
			INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
			SELECT id, sale_id, item_id, user_id,
			       CASE WHEN reject_reason = 'SOLD_OUT_IN_DB' THEN 'REJECTED_SOLD_OUT' ELSE 'REJECTED' END
			FROM ins WHERE status = 'REJECTED'
			ON CONFLICT (order_id) DO NOTHING
		)
		SELECT id FROM ins`
)

type lockedItem struct {
	saleID int64
	left   int64
	ttl    time.Duration
}

type saleUser struct {
	saleID int64
	userID string
}

type existingOrder struct {
	status, reason string
}

// PersistBatch turns a batch of events into order rows in one transaction
// and returns the outcome of each event, in input order. The hot item rows
// are locked and updated once per item per batch, not once per order;
// idempotency is by order id, guarded by the primary key (ON CONFLICT), not
// by the pre-check alone.
//
// Any error leaves the database untouched and the batch must be retried
// whole; ErrActiveConflict marks the one race a retry resolves.
func (s *Store) PersistBatch(ctx context.Context, events []event.OrderPlaced) ([]Outcome, error) {
	out := make([]Outcome, len(events))

	// a. Dedupe by order id; the first copy decides.
	firstOf := make(map[uuid.UUID]int, len(events))
	uniq := make([]int, 0, len(events))
	for i, e := range events {
		if _, dup := firstOf[e.OrderID]; dup {
			out[i] = Outcome{Kind: Duplicate}
			continue
		}
		firstOf[e.OrderID] = i
		uniq = append(uniq, i)
	}
	if len(uniq) == 0 {
		return out, nil
	}
	itemIDs := make([]int64, 0, 8)
	orderIDs := make([]uuid.UUID, 0, len(uniq))
	pairSales := make([]int64, 0, len(uniq))
	pairUsers := make([]string, 0, len(uniq))
	pairSeen := make(map[saleUser]bool, len(uniq))
	for _, i := range uniq {
		e := events[i]
		itemIDs = append(itemIDs, e.ItemID)
		orderIDs = append(orderIDs, e.OrderID)
		if k := (saleUser{e.SaleID, e.UserID}); !pairSeen[k] {
			pairSeen[k] = true
			pairSales = append(pairSales, e.SaleID)
			pairUsers = append(pairUsers, e.UserID)
		}
	}
	slices.Sort(itemIDs)
	itemIDs = slices.Compact(itemIDs)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("persist batch: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op; on failure the tx is gone anyway

	// b, c, d in one round trip. Under READ COMMITTED each statement takes
	// its snapshot when it starts, i.e. after the item locks are held, so
	// rows committed by a consumer that held those locks before us are seen.
	b := &pgx.Batch{}
	b.Queue(sqlLockItems, itemIDs)
	b.Queue(sqlExisting, orderIDs)
	b.Queue(sqlActive, pairSales, pairUsers)
	br := tx.SendBatch(ctx, b)
	items, existing, active, err := readPrechecks(br, len(itemIDs), len(uniq))
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("persist batch: %w", err)
	}

	// d, e. Decide in batch order; the user becomes active with the first
	// accepted order, so later ones in the batch are ALREADY_ACTIVE.
	var (
		ids        = make([]uuid.UUID, 0, len(uniq))
		sales      = make([]int64, 0, len(uniq))
		itemCol    = make([]int64, 0, len(uniq))
		users      = make([]string, 0, len(uniq))
		statuses   = make([]string, 0, len(uniq))
		createdAts = make([]time.Time, 0, len(uniq))
		expiresAts = make([]time.Time, 0, len(uniq))
		reasons    = make([]string, 0, len(uniq))
		planned    = make([]int, 0, len(uniq)) // event index per row
	)
	for _, i := range uniq {
		e := events[i]
		if ex, ok := existing[e.OrderID]; ok {
			out[i] = Outcome{Kind: Duplicate, Status: ex.status, Reason: ex.reason}
			continue
		}
		it, ok := items[e.ItemID]
		if !ok || it.saleID != e.SaleID {
			out[i] = Outcome{Kind: Unpersistable, Reason: ReasonUnknownItem}
			continue
		}
		k := saleUser{e.SaleID, e.UserID}
		status, reason, expires := StatusPending, "", e.PlacedAt.Add(it.ttl)
		switch {
		case active[k]:
			status, reason, expires = StatusRejected, ReasonAlreadyActive, e.PlacedAt
		case it.left <= 0:
			status, reason, expires = StatusRejected, ReasonSoldOutInDB, e.PlacedAt
		default:
			it.left--
			active[k] = true
		}
		if status == StatusPending {
			out[i] = Outcome{Kind: Accepted}
		} else {
			out[i] = Outcome{Kind: Rejected, Reason: reason}
		}
		ids = append(ids, e.OrderID)
		sales = append(sales, e.SaleID)
		itemCol = append(itemCol, e.ItemID)
		users = append(users, e.UserID)
		statuses = append(statuses, status)
		createdAts = append(createdAts, e.PlacedAt)
		expiresAts = append(expiresAts, expires)
		reasons = append(reasons, reason)
		planned = append(planned, i)
	}

	// f, g, h.
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, sqlInsert, ids, sales, itemCol, users, statuses, createdAts, expiresAts, reasons)
		if err != nil {
			return nil, fmt.Errorf("persist batch: insert: %w", err)
		}
		inserted, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "flash_sale_order_one_active" {
				return nil, fmt.Errorf("persist batch: insert: %w: %w", ErrActiveConflict, err)
			}
			return nil, fmt.Errorf("persist batch: insert: %w", err)
		}
		if len(inserted) != len(ids) {
			// Another writer stored some ids between our check and insert
			// (the item locks make this rare); those rows are theirs.
			got := make(map[uuid.UUID]bool, len(inserted))
			for _, id := range inserted {
				got[id] = true
			}
			for r, id := range ids {
				if !got[id] {
					out[planned[r]] = Outcome{Kind: Duplicate}
				}
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("persist batch: commit: %w", err)
	}
	return out, nil
}

func readPrechecks(br pgx.BatchResults, nItems, nOrders int) (map[int64]*lockedItem, map[uuid.UUID]existingOrder, map[saleUser]bool, error) {
	items := make(map[int64]*lockedItem, nItems)
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lock items: %w", err)
	}
	for rows.Next() {
		var id, micros int64
		it := &lockedItem{}
		if err := rows.Scan(&id, &it.saleID, &it.left, &micros); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("lock items: %w", err)
		}
		it.ttl = time.Duration(micros) * time.Microsecond
		items[id] = it
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("lock items: %w", err)
	}

	existing := map[uuid.UUID]existingOrder{}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("find existing orders: %w", err)
	}
	for rows.Next() {
		var id uuid.UUID
		var ex existingOrder
		if err := rows.Scan(&id, &ex.status, &ex.reason); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("find existing orders: %w", err)
		}
		existing[id] = ex
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("find existing orders: %w", err)
	}

	active := make(map[saleUser]bool, nOrders)
	rows, err = br.Query()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("find active users: %w", err)
	}
	for rows.Next() {
		var k saleUser
		if err := rows.Scan(&k.saleID, &k.userID); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("find active users: %w", err)
		}
		active[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("find active users: %w", err)
	}
	return items, existing, active, nil
}
