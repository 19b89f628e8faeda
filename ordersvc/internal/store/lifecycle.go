package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The order lifecycle after persistence: PENDING becomes PAID (Pay),
// CANCELLED (Cancel) or EXPIRED (ExpireDue), once. Every transition is an
// UPDATE guarded by status = 'PENDING', so two transitions racing on one
// order queue on its row lock and the second finds the first's result:
// exactly one wins. Pay also requires expires_at > now() and expiry
// requires expires_at <= now(), on the same (PostgreSQL) clock, so a
// payment is never accepted once the unit may have gone back on sale.
// Ending an order returns its unit in the same transaction: sold - 1 and
// a stock_release outbox row, drained into Redis by the relay after commit.

// Transition is the result of Pay or Cancel.
type Transition struct {
	Order Order
	// Changed: this call made the transition; false when it had already
	// happened the same way (an idempotent repeat).
	Changed bool
	// SoldDrift lists items whose sold counter was lower than the units
	// being returned. The counter was clamped at 0 instead of blocking the
	// transition (and, for the sweeper, every order behind it); it means an
	// earlier bug counted a unit out twice or in once too few. Log it at
	// ERROR: someone must reconcile and find the cause.
	SoldDrift []int64
}

// Expired is the result of ExpireDue.
type Expired struct {
	IDs       []uuid.UUID
	SoldDrift []int64 // as in Transition
}

// attempts bounds re-reading an order whose state changed between the
// guarded UPDATE and the read that explains why it matched nothing.
const attempts = 3

// soldDecrement is the normal sold update; soldClamped replaces it when the
// CHECK (sold >= 0) refused it (see Transition.SoldDrift).
const (
	soldDecrement = "i.sold - %s"
	soldClamped   = "greatest(i.sold - %s, 0)"
)

const (
	sqlPay = `
		UPDATE flash_sale_order SET status = 'PAID', paid_at = now(), payment_ref = $3
		WHERE id = $1 AND ($2::text IS NULL OR user_id = $2) AND status = 'PENDING' AND expires_at > now()
		RETURNING ` + orderColumns
	// The order's state and whether its payment window has closed, by the
	// database clock the guarded UPDATEs use.
	sqlCurrent = `SELECT ` + orderColumns + `, expires_at <= now() FROM flash_sale_order WHERE id = $1`
	// One statement: end the order, give its unit back to PostgreSQL's
	// count and queue the Redis release. The order row is locked first,
	// then its item; the expiry sweep locks its orders, then its items in
	// id order, and never waits for an order row, so the two cannot
	// deadlock. The last column reads sold as it was before the statement.
	sqlCancel = `
		WITH c AS (
			UPDATE flash_sale_order SET status = 'CANCELLED', closed_at = now()
			WHERE id = $1 AND user_id = $2 AND status = 'PENDING'
			RETURNING *
		), sold AS (
			UPDATE flash_sale_item i SET sold = %s FROM c WHERE i.id = c.item_id
		), outbox AS (
			INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
			SELECT id, sale_id, item_id, user_id, 'CANCELLED' FROM c
			ON CONFLICT (order_id) DO NOTHING
		)
		SELECT ` + orderColumns + `, (SELECT i.sold < 1 FROM flash_sale_item i WHERE i.id = c.item_id) FROM c`
	// Claims due orders; SKIP LOCKED lets several sweepers share the work
	// and passes over an order a payment or cancel holds right now (it is
	// picked up by the next pass if it is still PENDING then).
	sqlClaimDue = `
		SELECT id, item_id FROM flash_sale_order
		WHERE status = 'PENDING' AND expires_at <= now()
		ORDER BY expires_at
		LIMIT $1
		FOR UPDATE SKIP LOCKED`
	// Items are locked in id order so sweepers sharing items queue up
	// instead of deadlocking.
	sqlLockItemsByID = `SELECT id FROM flash_sale_item WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`
	// sold is decremented once per item by the number of orders expired.
	sqlExpire = `
		WITH exp AS (
			UPDATE flash_sale_order SET status = 'EXPIRED', closed_at = now()
			WHERE id = ANY($1::uuid[]) AND status = 'PENDING'
			RETURNING id, sale_id, item_id, user_id
		), sold AS (
			UPDATE flash_sale_item i SET sold = %s
			FROM (SELECT item_id, count(*)::int AS n FROM exp GROUP BY item_id) c
			WHERE i.id = c.item_id
		), outbox AS (
			INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
			SELECT id, sale_id, item_id, user_id, 'EXPIRED' FROM exp
			ON CONFLICT (order_id) DO NOTHING
		)
		SELECT id FROM exp`
	// Items of the claimed orders whose sold is below what expiring them
	// returns, read before the clamped update.
	sqlDrift = `
		SELECT i.id FROM flash_sale_item i
		JOIN (SELECT item_id, count(*)::int AS n FROM flash_sale_order
		      WHERE id = ANY($1::uuid[]) AND status = 'PENDING' GROUP BY item_id) c ON c.item_id = i.id
		WHERE i.sold < c.n ORDER BY i.id`
)

// The statements with each sold update.
var (
	sqlCancelDecrement = fmt.Sprintf(sqlCancel, fmt.Sprintf(soldDecrement, "1"))
	sqlCancelClamped   = fmt.Sprintf(sqlCancel, fmt.Sprintf(soldClamped, "1"))
	sqlExpireDecrement = fmt.Sprintf(sqlExpire, fmt.Sprintf(soldDecrement, "c.n"))
	sqlExpireClamped   = fmt.Sprintf(sqlExpire, fmt.Sprintf(soldClamped, "c.n"))
)

func isCheckViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514"
}

// Pay marks userID's PENDING order PAID under the payment reference ref;
// repeating it with the same ref returns the PAID order unchanged
// (idempotent). It refuses with ErrPaid (another ref), ErrExpired (EXPIRED,
// or PENDING past expires_at), ErrCancelled, ErrRejected or
// ErrPaymentRefUsed; an order of another user is ErrNotFound, as is a
// missing one.
func (s *Store) Pay(ctx context.Context, id uuid.UUID, userID, ref string) (Transition, error) {
	return s.pay(ctx, id, &userID, ref)
}

// PayConfirmed is Pay for a payment provider's signed confirmation: the
// signature vouches for the payment, whoever the shopper is.
func (s *Store) PayConfirmed(ctx context.Context, id uuid.UUID, ref string) (Transition, error) {
	return s.pay(ctx, id, nil, ref)
}

func (s *Store) pay(ctx context.Context, id uuid.UUID, userID *string, ref string) (Transition, error) {
	for range attempts {
		o, err := scanOrder(s.pool.QueryRow(ctx, sqlPay, id, userID, ref))
		if err == nil {
			return Transition{Order: o, Changed: true}, nil
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == "flash_sale_order_payment_ref" {
			return Transition{}, ErrPaymentRefUsed
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Transition{}, fmt.Errorf("pay order %s: %w", id, err)
		}
		o, due, err := s.current(ctx, id, userID)
		if err != nil {
			return Transition{}, err
		}
		t := Transition{Order: o}
		switch {
		case o.Status == StatusPaid && o.PaymentRef == ref:
			return t, nil
		case o.Status == StatusPaid:
			return t, ErrPaid
		case o.Status == StatusExpired, o.Status == StatusPending && due:
			return t, ErrExpired
		case o.Status == StatusCancelled:
			return t, ErrCancelled
		case o.Status == StatusRejected:
			return t, ErrRejected
		}
		// PENDING inside its window: a transaction that held the row rolled
		// back after our UPDATE skipped it. Try again.
	}
	return Transition{}, fmt.Errorf("pay order %s: its state kept changing", id)
}

// Cancel ends userID's PENDING order as CANCELLED and queues its unit for
// release (the caller drains the relay); cancelling a CANCELLED order
// returns it unchanged. It refuses with ErrPaid, ErrExpired or ErrRejected;
// an order of another user is ErrNotFound. A PENDING order past its
// expires_at can still be cancelled: its unit goes back either way, once.
func (s *Store) Cancel(ctx context.Context, id uuid.UUID, userID string) (Transition, error) {
	for range attempts {
		var drift bool
		o, err := scanOrder(s.pool.QueryRow(ctx, sqlCancelDecrement, id, userID), &drift)
		if isCheckViolation(err) {
			o, err = scanOrder(s.pool.QueryRow(ctx, sqlCancelClamped, id, userID), &drift)
		}
		if err == nil {
			t := Transition{Order: o, Changed: true}
			if drift {
				t.SoldDrift = []int64{o.ItemID}
			}
			return t, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Transition{}, fmt.Errorf("cancel order %s: %w", id, err)
		}
		o, _, err = s.current(ctx, id, &userID)
		if err != nil {
			return Transition{}, err
		}
		t := Transition{Order: o}
		switch o.Status {
		case StatusCancelled:
			return t, nil
		case StatusPaid:
			return t, ErrPaid
		case StatusExpired:
			return t, ErrExpired
		case StatusRejected:
			return t, ErrRejected
		}
	}
	return Transition{}, fmt.Errorf("cancel order %s: its state kept changing", id)
}

// current reads an order and whether its payment window has closed;
// ErrNotFound when it is missing or belongs to someone other than userID
// (nil: anyone).
func (s *Store) current(ctx context.Context, id uuid.UUID, userID *string) (Order, bool, error) {
	var due bool
	o, err := scanOrder(s.pool.QueryRow(ctx, sqlCurrent, id), &due)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && userID != nil && o.UserID != *userID) {
		return Order{}, false, ErrNotFound
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("read order %s: %w", id, err)
	}
	return o, due, nil
}

// ExpireDue ends up to limit PENDING orders whose expires_at has passed, in
// one transaction: EXPIRED with closed_at, each item's sold decremented
// once by its count, one stock_release row per order. The caller drains
// the returned ids through the relay after this commit. Sweepers running
// at once, in one process or many, expire each order once: they claim with
// FOR UPDATE SKIP LOCKED and update only rows still PENDING.
func (s *Store) ExpireDue(ctx context.Context, limit int) (Expired, error) {
	var res Expired
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = Expired{}
		rows, err := tx.Query(ctx, sqlClaimDue, limit)
		if err != nil {
			return fmt.Errorf("claim due orders: %w", err)
		}
		var (
			ids   []uuid.UUID
			items []int64
			id    uuid.UUID
			item  int64
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &item}, func() error {
			ids = append(ids, id)
			items = append(items, item)
			return nil
		})
		if err != nil {
			return fmt.Errorf("claim due orders: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlLockItemsByID, items); err != nil {
			return fmt.Errorf("lock items: %w", err)
		}
		// A savepoint, so that a counter drift on one item does not stop
		// the expiry of every order claimed with it, pass after pass.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		res.IDs, err = expire(ctx, sp, sqlExpireDecrement, ids)
		if err == nil {
			return sp.Commit(ctx)
		}
		if rerr := sp.Rollback(ctx); rerr != nil || !isCheckViolation(err) {
			return errors.Join(err, rerr)
		}
		if res.SoldDrift, err = collect(ctx, tx, "find drifted counters", pgx.RowTo[int64], sqlDrift, uuidArray(ids)); err != nil {
			return err
		}
		res.IDs, err = expire(ctx, tx, sqlExpireClamped, ids)
		return err
	})
	if err != nil {
		return Expired{}, fmt.Errorf("expire due orders: %w", err)
	}
	return res, nil
}

func expire(ctx context.Context, tx pgx.Tx, q string, ids []uuid.UUID) ([]uuid.UUID, error) {
	return collect(ctx, tx, "expire", pgx.RowTo[uuid.UUID], q, uuidArray(ids))
}
