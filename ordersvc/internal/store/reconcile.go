package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ItemCount is an item's quantity and the units its active orders hold.
type ItemCount struct {
	ItemID   int64
	Quantity int64
	Active   int64
}

// HeldOrder is an order and the unit it holds or held: active orders of a
// sale, or the orders Redis holders name.
type HeldOrder struct {
	OrderID uuid.UUID
	UserID  string
	ItemID  int64
	Status  string
	// ReleasePending: the order ended and its stock_release row has not
	// been drained yet, so Redis still rightly holds its unit for a moment.
	ReleasePending bool
}

// ActiveState is what PostgreSQL says a sale's Redis copy must reflect.
type ActiveState struct {
	Items  []ItemCount
	Active []HeldOrder // PENDING and PAID orders
}

// ActiveState reads a sale's items and active orders in one REPEATABLE READ
// snapshot, so the counts and the list agree; ErrNotFound for no sale.
func (s *Store) ActiveState(ctx context.Context, saleID int64) (ActiveState, error) {
	var st ActiveState
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		st.Items, err = collect(ctx, tx, "count active orders", pgx.RowToStructByPos[ItemCount], `
			SELECT i.id, i.quantity, count(o.id)
			FROM flash_sale_item i
			LEFT JOIN flash_sale_order o ON o.sale_id = i.sale_id AND o.item_id = i.id AND o.status IN ('PENDING', 'PAID')
			WHERE i.sale_id = $1
			GROUP BY i.id ORDER BY i.id`, saleID)
		if err != nil {
			return err
		}
		if len(st.Items) == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flash_sale WHERE id = $1)`, saleID).Scan(&exists); err != nil {
				return fmt.Errorf("read sale: %w", err)
			}
			if !exists {
				return ErrNotFound
			}
		}
		st.Active, err = collect(ctx, tx, "read active orders", func(r pgx.CollectableRow) (HeldOrder, error) {
			var h HeldOrder
			err := r.Scan(&h.OrderID, &h.UserID, &h.ItemID, &h.Status)
			return h, err
		}, `
			SELECT id, user_id, item_id, status FROM flash_sale_order
			WHERE sale_id = $1 AND status IN ('PENDING', 'PAID')`, saleID)
		return err
	})
	if err != nil {
		return ActiveState{}, fmt.Errorf("active state of sale %d: %w", saleID, err)
	}
	return st, nil
}

// OrdersAmong returns which of ids have an order row in saleID, whatever
// its status. With many ids, most of a sale's holders (an order service's
// first pass after a start), it reads the sale's order ids once through
// the sale's index and keeps those asked about: for 10,000 ids 0.9 ms and
// 159 buffers, where a primary-key probe per id (HeldOrders) took 20 ms
// and 60,000 buffers, and shipped every id as a parameter. With few it
// probes by id, which does not read the rest of the sale.
func (s *Store) OrdersAmong(ctx context.Context, saleID int64, ids []uuid.UUID, saleScan bool) (map[uuid.UUID]struct{}, error) {
	out := make(map[uuid.UUID]struct{}, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	query, args := `SELECT id FROM flash_sale_order WHERE id = ANY($1::uuid[]) AND sale_id = $2`, []any{uuidArray(ids), saleID}
	var asked map[uuid.UUID]struct{} // nil: every row read was asked about
	if saleScan {
		query, args = `SELECT id FROM flash_sale_order WHERE sale_id = $1`, []any{saleID}
		asked = make(map[uuid.UUID]struct{}, len(ids))
		for _, id := range ids {
			asked[id] = struct{}{}
		}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("look up %d orders of sale %d: %w", len(ids), saleID, err)
	}
	var id uuid.UUID
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		if _, ok := asked[id]; ok || asked == nil {
			out[id] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up %d orders of sale %d: %w", len(ids), saleID, err)
	}
	return out, nil
}

// HeldOrders reads the orders of ids that belong to saleID, with whether
// their unit's release is still queued. Ids with no row are absent.
func (s *Store) HeldOrders(ctx context.Context, saleID int64, ids []uuid.UUID) (map[uuid.UUID]HeldOrder, error) {
	out := make(map[uuid.UUID]HeldOrder, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT o.id, o.user_id, o.item_id, o.status, r.order_id IS NOT NULL AND r.released_at IS NULL
		FROM flash_sale_order o LEFT JOIN stock_release r ON r.order_id = o.id
		WHERE o.id = ANY($1::uuid[]) AND o.sale_id = $2`, uuidArray(ids), saleID)
	if err != nil {
		return nil, fmt.Errorf("read held orders of sale %d: %w", saleID, err)
	}
	var h HeldOrder
	_, err = pgx.ForEachRow(rows, []any{&h.OrderID, &h.UserID, &h.ItemID, &h.Status, &h.ReleasePending}, func() error {
		out[h.OrderID] = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read held orders of sale %d: %w", saleID, err)
	}
	return out, nil
}
