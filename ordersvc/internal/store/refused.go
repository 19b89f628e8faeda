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
// is to be refunded, or honoured by hand, and then settled.
type RefusedPayment struct {
	PaymentRef string     `json:"paymentRef"`
	OrderID    uuid.UUID  `json:"orderId"`
	Code       string     `json:"code"` // the refusal's error code (ORDER_EXPIRED, ...)
	RefusedAt  time.Time  `json:"refusedAt"`
	LastAt     time.Time  `json:"lastAt"`   // the latest confirmation of it refused
	Attempts   int        `json:"attempts"` // confirmations of it refused
	SettledAt  *time.Time `json:"settledAt,omitempty"`
	Resolution *string    `json:"resolution,omitempty"` // a Resolution, once settled
}

// How a refused payment was settled.
const (
	ResolutionRefunded = "refunded" // an operator gave the money back
	ResolutionHonoured = "honoured" // an operator honoured the order by hand
	ResolutionPaid     = "paid"     // the same confirmation was accepted later
)

// ValidResolution reports whether an operator may settle with r.
func ValidResolution(r string) bool { return r == ResolutionRefunded || r == ResolutionHonoured }

const refusedColumns = `payment_ref, order_id, code, refused_at, last_at, attempts, settled_at, resolution`

// RecordRefusedPayment keeps a refused confirmation of order id under ref;
// the same pair again counts one more attempt and keeps the first
// refusal's code and time.
func (s *Store) RecordRefusedPayment(ctx context.Context, ref string, orderID uuid.UUID, code string) (RefusedPayment, error) {
	return s.oneRefused(ctx, "record refused payment", `
		INSERT INTO payment_refused (payment_ref, order_id, code) VALUES ($1, $2, $3)
		ON CONFLICT (payment_ref, order_id) DO UPDATE SET attempts = payment_refused.attempts + 1, last_at = now()
		RETURNING `+refusedColumns, ref, orderID, code)
}

// RefusedPayments lists refused confirmations, oldest first, at most
// limit: the unsettled ones, or every one with all.
func (s *Store) RefusedPayments(ctx context.Context, all bool, limit int) ([]RefusedPayment, error) {
	return collect(ctx, s.pool, "list refused payments", pgx.RowToStructByPos[RefusedPayment], `SELECT `+refusedColumns+` FROM payment_refused
		WHERE $1 OR settled_at IS NULL ORDER BY refused_at, payment_ref, order_id LIMIT $2`, all, limit)
}

// SettleRefusedPayment settles the refused confirmation of order id under
// ref with resolution; settling it again changes nothing (the first
// resolution stays). ErrNotFound when no such confirmation was refused.
func (s *Store) SettleRefusedPayment(ctx context.Context, ref string, orderID uuid.UUID, resolution string) (RefusedPayment, error) {
	return s.oneRefused(ctx, "settle refused payment", `
		UPDATE payment_refused SET settled_at = coalesce(settled_at, now()), resolution = coalesce(resolution, $3)
		WHERE payment_ref = $1 AND order_id = $2 RETURNING `+refusedColumns, ref, orderID, resolution)
}

// SettlePaidRefusal settles, as paid, an unsettled refusal of the
// confirmation of order id under ref that has now been accepted (a
// confirmation refused while its order was unknown, accepted once the
// order arrived); it reports whether there was one.
func (s *Store) SettlePaidRefusal(ctx context.Context, ref string, orderID uuid.UUID) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE payment_refused SET settled_at = now(), resolution = $3
		WHERE payment_ref = $1 AND order_id = $2 AND settled_at IS NULL`, ref, orderID, ResolutionPaid)
	if err != nil {
		return false, fmt.Errorf("settle paid refusal %q: %w", ref, err)
	}
	return tag.RowsAffected() > 0, nil
}

// UnsettledRefusedPayments counts the refused confirmations not settled:
// refunds still to make.
func (s *Store) UnsettledRefusedPayments(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM payment_refused WHERE settled_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unsettled refused payments: %w", err)
	}
	return n, nil
}

func (s *Store) oneRefused(ctx context.Context, what, sql string, args ...any) (RefusedPayment, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("%s %q: %w", what, args[0], err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[RefusedPayment])
	if errors.Is(err, pgx.ErrNoRows) {
		return RefusedPayment{}, fmt.Errorf("%s %q: %w", what, args[0], ErrNotFound)
	}
	if err != nil {
		return RefusedPayment{}, fmt.Errorf("%s %q: %w", what, args[0], err)
	}
	return p, nil
}
