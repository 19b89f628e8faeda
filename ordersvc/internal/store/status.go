package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statuses lists every order status, in lifecycle order.
var Statuses = []string{StatusPending, StatusPaid, StatusExpired, StatusCancelled, StatusRejected}

// ItemStatusCounts is one item's orders by status; a status with no order
// is absent.
type ItemStatusCounts struct {
	ItemID int64
	Counts map[string]int64
}

// OrdersByStatus counts a sale's orders by item and status in one query.
// The count reads the sale's orders through the (sale_id) index
// (flash_sale_order_sale; a join on item_id alone let the planner
// hash-join a sequential scan of every sale's orders): 29 ms for a sale of
// 100,000 orders on the development database. The (item_id, status) index
// it used before cost every order an index insert (migration 0008). Items
// without orders are listed with no counts; ErrNotFound for no sale.
func (s *Store) OrdersByStatus(ctx context.Context, saleID int64) ([]ItemStatusCounts, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT i.id, c.status, coalesce(c.n, 0)
		FROM flash_sale_item i
		LEFT JOIN (
			SELECT o.item_id, o.status, count(*) AS n FROM flash_sale_order o
			WHERE o.sale_id = $1 GROUP BY o.item_id, o.status
		) c ON c.item_id = i.id
		WHERE i.sale_id = $1
		ORDER BY i.id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("count orders of sale %d by status: %w", saleID, err)
	}
	var (
		out    []ItemStatusCounts
		itemID int64
		status *string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&itemID, &status, &n}, func() error {
		if len(out) == 0 || out[len(out)-1].ItemID != itemID {
			out = append(out, ItemStatusCounts{ItemID: itemID, Counts: map[string]int64{}})
		}
		if status != nil {
			out[len(out)-1].Counts[*status] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count orders of sale %d by status: %w", saleID, err)
	}
	if len(out) == 0 {
		// Every sale has items (Validate), so no row means no sale; a
		// second query only on this path tells the two apart.
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flash_sale WHERE id = $1)`, saleID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("read sale %d: %w", saleID, err)
		}
		if !exists {
			return nil, fmt.Errorf("count orders of sale %d: %w", saleID, ErrNotFound)
		}
	}
	return out, nil
}

// OpenSales lists the sales open at now (started and not ended), newest
// first (the ones an operator is watching, checked first).
func (s *Store) OpenSales(ctx context.Context, now time.Time) ([]int64, error) {
	return collect(ctx, s.pool, "list open sales", pgx.RowTo[int64],
		`SELECT id FROM flash_sale WHERE starts_at <= $1 AND ends_at > $1 ORDER BY id DESC`, now)
}

// SalesInPlay lists, newest first, the sales that opened at least
// openedFor before now and ended less than their payment window plus
// inFlight before it: those whose holders in Redis may still change (an
// order placed at the end is in Kafka for at most the in-flight window and
// ends at most a payment window later). That is the cut-off after which
// HotCopyExpiries, given the same in-flight window, lists the sale for its
// copy's expiry.
func (s *Store) SalesInPlay(ctx context.Context, now time.Time, openedFor, inFlight time.Duration) ([]int64, error) {
	return collect(ctx, s.pool, "list sales in play", pgx.RowTo[int64], `
		SELECT id FROM flash_sale
		WHERE starts_at <= $1 AND ends_at + payment_ttl + $3::bigint * interval '1 microsecond' > $2
		ORDER BY id DESC`, now.Add(-openedFor), now, inFlight.Microseconds())
}

// ClockSkew is how far now is ahead of PostgreSQL's clock
// (clock_timestamp()), behind when negative, from one query: the local
// clock halfway through the round trip against the server's answer. Half
// the round trip is how far off the figure may be; it is returned with it.
// PostgreSQL's clock ends the payment windows, which start at the
// gateways' clocks (placedAt).
func (s *Store) ClockSkew(ctx context.Context, now func() time.Time) (skew, within time.Duration, err error) {
	sent := now()
	var server time.Time
	err = s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server)
	rtt := now().Sub(sent)
	if err != nil {
		return 0, 0, fmt.Errorf("read postgres clock: %w", err)
	}
	return sent.Add(rtt / 2).Sub(server), rtt / 2, nil
}

// SalesNotEnded lists the sales whose end is after now: open, or yet to
// open.
func (s *Store) SalesNotEnded(ctx context.Context, now time.Time) ([]int64, error) {
	return collect(ctx, s.pool, "list sales not ended", pgx.RowTo[int64], `SELECT id FROM flash_sale WHERE ends_at > $1`, now)
}

// HotCopyExpiry is when a sale's copy in Redis may go, and its items.
type HotCopyExpiry struct {
	SaleID int64
	Items  []int64
	At     time.Time
}

// HotCopyExpiries lists the sales whose copy in Redis may go after since,
// with the time it may: after the sale's end, its payment window (the
// last order it accepted can end no later) and after besides. Only sales
// whose payment window closed by settled are listed: a live sale's keys
// get no expiry, which a Redis evicting keys with one (a volatile-*
// maxmemory-policy) could act on mid-sale.
func (s *Store) HotCopyExpiries(ctx context.Context, since, settled time.Time, after time.Duration) ([]HotCopyExpiry, error) {
	scan := func(r pgx.CollectableRow) (HotCopyExpiry, error) {
		var e HotCopyExpiry
		err := r.Scan(&e.SaleID, &e.At, &e.Items)
		return e, err
	}
	return collect(ctx, s.pool, "list sales' hot copy expiries", scan, `
		SELECT s.id, s.ends_at + s.payment_ttl + $2::bigint * interval '1 microsecond', array_agg(i.id ORDER BY i.id)
		FROM flash_sale s JOIN flash_sale_item i ON i.sale_id = s.id
		WHERE s.ends_at + s.payment_ttl + $2::bigint * interval '1 microsecond' > $1
		  AND s.ends_at + s.payment_ttl <= $3
		GROUP BY s.id ORDER BY s.id`, since, after.Microseconds(), settled)
}
