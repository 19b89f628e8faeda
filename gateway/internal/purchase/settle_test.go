package purchase

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// settleDB is a migrated pool on the local stack's PostgreSQL and a sale
// with one item of its own.
func settleDB(t *testing.T) (pool *pgxpool.Pool, saleID, itemID int64) {
	t.Helper()
	ctx := testenv.Context(t)
	pool = testenv.Pool(t)
	now := time.Now()
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ($1, $2, $3) RETURNING id`,
		fmt.Sprintf("%.150s-%d", t.Name(), now.UnixNano()), now.Add(-time.Minute), now.Add(time.Hour)).Scan(&saleID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
		VALUES ($1, 'p', 'item', 1, 10) RETURNING id`, saleID).Scan(&itemID); err != nil {
		t.Fatal(err)
	}
	return pool, saleID, itemID
}

func placedOrder(t *testing.T, saleID, itemID int64, user string) event.OrderPlaced {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return event.OrderPlaced{Version: event.Version, OrderID: id, SaleID: saleID, ItemID: itemID, UserID: user,
		PlacedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// orderRow is what PostgreSQL holds for an order id.
type orderRow struct {
	status, reason string
	outbox         int // stock_release rows
	sold           int // the item's sold column
}

func readOrder(t *testing.T, pool *pgxpool.Pool, o event.OrderPlaced) (orderRow, bool) {
	t.Helper()
	ctx := testenv.Context(t)
	var r orderRow
	err := pool.QueryRow(ctx, `SELECT o.status, coalesce(o.reject_reason, ''),
		    (SELECT count(*) FROM stock_release WHERE order_id = o.id), i.sold
		FROM flash_sale_order o JOIN flash_sale_item i ON i.id = o.item_id WHERE o.id = $1`, o.OrderID).
		Scan(&r.status, &r.reason, &r.outbox, &r.sold)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

// The settler against the real PostgreSQL: each fate of an order id.
func TestSettle(t *testing.T) {
	pool, saleID, itemID := settleDB(t)
	ctx := testenv.Context(t)
	s, err := NewSettler(pool, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("nobody stored it: tombstone written", func(t *testing.T) {
		o := placedOrder(t, saleID, itemID, "alice")
		got, err := s.Settle(ctx, o)
		if err != nil || got != Abandoned {
			t.Fatalf("Settle = %v, %v; want abandoned", got, err)
		}
		r, ok := readOrder(t, pool, o)
		// An outbox row: the gateway gives the unit back itself, and the
		// order service's relay does if the gateway dies first.
		if want := (orderRow{status: "REJECTED", reason: ReasonPublishFailed, outbox: 1}); !ok || r != want {
			t.Errorf("row %+v (exists %v), want %+v", r, ok, want)
		}
		again, err := s.Settle(ctx, o)
		if err != nil || again != Abandoned {
			t.Errorf("settling the same order again = %v, %v; want abandoned", again, err)
		}
	})

	t.Run("the consumer stored it: placed", func(t *testing.T) {
		o := placedOrder(t, saleID, itemID, "bob")
		// The row as the consumer's PersistBatch writes an accepted order.
		if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, 'PENDING', $5, $6)`, o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt, o.PlacedAt.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Settle(ctx, o)
		if err != nil || got != Placed {
			t.Fatalf("Settle = %v, %v; want placed", got, err)
		}
		if r, _ := readOrder(t, pool, o); r.status != "PENDING" || r.reason != "" {
			t.Errorf("row %+v, want the consumer's PENDING row untouched", r)
		}
	})

	t.Run("the consumer rejected it: placed", func(t *testing.T) {
		o := placedOrder(t, saleID, itemID, "carol")
		if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at, reject_reason)
			VALUES ($1, $2, $3, $4, 'REJECTED', $5, $5, 'ALREADY_ACTIVE')`, o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt); err != nil {
			t.Fatal(err)
		}
		// A 202 that polls REJECTED, with the unit returned by the
		// consumer's outbox: the same as for any accepted order.
		if got, err := s.Settle(ctx, o); err != nil || got != Placed {
			t.Fatalf("Settle = %v, %v; want placed", got, err)
		}
	})

	// The order service's batch holds the item FOR UPDATE and inserts the
	// same order id while the settlement runs: the settlement waits for the
	// batch and finds the order placed. Inserting first, it waited for the
	// item lock while the batch waited for its uncommitted id, until the
	// deadlock detector aborted one of them.
	t.Run("the consumer's batch stores it meanwhile: placed", func(t *testing.T) {
		o := placedOrder(t, saleID, itemID, "frank")
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // committed below; a rollback after it is a no-op
		if _, err := tx.Exec(ctx, `SELECT 1 FROM flash_sale_item WHERE id = $1 FOR UPDATE`, itemID); err != nil {
			t.Fatal(err)
		}
		type result struct {
			s   Settlement
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := s.Settle(ctx, o)
			done <- result{got, err}
		}()
		time.Sleep(300 * time.Millisecond) // the settlement is waiting on the item now
		if _, err := tx.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, 'PENDING', $5, $6) ON CONFLICT (id) DO NOTHING`,
			o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt, o.PlacedAt.Add(10*time.Minute)); err != nil {
			t.Fatalf("the batch's insert: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("the batch's commit: %v", err)
		}
		if r := <-done; r.err != nil || r.s != Placed {
			t.Fatalf("Settle = %v, %v; want placed", r.s, r.err)
		}
		if r, _ := readOrder(t, pool, o); r.status != "PENDING" || r.outbox != 0 {
			t.Errorf("row %+v, want the batch's PENDING row and no outbox row", r)
		}
	})

	t.Run("PostgreSQL unreachable: unknown", func(t *testing.T) {
		dead, err := pgxpool.New(ctx, "postgres://flashsale@127.0.0.1:1/flashsale?sslmode=disable&connect_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		ds, err := NewSettler(dead, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		o := placedOrder(t, saleID, itemID, "dave")
		if got, err := ds.Settle(ctx, o); err == nil {
			t.Fatalf("Settle = %v with no PostgreSQL, want an error", got)
		}
	})

	// The item row locked FOR UPDATE (as the consumer's batch holds it)
	// blocks the insert's foreign-key check. PostgreSQL must give up by
	// itself within the settle timeout, so no row appears once the lock goes
	// after the gateway stopped waiting and kept the unit.
	t.Run("blocked past the timeout: unknown, and nothing written later", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // released below; a second rollback is a no-op
		if _, err := tx.Exec(ctx, `SELECT 1 FROM flash_sale_item WHERE id = $1 FOR UPDATE`, itemID); err != nil {
			t.Fatal(err)
		}
		short, err := NewSettler(pool, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		o := placedOrder(t, saleID, itemID, "erin")
		got, err := short.Settle(ctx, o)
		// 57014: the server cancelled the statement (statement_timeout),
		// so its transaction is gone, not waiting for the lock.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("Settle = %v, %v while the item row is locked; want PostgreSQL's statement timeout (57014)", got, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if r, ok := readOrder(t, pool, o); ok {
			t.Errorf("row %+v written after the settler gave up", r)
		}
	})
}

// A burst of settlements, as a broker outage brings: concurrent calls share
// transactions, and each still gets its own order's fate.
func TestSettleBurst(t *testing.T) {
	pool, saleID, itemID := settleDB(t)
	ctx := testenv.Context(t)
	s, err := NewSettler(pool, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	orders := make([]event.OrderPlaced, n)
	want := make([]Settlement, n)
	for i := range orders {
		orders[i] = placedOrder(t, saleID, itemID, fmt.Sprintf("u%d", i))
		want[i] = Abandoned
		if i%3 == 0 { // every third one the consumer stored first
			want[i] = Placed
			o := orders[i]
			if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
				VALUES ($1, $2, $3, $4, 'PENDING', $5, $6)`, o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt, o.PlacedAt.Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := make([]Settlement, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.Settle(ctx, orders[i])
		}()
	}
	wg.Wait()
	for i := range orders {
		if errs[i] != nil || got[i] != want[i] {
			t.Errorf("order %d: %v, %v; want %v", i, got[i], errs[i], want[i])
		}
	}
	var tombstones int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND reject_reason = $2`,
		saleID, ReasonPublishFailed).Scan(&tombstones); err != nil {
		t.Fatal(err)
	}
	if tombstones != n-n/3 {
		t.Errorf("%d tombstones, want %d", tombstones, n-n/3)
	}
}
