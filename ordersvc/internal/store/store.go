// Package store is ordersvc's PostgreSQL side: the schema and its migrations,
// sales and items, orders, the batch persistence of OrderPlaced events and the
// stock-release outbox. PostgreSQL is the source of truth; every rule that
// must hold (stock, one active order per user, idempotency by order id) is
// also a constraint here, so a bug above cannot break it silently.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Outcomes callers branch on.
var (
	// ErrNotFound: no such sale or order.
	ErrNotFound = errors.New("store: not found")
	// ErrActiveConflict: another transaction committed an active order for
	// the same user and sale while this batch was being written; retrying
	// the batch sees that row and rejects the duplicate properly.
	ErrActiveConflict = errors.New("store: concurrent active order for the same user and sale")

	// Order lifecycle refusals (Pay, Cancel). Each names the state that
	// stops the transition; repeating a transition that already happened
	// the same way is not an error.

	// ErrPaid: the order is PAID (under another payment reference, for Pay).
	ErrPaid = errors.New("store: order already paid")
	// ErrExpired: the order is EXPIRED, or PENDING past its expires_at (the
	// sweeper may not have run yet): its unit is or may be back on sale.
	ErrExpired = errors.New("store: order expired")
	// ErrCancelled: the order was cancelled.
	ErrCancelled = errors.New("store: order cancelled")
	// ErrRejected: the order was rejected when it was persisted.
	ErrRejected = errors.New("store: order rejected")
	// ErrPaymentRefUsed: the payment reference already paid another order.
	ErrPaymentRefUsed = errors.New("store: payment reference already used for another order")
)

// Order statuses.
const (
	StatusPending   = "PENDING"
	StatusPaid      = "PAID"
	StatusExpired   = "EXPIRED"
	StatusCancelled = "CANCELLED"
	StatusRejected  = "REJECTED"
)

// Reasons an event does not become an active order.
const (
	// ReasonAlreadyActive: the user already holds an active order in the sale.
	ReasonAlreadyActive = "ALREADY_ACTIVE"
	// ReasonSoldOutInDB: PostgreSQL has no unit left although Redis reserved one.
	ReasonSoldOutInDB = "SOLD_OUT_IN_DB"
	// ReasonUnknownItem: the item does not exist or belongs to another sale;
	// no row can be written, the event is dead-lettered.
	ReasonUnknownItem = "UNKNOWN_ITEM"
)

// Store runs ordersvc's SQL over a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	// shards caches each sale's stock shard count (see ShardsOf), which
	// never changes once the sale exists.
	shards sync.Map // sale id -> int
	// checked counts the batches PersistBatch wrote checked, by why
	// (CheckedBatches).
	checked checkedBatches
}

// checkedBatches counts batches written checked, by why.
type checkedBatches struct{ rejection, conflict atomic.Uint64 }

func (c *checkedBatches) add(cause string) {
	if cause == CheckedRejection {
		c.rejection.Add(1)
	} else {
		c.conflict.Add(1)
	}
}

// New wraps a pool; the caller owns and closes it.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// CheckedBatches returns how many batches PersistBatch has written checked
// rather than fresh, for cause CheckedRejection or CheckedConflict: each
// cost the lookups a fresh batch goes without, and a conflict also the
// fresh insert it rolled back.
func (s *Store) CheckedBatches(cause string) uint64 {
	if cause == CheckedRejection {
		return s.checked.rejection.Load()
	}
	return s.checked.conflict.Load()
}

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}
