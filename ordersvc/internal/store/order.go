package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Order is a stored order.
type Order struct {
	ID           uuid.UUID
	SaleID       int64
	ItemID       int64
	UserID       string
	Status       string
	CreatedAt    time.Time
	ExpiresAt    time.Time
	PaidAt       *time.Time
	PaymentRef   string
	ClosedAt     *time.Time
	RejectReason string
}

// orderColumns are the columns scanOrder reads, in its order.
const orderColumns = `id, sale_id, item_id, user_id, status, created_at, expires_at, paid_at,
	coalesce(payment_ref, ''), closed_at, coalesce(reject_reason, '')`

// scanOrder reads orderColumns, then any extra columns into extra.
func scanOrder(row pgx.Row, extra ...any) (Order, error) {
	var o Order
	dest := append([]any{&o.ID, &o.SaleID, &o.ItemID, &o.UserID, &o.Status, &o.CreatedAt, &o.ExpiresAt, &o.PaidAt,
		&o.PaymentRef, &o.ClosedAt, &o.RejectReason}, extra...)
	err := row.Scan(dest...)
	return o, err
}

// GetOrder reads one order; ErrNotFound when there is none.
func (s *Store) GetOrder(ctx context.Context, id uuid.UUID) (Order, error) {
	o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM flash_sale_order WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	return o, nil
}
