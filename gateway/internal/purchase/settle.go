package purchase

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/event"
)

// ReasonPublishFailed is the reject_reason of the row the gateway writes for
// an order whose publish it gave up on (see event.RejectPublishFailed).
const ReasonPublishFailed = event.RejectPublishFailed

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

const (
	// sqlLockItems takes the batch's item rows FOR KEY SHARE, in id order,
	// before anything is inserted. The insert's foreign-key check takes the
	// same lock anyway, but only after the new order id is in the primary
	// key's index: were the order service's batch holding the item FOR
	// UPDATE and inserting the same id, each would wait for the other (the
	// batch on our uncommitted id, we on its item lock) until a timeout or
	// the deadlock detector ended one. Locked first, we simply wait for
	// the batch to commit, and then find the id taken: Placed.
	sqlLockItems = `SELECT 1 FROM flash_sale_item WHERE id = ANY($1::bigint[]) ORDER BY id FOR KEY SHARE`
	// sqlTombstones writes each order as REJECTED unless its id exists, and
	// an outbox row for each one written. The id is the primary key, so
	// exactly one of the gateway and the consumer writes it: whichever
	// comes second finds it taken (the consumer's fresh write fails on the
	// taken id and the batch is written again checked, which reads an
	// existing id as a duplicate). The gateway gives the unit back itself right after the
	// commit; the outbox row is for a gateway that dies before it does:
	// the order service's relay then returns the unit (a release is keyed
	// by order id, so the second one of the two is a no-op). created_at and
	// expires_at are the placing time, as for the consumer's rejections;
	// closed_at says when the gateway gave up.
	sqlTombstones = `
		WITH written AS (
			INSERT INTO flash_sale_order
			  (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
			SELECT id, sale_id, item_id, user_id, 'REJECTED', placed_at, placed_at, now(), $6
			FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[])
			  AS t(id, sale_id, item_id, user_id, placed_at)
			ORDER BY item_id, id
			ON CONFLICT (id) DO NOTHING
			RETURNING id, sale_id, item_id, user_id
		)
		INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
		SELECT id, sale_id, item_id, user_id, $6 FROM written
		RETURNING order_id`
	// sqlTaken reads who holds the ids the insert found taken.
	sqlTaken = `SELECT id, coalesce(reject_reason, '') FROM flash_sale_order WHERE id = ANY($1::uuid[])`
)

const (
	// maxFlushers bounds the settling transactions running at once, so a
	// burst of failed publishes leaves the rest of the pool (catalog reads)
	// alone. Settlements arriving meanwhile wait and go in the next
	// transaction together: one commit (one WAL flush, ~10 ms on this
	// machine's disk) settles a whole burst instead of one order each.
	maxFlushers = 2
	// maxBatch bounds one transaction's orders.
	maxBatch = 1024
)

// PGSettler settles orders through the orders table's primary key.
type PGSettler struct {
	pool    *pgxpool.Pool
	timeout time.Duration

	mu      sync.Mutex
	cond    *sync.Cond // a flush ended
	active  int        // flushes running
	pending []*settleReq
}

type settleReq struct {
	o     event.OrderPlaced
	taken bool // in a flush; its answer comes on done
	done  chan settleResult
}

type settleResult struct {
	s   Settlement
	err error
}

// NewSettler settles on pool, each settling transaction bounded by timeout.
// The insert can wait on locks (the order service's batch holds its item
// rows FOR UPDATE, which blocks the foreign-key check; an uncommitted
// insert of the same id blocks ON CONFLICT), so PostgreSQL gets a statement
// timeout a little under timeout: it then gives up itself and says so,
// instead of finishing the insert after the gateway stopped waiting.
func NewSettler(pool *pgxpool.Pool, timeout time.Duration) (*PGSettler, error) {
	if pool == nil {
		return nil, errors.New("settler: no PostgreSQL pool")
	}
	if timeout < 10*time.Millisecond {
		return nil, fmt.Errorf("settler: timeout %v is under 10ms", timeout)
	}
	s := &PGSettler{pool: pool, timeout: timeout}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

// Settle writes o as REJECTED (ReasonPublishFailed) unless its id is taken.
// Concurrent calls share transactions. It returns within about twice the
// timeout: a flush in progress, then the one that carries o.
func (s *PGSettler) Settle(ctx context.Context, o event.OrderPlaced) (Settlement, error) {
	req := &settleReq{o: o, done: make(chan settleResult, 1)}
	s.mu.Lock()
	s.pending = append(s.pending, req)
	for !req.taken {
		if s.active < maxFlushers {
			s.active++
			n := min(len(s.pending), maxBatch)
			batch := s.pending[:n:n]
			s.pending = append([]*settleReq(nil), s.pending[n:]...)
			for _, r := range batch {
				r.taken = true
			}
			s.mu.Unlock()
			s.flush(context.WithoutCancel(ctx), batch)
			s.mu.Lock()
			s.active--
			s.cond.Broadcast()
			// Ours may have been past maxBatch: the loop checks.
			continue
		}
		s.cond.Wait()
	}
	s.mu.Unlock()
	r := <-req.done
	return r.s, r.err
}

// flush settles batch in one transaction and answers each request.
func (s *PGSettler) flush(ctx context.Context, batch []*settleReq) {
	res, err := s.settleBatch(ctx, batch)
	for i, r := range batch {
		if err != nil {
			r.done <- settleResult{err: fmt.Errorf("settle order %s: %w", r.o.OrderID, err)}
			continue
		}
		r.done <- res[i]
	}
}

// settleBatch writes the batch's tombstones in one transaction, reads who
// holds the ids it found taken, and tells each order's settlement.
func (s *PGSettler) settleBatch(ctx context.Context, batch []*settleReq) ([]settleResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cols := tombstoneColumns(batch)
	var written map[uuid.UUID]bool
	var reasons map[uuid.UUID]string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// SET LOCAL takes no parameters; the value is an integer we format.
		ms := max(s.timeout*3/4, 5*time.Millisecond).Milliseconds()
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", ms)); err != nil {
			return fmt.Errorf("statement timeout: %w", err)
		}
		var err error
		if written, err = writeTombstones(ctx, tx, cols); err != nil || len(written) == len(cols.ids) {
			return err
		}
		reasons, err = takenReasons(ctx, tx, cols.ids, written)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]settleResult, len(cols.ids))
	for i, id := range cols.ids {
		reason, taken := reasons[id]
		out[i] = settlementOf(id, written[id], taken, reason)
	}
	return out, nil
}

// tombstones are a batch's orders as the columns sqlTombstones unnests.
type tombstones struct {
	ids    []uuid.UUID
	sales  []int64
	items  []int64
	users  []string
	placed []time.Time
}

func tombstoneColumns(batch []*settleReq) tombstones {
	n := len(batch)
	c := tombstones{ids: make([]uuid.UUID, n), sales: make([]int64, n), items: make([]int64, n),
		users: make([]string, n), placed: make([]time.Time, n)}
	for i, r := range batch {
		c.ids[i], c.sales[i], c.items[i], c.users[i], c.placed[i] = r.o.OrderID, r.o.SaleID, r.o.ItemID, r.o.UserID, r.o.PlacedAt
	}
	return c
}

// writeTombstones locks the items, inserts the REJECTED rows and their
// outbox rows, and returns the ids it wrote.
func writeTombstones(ctx context.Context, tx pgx.Tx, c tombstones) (map[uuid.UUID]bool, error) {
	if _, err := tx.Exec(ctx, sqlLockItems, c.items); err != nil {
		return nil, fmt.Errorf("lock items: %w", err)
	}
	rows, err := tx.Query(ctx, sqlTombstones, c.ids, c.sales, c.items, c.users, c.placed, ReasonPublishFailed)
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	written := make(map[uuid.UUID]bool, len(got))
	for _, id := range got {
		written[id] = true
	}
	return written, nil
}

// takenReasons reads the reject_reason (” for a live order) of every id
// the insert did not write.
func takenReasons(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, written map[uuid.UUID]bool) (map[uuid.UUID]string, error) {
	var taken []uuid.UUID
	for _, id := range ids {
		if !written[id] {
			taken = append(taken, id)
		}
	}
	rows, err := tx.Query(ctx, sqlTaken, taken)
	if err != nil {
		return nil, fmt.Errorf("read existing orders: %w", err)
	}
	defer rows.Close()
	reasons := make(map[uuid.UUID]string, len(taken))
	for rows.Next() {
		var id uuid.UUID
		var reason string
		if err := rows.Scan(&id, &reason); err != nil {
			return nil, fmt.Errorf("read existing orders: %w", err)
		}
		reasons[id] = reason
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read existing orders: %w", err)
	}
	return reasons, nil
}

// settlementOf is the fate of order id: written by our insert, or taken
// by a row whose reject_reason is reason.
func settlementOf(id uuid.UUID, written, taken bool, reason string) settleResult {
	switch {
	case written:
		return settleResult{s: Abandoned}
	case !taken:
		// Neither inserted nor found: nothing should delete orders.
		return settleResult{err: fmt.Errorf("settle order %s: neither written nor found", id)}
	case reason == ReasonPublishFailed, reason == event.RejectAbandoned:
		// Our own tombstone, from an earlier settlement of this order, or
		// the order service's for a reservation it found abandoned (its
		// outbox gives the unit back; releasing here too is a no-op, the
		// release being keyed by order id).
		return settleResult{s: Abandoned}
	default:
		return settleResult{s: Placed}
	}
}
