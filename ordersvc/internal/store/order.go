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
	ClosedAt     *time.Time
	RejectReason string
}

// GetOrder reads one order; ErrNotFound when there is none.
func (s *Store) GetOrder(ctx context.Context, id uuid.UUID) (Order, error) {
	o := Order{ID: id}
	var reason *string
	err := s.pool.QueryRow(ctx, `
		SELECT sale_id, item_id, user_id, status, created_at, expires_at, paid_at, closed_at, reject_reason
		FROM flash_sale_order WHERE id = $1`, id,
	).Scan(&o.SaleID, &o.ItemID, &o.UserID, &o.Status, &o.CreatedAt, &o.ExpiresAt, &o.PaidAt, &o.ClosedAt, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	if reason != nil {
		o.RejectReason = *reason
	}
	return o, nil
}
