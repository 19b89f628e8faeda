package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/expiry"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ttl is testdb.Sale's payment window.
const ttl = 10 * time.Minute

type env struct {
	pool *pgxpool.Pool
	st   *store.Store
	rc   rueidis.Client
	stk  *stock.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	testdb.Pool(t) // migrated
	// Enough connections that no payment of a race waits for one: its
	// send time is then its arrival time, give or take a millisecond.
	cfg, err := pgxpool.ParseConfig(testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 64
	pool, err := pgxpool.NewWithConfig(testenv.Context(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return &env{pool: pool, st: store.New(pool), rc: rc, stk: stock.New(rc)}
}

// ownEnv is newEnv on a database and a Redis of the test's own
// (testdb.Own): no other test's sweeper or relay takes its orders.
func ownEnv(t *testing.T) *env {
	t.Helper()
	pool, rc := testdb.Own(t)
	st := store.New(pool)
	return &env{pool: pool, st: st, rc: rc, stk: stock.New(rc)}
}

// sweeper takes large batches: services and benchmarks of other packages
// leave due orders in the shared database, and a test's orders must not
// wait behind them.
func (e *env) sweeper() *expiry.Sweeper {
	m := metrics.New()
	return expiry.New(e.st, relay.New(e.st, e.stk, quiet, m), quiet, m, 1000)
}

// dueAt moves the payment deadline of orders to at. The races
// below need a deadline a few hundred milliseconds after their orders
// exist, however long creating them took on a loaded machine.
func (e *env) dueAt(t *testing.T, orders []uuid.UUID, at time.Time) {
	t.Helper()
	if _, err := e.pool.Exec(testenv.Context(t), `UPDATE flash_sale_order SET expires_at = $2 WHERE id = ANY($1)`, orders, at); err != nil {
		t.Fatal(err)
	}
}

// pending counts the sale's PENDING orders.
func (e *env) pending(t *testing.T, saleID int64) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(testenv.Context(t), `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND status = 'PENDING'`, saleID).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

// sale creates a sale with one item per quantity, loaded into Redis, and
// orders placed at placed by users u0..u(n-1) on each item in turn.
func (e *env) sale(t *testing.T, placed time.Time, quantities ...int64) (store.Sale, []event.OrderPlaced) {
	t.Helper()
	s := testdb.Sale(t, e.st, quantities...)
	testdb.Load(t, e.st, e.stk, s.ID)
	var evs []event.OrderPlaced
	u := 0
	for i, q := range quantities {
		users := make([]string, q)
		for j := range users {
			users[j] = fmt.Sprintf("u%d", u)
			u++
		}
		evs = append(evs, testdb.Orders(t, e.st, e.stk, s, i, placed, users...)...)
	}
	return s, evs
}

func ids(evs []event.OrderPlaced) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.OrderID
	}
	return out
}

// waitReleased waits until every outbox row of ids is drained, by whichever
// relay took it (other tests and services share the database).
func (e *env) waitReleased(t *testing.T, ids []uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := e.pool.QueryRow(testenv.Context(t), `SELECT count(*) FROM stock_release WHERE order_id = ANY($1) AND released_at IS NOT NULL`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d outbox rows released after 15s", n, len(ids))
		}
		// Drain them ourselves too: this is what a restarted service does.
		if _, err := relay.New(e.st, e.stk, quiet, metrics.New()).Drain(testenv.Context(t), ids); err != nil {
			t.Logf("drain: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check verifies the end state of a sale: every order in wantStatus (by
// order id), one outbox row per ended order, sold == active orders, and
// Redis holding exactly quantity - active units and the active holders:
// a unit given back twice would show as one unit too many.
func (e *env) check(t *testing.T, s store.Sale, evs []event.OrderPlaced, wantStatus map[uuid.UUID]string) {
	t.Helper()
	ctx := testenv.Context(t)
	var ended []uuid.UUID
	for _, ev := range evs {
		o, err := e.st.GetOrder(ctx, ev.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != wantStatus[ev.OrderID] {
			t.Errorf("order %s: status %s, want %s", ev.OrderID, o.Status, wantStatus[ev.OrderID])
		}
		if o.Status != store.StatusPending && o.Status != store.StatusPaid {
			ended = append(ended, ev.OrderID)
		}
	}
	var rows int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE order_id = ANY($1)`, ids(evs)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(ended) {
		t.Errorf("outbox rows: got %d, want %d (one per ended order)", rows, len(ended))
	}
	e.waitReleased(t, ended)
	after, err := e.st.GetSale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	holders, err := e.stk.Holders(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	active := map[int64]int64{}
	for _, ev := range evs {
		if st := wantStatus[ev.OrderID]; st == store.StatusPending || st == store.StatusPaid {
			active[ev.ItemID]++
			if holders[ev.UserID] != ev.OrderID.String() {
				t.Errorf("holder of active order %s: got %q", ev.OrderID, holders[ev.UserID])
			}
		}
	}
	var nActive int64
	for _, it := range after.Items {
		nActive += active[it.ID]
		if it.Sold != active[it.ID] {
			t.Errorf("item %d: sold %d, want %d (active orders)", it.ID, it.Sold, active[it.ID])
		}
		left, err := e.stk.Left(ctx, s.ID, it.ID)
		if err != nil || left != it.Quantity-active[it.ID] {
			t.Errorf("item %d: Redis left %d (%v), want %d", it.ID, left, err, it.Quantity-active[it.ID])
		}
	}
	if int64(len(holders)) != nActive {
		t.Errorf("Redis holders: got %d, want %d", len(holders), nActive)
	}
}

// The tests of this package do not run in parallel with each other: each
// sweeper expires every due order in the database, and a test's race must
// be between its own parties. Sweepers of other packages and services may
// still take an order now and then; the checks allow for it.

// A shopper's cancel and the sweepers race on the same orders the moment
// they fall due: each ends exactly one way and its unit goes back once.
func TestCancelAndExpiryRace(t *testing.T) {
	raceUntilBoth(t, newEnv(t), cancelRace, store.StatusCancelled)
}

// raceUntilBoth runs rounds of race until one ends some orders as status
// and some as EXPIRED, at most three. Which side wins depends on timing; a
// machine loaded by other tests can make every one of them late. The
// safety checks hold in every round; a round with both outcomes shows the
// race was run.
func raceUntilBoth(t *testing.T, e *env, race func(*testing.T, *env) map[string]int, status string) {
	t.Helper()
	for round := 1; ; round++ {
		counts := race(t, e)
		t.Logf("round %d outcomes: %v", round, counts)
		if counts[status] > 0 && counts[store.StatusExpired] > 0 {
			return
		}
		if round == 3 {
			t.Fatalf("no round with both %s and EXPIRED orders", status)
		}
	}
}

// cancelRace runs one round and returns how many orders ended each way.
func cancelRace(t *testing.T, e *env) map[string]int {
	t.Helper()
	ctx := testenv.Context(t)
	const n = 30
	s, evs := e.sale(t, time.Now(), n)
	deadline := time.Now().Add(300 * time.Millisecond)
	e.dueAt(t, ids(evs), deadline)

	start := make(chan struct{})
	var wg sync.WaitGroup
	want := make(map[uuid.UUID]string, n)
	var mu sync.Mutex
	for _, ev := range evs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tr, err := e.st.Cancel(ctx, ev.OrderID, ev.UserID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && tr.Changed:
				want[ev.OrderID] = store.StatusCancelled
			case errors.Is(err, store.ErrExpired):
				want[ev.OrderID] = store.StatusExpired
			default:
				t.Errorf("cancel %s: %+v %v", ev.OrderID, tr, err)
			}
			if err == nil {
				if _, err := relay.New(e.st, e.stk, quiet, metrics.New()).Drain(ctx, []uuid.UUID{ev.OrderID}); err != nil {
					t.Errorf("drain: %v", err)
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			sw := e.sweeper()
			for e.pending(t, s.ID) > 0 && ctx.Err() == nil {
				if _, err := sw.Sweep(ctx); err != nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}()
	}
	time.Sleep(time.Until(deadline))
	close(start)
	wg.Wait()
	counts := map[string]int{}
	for _, st := range want {
		counts[st]++
	}
	e.check(t, s, evs, want)

	// Releasing again, by the relay or directly, gives nothing more back.
	if _, err := relay.New(e.st, e.stk, quiet, metrics.New()).Drain(ctx, ids(evs)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ok, err := e.stk.Release(ctx, s.ID, ev.ItemID, ev.UserID, ev.OrderID.String()); ok || err != nil {
			t.Errorf("second release of %s: %v %v, want nothing", ev.OrderID, ok, err)
		}
	}
	if left, _ := e.stk.Left(ctx, s.ID, s.Items[0].ID); left != n {
		t.Errorf("Redis left after repeated releases: %d, want %d", left, n)
	}
	return counts
}

// Payments race the deadline and the sweepers: each order ends PAID or
// EXPIRED, never both; a PAID order keeps its unit; a payment that arrives
// after the deadline is refused even if no sweeper has run yet.
func TestPayAndExpiryRace(t *testing.T) {
	raceUntilBoth(t, newEnv(t), payRace, store.StatusPaid)
}

// payRace runs one round and returns how many orders ended each way.
func payRace(t *testing.T, e *env) map[string]int {
	t.Helper()
	ctx := testenv.Context(t)
	const n = 30
	const step = 20 * time.Millisecond
	s, evs := e.sale(t, time.Now(), n)
	deadline := time.Now().Add(n/2*step + 100*time.Millisecond).Truncate(time.Microsecond)
	e.dueAt(t, ids(evs), deadline)

	// Payment i is sent at deadline + (i - n/2) * step: half before, half
	// after. Sweepers run all along.
	want := make(map[uuid.UUID]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := e.sweeper()
			for {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Millisecond):
				}
				if _, err := sw.Sweep(ctx); err != nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}()
	}
	var payers sync.WaitGroup
	for i, ev := range evs {
		payers.Add(1)
		go func() {
			defer payers.Done()
			time.Sleep(time.Until(deadline.Add(time.Duration(i-n/2) * step)))
			sent := time.Now()
			tr, err := e.st.Pay(ctx, ev.OrderID, ev.UserID, fmt.Sprintf("race-%s", ev.OrderID))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && tr.Changed:
				want[ev.OrderID] = store.StatusPaid
				if sent.After(deadline) {
					t.Errorf("payment sent %s after the deadline was accepted", sent.Sub(deadline))
				}
			case errors.Is(err, store.ErrExpired):
				// Sent before the deadline, it may still arrive after it
				// on a loaded machine: that is the race, not a fault.
				want[ev.OrderID] = store.StatusExpired
			default:
				t.Errorf("pay %s: %+v %v", ev.OrderID, tr, err)
			}
		}()
	}
	payers.Wait()
	time.Sleep(50 * time.Millisecond) // let the sweepers take the last due orders
	close(stop)
	wg.Wait()
	if _, err := e.sweeper().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	e.check(t, s, evs, want)
	counts := map[string]int{}
	for _, st := range want {
		counts[st]++
	}
	return counts
}

// Several sweepers at once expire each order once: disjoint claims, sold
// decremented once per order, one outbox row each, each unit back once.
func TestConcurrentSweepers(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	s, evs := e.sale(t, time.Now(), 150, 150)
	deadline := time.Now().Add(300 * time.Millisecond)
	e.dueAt(t, ids(evs), deadline)
	mine := make(map[uuid.UUID]bool, len(evs))
	for _, ev := range evs {
		mine[ev.OrderID] = true
	}
	const sweepers = 4
	got := make([][]uuid.UUID, sweepers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Spin from before the deadline until every order of the sale
			// has ended (some may be another service's to end).
			for ctx.Err() == nil {
				res, err := e.st.ExpireDue(ctx, 25)
				if err != nil {
					t.Error(err)
					return
				}
				for _, id := range res.IDs {
					if mine[id] {
						got[i] = append(got[i], id)
					}
				}
				if len(res.IDs) == 0 {
					if time.Now().After(deadline) && e.pending(t, s.ID) == 0 {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	seen := map[uuid.UUID]int{}
	for i, g := range got {
		t.Logf("sweeper %d expired %d orders", i, len(g))
		for _, id := range g {
			seen[id]++
		}
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("order %s expired by %d sweepers", id, c)
		}
	}
	// Sweepers of other tests may have taken some; never one twice.
	if len(seen) > len(evs) {
		t.Errorf("expired %d orders, the sale has %d", len(seen), len(evs))
	}
	want := make(map[uuid.UUID]string, len(evs))
	for _, ev := range evs {
		want[ev.OrderID] = store.StatusExpired
	}
	var expiredRows int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE order_id = ANY($1) AND reason = 'EXPIRED'`, ids(evs)).Scan(&expiredRows); err != nil {
		t.Fatal(err)
	}
	if expiredRows != len(evs) {
		t.Errorf("EXPIRED outbox rows: got %d, want %d", expiredRows, len(evs))
	}
	e.check(t, s, evs, want)
}

// A crash between the expiry commit and the Redis release: the sweeper's
// own release fails (its Redis is gone, as if the process died right after
// the commit), the units stay held, and a relay started later (a restarted
// service) gives each back exactly once.
func TestCrashBetweenExpiryAndRelease(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t)
	s, evs := e.sale(t, time.Now().Add(-ttl-time.Second), 5)

	dead, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	m := metrics.New()
	crashing := expiry.New(e.st, relay.New(e.st, stock.New(dead), quiet, m), quiet, m, 1000)
	for {
		o, err := e.st.GetOrder(ctx, evs[len(evs)-1].OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == store.StatusExpired {
			break
		}
		if _, err := crashing.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Committed: EXPIRED, sold back, outbox rows queued; Redis untouched by
	// the crashed sweeper.
	after, err := e.st.GetSale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Items[0].Sold != 0 {
		t.Errorf("sold after the expiry commit: %d, want 0", after.Items[0].Sold)
	}
	want := make(map[uuid.UUID]string, len(evs))
	for _, ev := range evs {
		want[ev.OrderID] = store.StatusExpired
	}
	// The restart: a fresh relay drains the outbox (check drains and waits).
	e.check(t, s, evs, want)
	// And again: nothing more comes back.
	n, err := relay.New(e.st, e.stk, quiet, metrics.New()).Drain(ctx, ids(evs))
	if err != nil || n != 0 {
		t.Errorf("second drain: marked %d, %v; want 0", n, err)
	}
	if left, _ := e.stk.Left(ctx, s.ID, s.Items[0].ID); left != 5 {
		t.Errorf("Redis left: %d, want 5", left)
	}
}

// An expiry pass whose COMMIT PostgreSQL refuses gives nothing back: the
// orders stay PENDING, sold stays, Redis keeps their units held. The
// source articles' expiry job released the stock inside its transaction
// (DESIGN.md), so a refused commit left PENDING orders, still payable,
// whose units were on sale again. Once commits go through, the next pass
// expires them and each unit comes back once.
func TestExpiryWhoseCommitFails(t *testing.T) {
	t.Parallel()
	e := ownEnv(t)
	ctx := testenv.Context(t)
	s, evs := e.sale(t, time.Now().Add(-ttl-time.Second), 4)
	want := make(map[uuid.UUID]string, len(evs))
	for _, ev := range evs {
		want[ev.OrderID] = store.StatusPending
	}

	lift := testdb.FailCommits(t, e.pool, "INSERT", "stock_release")
	if n, err := e.sweeper().Sweep(ctx); err == nil || n != 0 {
		t.Errorf("sweep with its commit refused: expired %d, err %v; want 0 and the error", n, err)
	}
	e.check(t, s, evs, want)
	lift()

	if n, err := e.sweeper().Sweep(ctx); err != nil || n != len(evs) {
		t.Fatalf("sweep: expired %d, err %v; want %d", n, err, len(evs))
	}
	for id := range want {
		want[id] = store.StatusExpired
	}
	e.check(t, s, evs, want)
}

// Run stops when its context ends and returns nil.
func TestRunStops(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(testenv.Context(t))
	done := make(chan error, 1)
	go func() { done <- e.sweeper().Run(ctx, 10*time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop")
	}
}
