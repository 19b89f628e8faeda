// Package holding finds the order a shopper holds in a sale, so that one
// whose answer was lost (a cut connection, a timeout, a gateway killed after
// the broker's acknowledgement) learns its id again: from a retried
// purchase, and from GET /api/flash-sales/{saleId}/order. Redis first: her
// holder entry names the order, and PostgreSQL's row (one primary-key read)
// or the gateway's accepted record says it exists. PostgreSQL second: when
// Redis cannot answer, or lost the sale's hot copy (no load epoch), the one
// active order per user and sale (its partial unique index) is read
// instead.
package holding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/pkg/accepted"
	"flashsale/pkg/stock"
)

// Outcomes callers branch on.
var (
	// ErrNone: the shopper holds no active order in the sale.
	ErrNone = errors.New("holding: no active order in this sale")
	// ErrUnconfirmed: Redis holds a unit for her under an order that is
	// neither in PostgreSQL nor recorded as accepted: a purchase still
	// waiting for the broker, or one whose gateway died before it
	// published (the order service frees those after its in-flight
	// window). Find returns the order id with it; asking again later
	// settles it.
	ErrUnconfirmed = errors.New("holding: reservation not confirmed yet")
)

// Statuses of an active order, as the public API names them.
const (
	// Processing: accepted (the broker acknowledged it), not yet persisted.
	Processing = "PROCESSING"
	Pending    = "PENDING"
	Paid       = "PAID"
)

// Order is a shopper's active order in a sale.
type Order struct {
	ID uuid.UUID
	// ItemID is 0 when unknown: an order not yet persisted whose
	// reservation did not note its item.
	ItemID int64
	Status string
	// ExpiresAt is when an unpaid order ends; zero while Processing (the
	// order service sets it when it persists the order).
	ExpiresAt time.Time
}

// Finder looks orders up.
type Finder struct {
	stock *stock.Store
	redis rueidis.Client
	pool  *pgxpool.Pool
}

// New builds a finder over the gateway's stock store (it knows each sale's
// shards), its Redis client (accepted records) and PostgreSQL pool.
func New(st *stock.Store, rc rueidis.Client, pool *pgxpool.Pool) (*Finder, error) {
	if st == nil || rc == nil || pool == nil {
		return nil, errors.New("holding: stock store, Redis client and PostgreSQL pool are all required")
	}
	return &Finder{stock: st, redis: rc, pool: pool}, nil
}

// Find returns userID's active order in saleID, ErrNone, or ErrUnconfirmed
// with the order's id (and item when known). Other errors mean neither
// Redis nor PostgreSQL could answer.
func (f *Finder) Find(ctx context.Context, saleID int64, userID string) (Order, error) {
	h, held, loaded, redisErr := f.stock.HeldBy(ctx, saleID, userID)
	if redisErr == nil && !held && loaded {
		// The hot copy is whole and holds nothing for her: no active order
		// (every one has its holder). PostgreSQL is spared: the herd opening
		// the sale page asks this.
		return Order{}, ErrNone
	}
	id, badID := uuid.Parse(h.OrderID)
	if redisErr != nil || !held || badID != nil {
		// No holder readable, or a hot copy never loaded or lost (a Redis
		// restart before the reload): PostgreSQL's active order, if any.
		o, err := f.activeOf(ctx, saleID, userID)
		if err != nil && redisErr != nil {
			// PostgreSQL has no active order for her, but Redis could not
			// say whether an accepted order is still on its way: "none"
			// could make her give up a unit she won.
			return Order{}, fmt.Errorf("find order of sale %d: Redis: %w (PostgreSQL: %v)", saleID, redisErr, err)
		}
		return o, err
	}
	o, found, err := f.byID(ctx, saleID, id)
	if err != nil {
		return Order{}, err
	}
	switch {
	case found && o.user != userID:
		// Holders are keyed by user, so this cannot be hers: never reveal it.
		return Order{}, ErrNone
	case found && (o.Status == Pending || o.Status == Paid):
		return o.Order, nil
	case found:
		// Ended (expired, cancelled, rejected): its release is on its way.
		return Order{}, ErrNone
	}
	owner, ok, err := accepted.Owner(ctx, f.redis, id.String())
	switch {
	case err != nil:
		return Order{}, fmt.Errorf("find order of sale %d: %w", saleID, err)
	case ok && owner == userID:
		return Order{ID: id, ItemID: h.ItemID, Status: Processing}, nil
	}
	return Order{ID: id, ItemID: h.ItemID}, ErrUnconfirmed
}

// row is an order as PostgreSQL stores it.
type row struct {
	Order
	user string
}

func (f *Finder) byID(ctx context.Context, saleID int64, id uuid.UUID) (row, bool, error) {
	var r row
	err := f.pool.QueryRow(ctx, `SELECT id, item_id, user_id, status, expires_at FROM flash_sale_order WHERE id = $1 AND sale_id = $2`,
		id, saleID).Scan(&r.ID, &r.ItemID, &r.user, &r.Status, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, fmt.Errorf("read order %s: %w", id, err)
	}
	r.ExpiresAt = r.ExpiresAt.UTC()
	return r, true, nil
}

// activeOf reads the user's active order in the sale; the predicate is the
// partial unique index's, so the read is one index probe.
func (f *Finder) activeOf(ctx context.Context, saleID int64, userID string) (Order, error) {
	var o Order
	err := f.pool.QueryRow(ctx, `SELECT id, item_id, status, expires_at FROM flash_sale_order
		WHERE sale_id = $1 AND user_id = $2 AND status IN ('PENDING', 'PAID')`, saleID, userID).
		Scan(&o.ID, &o.ItemID, &o.Status, &o.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, ErrNone
	}
	if err != nil {
		return Order{}, fmt.Errorf("read active order of sale %d: %w", saleID, err)
	}
	o.ExpiresAt = o.ExpiresAt.UTC()
	return o, nil
}
