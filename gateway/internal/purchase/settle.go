package purchase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/event"
)

// ReasonPublishFailed is the reject_reason of the row the gateway writes for
// an order whose publish it gave up on: the order id is taken, so a late copy
// of the event is a duplicate the order service ignores.
const ReasonPublishFailed = "PUBLISH_FAILED"

// Settlement is what PostgreSQL says about an order whose publish was not
// confirmed.
type Settlement int

const (
	// Abandoned: the gateway's REJECTED row took the order id; the order
	// will never exist, and its unit may be given back.
	Abandoned Settlement = iota + 1
	// Placed: the order service had already stored the order (the event
	// reached the topic after all): the purchase stands.
	Placed
)

func (s Settlement) String() string {
	switch s {
	case Abandoned:
		return "abandoned"
	case Placed:
		return "placed"
	}
	return fmt.Sprintf("Settlement(%d)", int(s))
}

// Settler decides the fate of an order whose publish may or may not have
// reached the topic. An error means the fate is still unknown.
type Settler interface {
	Settle(ctx context.Context, o event.OrderPlaced) (Settlement, error)
}

// sqlTombstone writes the order as REJECTED unless its id exists. The id is
// the primary key, so exactly one of the gateway and the consumer writes it:
// whichever comes second finds it taken (the consumer's PersistBatch uses ON
// CONFLICT (id) DO NOTHING too, and reads an existing id as a duplicate). No
// stock_release row: the gateway gives the unit back itself, and a late copy
// of the event then finds a REJECTED row with nothing to release.
// created_at and expires_at are the placing time, as for the consumer's
// rejections; closed_at says when the gateway gave up.
const sqlTombstone = `
	INSERT INTO flash_sale_order
	  (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
	VALUES ($1, $2, $3, $4, 'REJECTED', $5, $5, now(), $6)
	ON CONFLICT (id) DO NOTHING`

const sqlReason = `SELECT coalesce(reject_reason, '') FROM flash_sale_order WHERE id = $1`

// PGSettler settles orders through the orders table's primary key.
type PGSettler struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

// NewSettler settles on pool, each settlement bounded by timeout. The
// insert can wait on locks (the order service's batch holds its item rows
// FOR UPDATE, which blocks the foreign-key check; an uncommitted insert of
// the same id blocks ON CONFLICT), so PostgreSQL gets a statement timeout
// a little under timeout: it then gives up itself and says so, instead of
// finishing the insert after the gateway stopped waiting.
func NewSettler(pool *pgxpool.Pool, timeout time.Duration) (*PGSettler, error) {
	if pool == nil {
		return nil, errors.New("settler: no PostgreSQL pool")
	}
	if timeout < 10*time.Millisecond {
		return nil, fmt.Errorf("settler: timeout %v is under 10ms", timeout)
	}
	return &PGSettler{pool: pool, timeout: timeout}, nil
}

// Settle writes o as REJECTED (ReasonPublishFailed) unless its id is taken.
func (s *PGSettler) Settle(ctx context.Context, o event.OrderPlaced) (Settlement, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var written bool // the order id is (now) our tombstone
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// SET LOCAL takes no parameters; the value is an integer we format.
		ms := max(s.timeout*3/4, 5*time.Millisecond).Milliseconds()
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", ms)); err != nil {
			return fmt.Errorf("statement timeout: %w", err)
		}
		tag, err := tx.Exec(ctx, sqlTombstone, o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt, ReasonPublishFailed)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if tag.RowsAffected() == 1 {
			written = true
			return nil
		}
		// Taken. By our own earlier tombstone (a repeated settlement) it
		// stays abandoned; by anything else the order is real.
		var reason string
		if err := tx.QueryRow(ctx, sqlReason, o.OrderID).Scan(&reason); err != nil {
			return fmt.Errorf("read existing order: %w", err)
		}
		written = reason == ReasonPublishFailed
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("settle order %s: %w", o.OrderID, err)
	}
	if written {
		return Abandoned, nil
	}
	return Placed, nil
}
