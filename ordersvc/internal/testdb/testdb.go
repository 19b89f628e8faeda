// Package testdb gives ordersvc's integration tests a migrated pool on the
// local stack's PostgreSQL and a fresh sale of their own, so tests running
// in parallel never share rows. It is the one non-test file of a product
// module that imports tooling (tools/testenv): it must reach
// ordersvc/internal/store, which tools cannot, and only _test.go files
// import it, so no binary links it.
package testdb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// Pool connects to the local PostgreSQL, migrates it and closes the pool when
// the test ends. It fails the test when PostgreSQL does not answer.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatalf("connect postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// Own gives a test a database and a Redis server of its own: a migrated
// pool on a fresh database (testenv.FreshDatabase) and a client of a
// throwaway redis-server (testenv.ThrowawayRedis), both gone when the test
// ends. A fresh database numbers its sales from 1, as the shared one did
// when it was new, so its sales' Redis keys would collide with other
// tests' in the shared Redis. For a test that changes the schema
// (FailCommits).
func Own(t testing.TB) (*pgxpool.Pool, rueidis.Client) {
	t.Helper()
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.FreshDatabase(t))
	if err != nil {
		t.Fatalf("connect postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.ThrowawayRedis(t)}, DisableCache: true})
	if err != nil {
		t.Fatalf("connect redis: %v", err)
	}
	t.Cleanup(rc.Close)
	return pool, rc
}

// ErrCommitRefused is the SQLSTATE of the exception FailCommits raises
// (raise_exception).
const ErrCommitRefused = "P0001"

// FailCommits makes PostgreSQL refuse the COMMIT of every transaction that
// runs op ("INSERT" or "UPDATE") on table, after each of its statements
// succeeded: a deferred constraint trigger that raises. Nothing such a
// transaction did is kept, as when a commit meets a serialization
// failure, a full disk or a lost connection. It returns the function that
// lifts it (also called when the test ends). Only on a database of the
// test's own (Own): every transaction of the database is subject to it.
func FailCommits(t testing.TB, pool *pgxpool.Pool, op, table string) (lift func()) {
	t.Helper()
	ctx := testenv.Context(t)
	name := fmt.Sprintf("refuse_commit_%s_%s", strings.ToLower(op), table)
	ddl := fmt.Sprintf(`
		CREATE OR REPLACE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'commit refused by the test (%[2]s on %[3]s)'; END $$;
		CREATE CONSTRAINT TRIGGER %[1]s AFTER %[2]s ON %[3]s
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %[1]s()`, name, op, table)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("refuse commits: %v", err)
	}
	var once sync.Once
	lift = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := pool.Exec(ctx, fmt.Sprintf("DROP TRIGGER %s ON %s", name, table)); err != nil {
				t.Errorf("lift the commit refusal: %v", err)
			}
		})
	}
	t.Cleanup(lift)
	return lift
}

var seq atomic.Int64

// Sale creates an open sale named after the test with one item per quantity.
func Sale(t testing.TB, st *store.Store, quantities ...int64) store.Sale {
	t.Helper()
	now := time.Now()
	return SaleAt(t, st, now.Add(-time.Minute), now.Add(time.Hour), 10*time.Minute, quantities...)
}

// SaleAt creates a sale named after the test, open from startsAt to endsAt
// with the payment window paymentTTL, with one item per quantity.
func SaleAt(t testing.TB, st *store.Store, startsAt, endsAt time.Time, paymentTTL time.Duration, quantities ...int64) store.Sale {
	t.Helper()
	ns := store.NewSale{
		Name:       fmt.Sprintf("%.150s-%d-%d", t.Name(), time.Now().UnixNano(), seq.Add(1)),
		StartsAt:   startsAt,
		EndsAt:     endsAt,
		PaymentTTL: paymentTTL,
	}
	for i, q := range quantities {
		ns.Items = append(ns.Items, store.NewItem{ProductID: fmt.Sprintf("p%d", i), Name: fmt.Sprintf("item %d", i), Price: "9.99", Quantity: q})
	}
	sale, err := st.CreateSale(testenv.Context(t), ns)
	if err != nil {
		t.Fatalf("create sale: %v", err)
	}
	return sale
}

// Load writes the sale's stock and holders into Redis from PostgreSQL, as
// load-stock does.
func Load(t testing.TB, st *store.Store, stk *stock.Store, saleID int64) {
	t.Helper()
	ctx := testenv.Context(t)
	snap, err := st.StockSnapshot(ctx, saleID)
	if err != nil {
		t.Fatal(err)
	}
	if err := stk.Load(ctx, saleID, snap.Items, snap.Holders); err != nil {
		t.Fatal(err)
	}
}

// Orders buys one unit of the sale's item (an index into its items) for
// each user as the gateway and the consumer would: a Redis reservation
// (when stk is not nil; load the stock first), then a PENDING row placed
// at placed, so it expires at placed + the sale's payment TTL.
func Orders(t testing.TB, st *store.Store, stk *stock.Store, sale store.Sale, item int, placed time.Time, users ...string) []event.OrderPlaced {
	t.Helper()
	ctx := testenv.Context(t)
	evs := make([]event.OrderPlaced, 0, len(users))
	for _, u := range users {
		e := event.OrderPlaced{Version: event.Version, OrderID: uuid.New(), SaleID: sale.ID, ItemID: sale.Items[item].ID, UserID: u, PlacedAt: placed}
		if stk != nil {
			if _, err := stk.Reserve(ctx, sale.ID, e.ItemID, u, e.OrderID.String()); err != nil {
				t.Fatalf("reserve for %s: %v", u, err)
			}
		}
		evs = append(evs, e)
	}
	out, err := st.PersistBatch(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Kind != store.Accepted {
			t.Fatalf("order of %s: %v %s, want accepted", users[i], o.Kind, o.Reason)
		}
	}
	return evs
}

// WaitReleased waits, up to 10 s, until the outbox rows of ids are all
// marked released, by whichever relay took them: tests share the outbox,
// and a drain skips a row another test's relay holds at that moment.
func WaitReleased(t testing.TB, pool *pgxpool.Pool, ids ...uuid.UUID) {
	t.Helper()
	waitOutbox(t, pool, fmt.Sprintf("%d outbox rows", len(ids)), func(ctx context.Context) (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE order_id = ANY($1) AND released_at IS NOT NULL`, ids).Scan(&n)
		return n == len(ids), err
	})
}

// WaitSaleReleased waits, up to 10 s, until no outbox row of the sale is
// pending.
func WaitSaleReleased(t testing.TB, pool *pgxpool.Pool, saleID int64) {
	t.Helper()
	waitOutbox(t, pool, fmt.Sprintf("the outbox rows of sale %d", saleID), func(ctx context.Context) (bool, error) {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, saleID).Scan(&pending)
		return pending == 0, err
	})
}

func waitOutbox(t testing.TB, pool *pgxpool.Pool, what string, done func(context.Context) (bool, error)) {
	t.Helper()
	ctx := testenv.Context(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := done(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not released after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
