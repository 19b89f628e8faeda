package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RefusedPayment is a signed payment confirmation the service refused for
// good: the provider took the money and the order will not be paid, so it
// is to be refunded, or honoured by hand, and then marked settled.
type RefusedPayment struct {
	PaymentRef string     `json:"paymentRef"`
	OrderID    uuid.UUID  `json:"orderId"`
	Code       string     `json:"code"` // the refusal's error code (ORDER_EXPIRED, ...)
	RefusedAt  time.Time  `json:"refusedAt"`
	LastAt     time.Time  `json:"lastAt"`   // the latest confirmation of it refused
	Attempts   int        `json:"attempts"` // confirmations of it refused
	SettledAt  *time.Time `json:"settledAt,omitempty"`
}

const refusedColumns = `payment_ref, order_id, code, refused_at, last_at, attempts, settled_at`

// RecordRefusedPayment keeps a refused confirmation; the same reference
// again counts one more attempt and keeps the first refusal's order, code
// and time.
func (s *Store) RecordRefusedPayment(ctx context.Context, ref string, orderID uuid.UUID, code string) (RefusedPayment, error) {
	rows, err := s.pool.Query(ctx, `
		INSERT INTO payment_refused (payment_ref, order_id, code) VALUES ($1, $2, $3)
		ON CONFLICT (payment_ref) DO UPDATE SET attempts = payment_refused.attempts + 1, last_at = now()
		RETURNING `+refusedColumns, ref, orderID, code)
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("record refused payment %q: %w", ref, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RefusedPayment])
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("record refused payment %q: %w", ref, err)
	}
	return p, nil
}

// RefusedPayments lists refused confirmations, oldest first, at most
// limit: the unsettled ones, or every one with all.
func (s *Store) RefusedPayments(ctx context.Context, all bool, limit int) ([]RefusedPayment, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+refusedColumns+` FROM payment_refused
		WHERE $1 OR settled_at IS NULL ORDER BY refused_at, payment_ref LIMIT $2`, all, limit)
	if err != nil {
		return nil, fmt.Errorf("list refused payments: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RefusedPayment])
	if err != nil {
		return nil, fmt.Errorf("list refused payments: %w", err)
	}
	return out, nil
}

// SettleRefusedPayment marks a refused confirmation settled (refunded or
// honoured); settling it again changes nothing. ErrNotFound when no
// confirmation under ref was refused.
func (s *Store) SettleRefusedPayment(ctx context.Context, ref string) (RefusedPayment, error) {
	rows, err := s.pool.Query(ctx, `UPDATE payment_refused SET settled_at = coalesce(settled_at, now())
		WHERE payment_ref = $1 RETURNING `+refusedColumns, ref)
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("settle refused payment %q: %w", ref, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RefusedPayment])
	if errors.Is(err, pgx.ErrNoRows) {
		return RefusedPayment{}, fmt.Errorf("settle refused payment %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("settle refused payment %q: %w", ref, err)
	}
	return p, nil
}

// UnsettledRefusedPayments counts the refused confirmations not marked
// settled: refunds still to make.
func (s *Store) UnsettledRefusedPayments(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM payment_refused WHERE settled_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unsettled refused payments: %w", err)
	}
	return n, nil
}
