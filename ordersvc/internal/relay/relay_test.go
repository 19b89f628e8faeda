package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func redis(t *testing.T) rueidis.Client {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// fixture: a sale of one unit, Redis loaded with 3 and reserved by u1..u3,
// PostgreSQL accepting u1 and rejecting u2 and u3 (two outbox rows).
// beforeRows runs before the outbox rows exist: other relays share the
// database (parallel tests, other packages), and whichever one drains a row
// must find the Redis state the test means.
func fixture(t *testing.T, st *store.Store, stk *stock.Store, beforeRows func(store.Sale, []event.OrderPlaced)) (store.Sale, []event.OrderPlaced) {
	t.Helper()
	ctx := testenv.Context(t)
	s := testdb.Sale(t, st, 1)
	item := s.Items[0].ID
	if err := stk.Load(ctx, s.ID, []stock.ItemStock{{ItemID: item, Left: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	evs := reserve(t, stk, s.ID, item, false)
	if beforeRows != nil {
		beforeRows(s, evs)
	}
	if _, err := st.PersistBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	return s, evs
}

// reserve reserves a unit of item for each of u1, u2 and u3 (with the
// admission tokens tok-u1... when admitted) and returns their events.
func reserve(t *testing.T, stk *stock.Store, saleID, item int64, admitted bool) []event.OrderPlaced {
	t.Helper()
	var evs []event.OrderPlaced
	for _, u := range []string{"u1", "u2", "u3"} {
		e := event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: saleID, ItemID: item, UserID: u, PlacedAt: time.Now()}
		token := ""
		if admitted {
			token = "tok-" + u
		}
		if _, err := stk.ReserveAdmitted(testenv.Context(t), saleID, item, u, e.OrderID.String(), token); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

// holdRow claims the outbox row of id in a transaction of its own, as
// another relay's pass would; false when another test's relay released it
// first.
func holdRow(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (pgx.Tx, bool) {
	t.Helper()
	ctx := testenv.Context(t)
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM stock_release WHERE order_id = $1 AND released_at IS NULL FOR UPDATE) l`, id).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held == 0 {
		_ = other.Rollback(ctx)
	}
	return other, held == 1
}

func outcomes(t *testing.T, st *store.Store, ids ...uuid.UUID) map[uuid.UUID]string {
	t.Helper()
	got := map[uuid.UUID]string{}
	for _, id := range ids {
		got[id] = ""
	}
	_, _, _, err := st.DrainReleases(testenv.Context(t), ids, 100, store.Cursor{}, func(_ context.Context, rows []store.PendingRelease) []string {
		for _, r := range rows {
			got[r.OrderID] = "pending"
		}
		return nil // leave them as they are
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// released tells whether the outbox row of id has been released.
func released(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(testenv.Context(t), `SELECT count(*) FROM stock_release WHERE order_id = $1 AND released_at IS NOT NULL`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Relays draining at once release each row once. These rows were refused
// for lack of stock and return no unit (Drop);
// TestDrainConcurrentRelaysReturnEachUnitOnce drains rows that do.
func TestDrainConcurrentRelays(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	s, evs := fixture(t, st, stk, nil)
	rejected := []uuid.UUID{evs[1].OrderID, evs[2].OrderID}

	m := metrics.New()
	var wg sync.WaitGroup
	totals := make([]int, 4)
	for i := range totals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := relay.New(st, stk, quiet, m).Drain(ctx, rejected)
			if err != nil {
				t.Error(err)
			}
			totals[i] = n
		}()
	}
	wg.Wait()
	// Relays of other tests may take rows too, never the same row twice.
	if sum := totals[0] + totals[1] + totals[2] + totals[3]; sum > 2 {
		t.Errorf("rows marked by the relays: got %d, want at most 2", sum)
	}
	testdb.WaitReleased(t, pool, rejected...)
	left, err := stk.Left(ctx, s.ID, s.Items[0].ID)
	// The fixture's Redis held 3 units for PostgreSQL's 1: the two orders
	// refused for lack of stock free their shoppers and return nothing.
	if err != nil || left != 0 {
		t.Errorf("stock left: got %d, %v; want 0 (no unit PostgreSQL never had)", left, err)
	}
	holders, err := stk.Holders(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"u1": evs[0].OrderID.String()}, holders); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
	var released int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE order_id = ANY($1) AND outcome = 'released'`, rejected).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if released != 2 {
		t.Errorf("rows with outcome released: got %d, want 2", released)
	}
}

// Relays draining at once give each unit back once, on the path where a
// release returns one: rows of cancelled orders (Release) and of
// reservations the order service abandoned (WriteOff), each INCR the
// item's stock in Redis. TestDrainConcurrentRelays drains rows refused for
// lack of stock, which return nothing (Drop), so a unit given back twice
// could not show there. Here one item's rows are more than two batches'
// worth (BatchLimit each), so the relays' SKIP LOCKED claims interleave
// batch after batch; Redis must end with the item's quantity less its
// active orders.
// A row released twice (a claim handed out to two passes, or a release
// not keyed by order id) would leave more, a row marked done without its
// unit back (or released by the wrong path) less; a row claimed by two
// passes also ends not_held (the second release finds no holder).
func TestDrainConcurrentRelaysReturnEachUnitOnce(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	const (
		quantity  = 3 * relay.BatchLimit
		placed    = relay.BatchLimit + 100 // PENDING orders, reserved in Redis
		cancelled = relay.BatchLimit - 100 // of them
		abandoned = relay.BatchLimit + 200 // reservations no order backs
	)
	s := testdb.Sale(t, st, quantity)
	item := s.Items[0].ID
	testdb.Load(t, st, stk, s.ID) // Redis: quantity left, no holder
	users := make([]string, placed)
	for i := range users {
		users[i] = fmt.Sprint("p", i)
	}
	orders := testdb.Orders(t, st, stk, s, 0, time.Now(), users...)
	ids := make([]uuid.UUID, 0, cancelled+abandoned)
	var g errgroup.Group
	g.SetLimit(8)
	for _, e := range orders[:cancelled] {
		ids = append(ids, e.OrderID)
		g.Go(func() error {
			tr, err := st.Cancel(ctx, e.OrderID, e.UserID)
			if err == nil && !tr.Changed {
				err = fmt.Errorf("cancel of %s changed nothing", e.OrderID)
			}
			return err
		})
	}
	gone := make([]store.Abandoned, abandoned)
	for i := range gone {
		gone[i] = store.Abandoned{OrderID: uuid.Must(uuid.NewV7()), SaleID: s.ID, ItemID: item, UserID: fmt.Sprint("a", i), PlacedAt: time.Now()}
		g.Go(func() error {
			_, err := stk.Reserve(ctx, s.ID, item, gone[i].UserID, gone[i].OrderID.String())
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	written, err := st.Abandon(ctx, gone)
	if err != nil || len(written) != abandoned {
		t.Fatalf("abandon %d reservations: wrote %d, %v", abandoned, len(written), err)
	}
	ids = append(ids, written...)

	// Relays of other tests may take some of these rows too (Run drains the
	// whole outbox); they release them by the same script, never a row twice.
	m := metrics.New()
	start := make(chan struct{})
	totals := make([]int, 4)
	var wg sync.WaitGroup
	for i := range totals {
		wg.Go(func() {
			<-start
			n, err := relay.New(st, stk, quiet, m).Drain(ctx, ids)
			if err != nil {
				t.Error(err)
			}
			totals[i] = n
		})
	}
	close(start)
	wg.Wait()
	t.Logf("rows marked per relay: %v of %d", totals, len(ids))
	if sum := totals[0] + totals[1] + totals[2] + totals[3]; sum > len(ids) {
		t.Errorf("rows marked by the relays: got %d, want at most %d", sum, len(ids))
	}
	testdb.WaitReleased(t, pool, ids...)

	// Every row found its order holding the unit, and gave it back.
	got := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT outcome, count(*) FROM stock_release WHERE order_id = ANY($1) GROUP BY outcome`, ids)
	if err != nil {
		t.Fatal(err)
	}
	var outcome string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&outcome, &n}, func() error { got[outcome] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{store.OutcomeReleased: len(ids)}, got); diff != "" {
		t.Errorf("outcomes of the outbox rows (-want +got):\n%s", diff)
	}
	var active int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND status IN ('PENDING', 'PAID')`, s.ID).Scan(&active); err != nil {
		t.Fatal(err)
	}
	if active != placed-cancelled {
		t.Fatalf("active orders: %d, want %d", active, placed-cancelled)
	}
	left, err := stk.Left(ctx, s.ID, item)
	if err != nil || left != int64(quantity-active) {
		t.Errorf("stock left: got %d, %v; want %d (quantity %d less %d active orders: each of %d units back once)",
			left, err, quantity-active, quantity, active, len(ids))
	}
	// Only the active orders still hold their shoppers.
	holders, err := stk.Holders(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, e := range orders[cancelled:] {
		want[e.UserID] = e.OrderID.String()
	}
	if diff := cmp.Diff(want, holders); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
}

func TestDrainOutcomes(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	rc := redis(t)
	st, stk := store.New(pool), stock.New(rc)

	tests := []struct {
		name  string
		setup func(s store.Sale, rejected event.OrderPlaced) // Redis state before the outbox row exists
		want  string
	}{
		{"held unit goes back", func(store.Sale, event.OrderPlaced) {}, store.OutcomeReleased},
		{"already released", func(s store.Sale, e event.OrderPlaced) {
			if _, err := stk.Release(ctx, s.ID, e.ItemID, e.UserID, e.OrderID.String()); err != nil {
				t.Fatal(err)
			}
		}, store.OutcomeNotHeld},
		{"stock key lost", func(s store.Sale, e event.OrderPlaced) {
			if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(s.ID, e.ItemID)).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}, store.OutcomeStockNotLoaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, evs := fixture(t, st, stk, func(s store.Sale, evs []event.OrderPlaced) { tt.setup(s, evs[1]) })
			// Another test's relay (Run drains every queued row) may hold the
			// row when this pass looks: SKIP LOCKED passes it by, and if that
			// relay is cancelled mid-row nobody takes it. Drain until it goes.
			r := relay.New(st, stk, quiet, metrics.New())
			deadline := time.Now().Add(10 * time.Second)
			for !released(t, pool, evs[1].OrderID) {
				if time.Now().After(deadline) {
					t.Fatal("outbox row not released after 10s")
				}
				if _, err := r.Drain(ctx, []uuid.UUID{evs[1].OrderID}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var got string
			if err := pool.QueryRow(ctx, `SELECT outcome FROM stock_release WHERE order_id = $1 AND released_at IS NOT NULL`, evs[1].OrderID).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("outcome: got %q, want %q", got, tt.want)
			}
		})
	}
}

// ReleaseNow (a cancel returning its unit before it answers) waits for a
// row another pass holds, instead of skipping it and returning with the
// unit not back: here the other pass gives the row up unmarked (its
// release failed), and the waiting call releases it. Held for longer than
// its wait, the row is left queued and the error says why.
func TestReleaseNowWaitsForAnotherPass(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	r := relay.New(st, stk, quiet, metrics.New())
	type result struct {
		n   int
		err error
	}
	for attempt := 1; ; attempt++ {
		_, evs := fixture(t, st, stk, nil)
		short, long := evs[1].OrderID, evs[2].OrderID
		otherShort, okShort := holdRow(t, pool, short)
		otherLong, okLong := holdRow(t, pool, long)
		if !okShort || !okLong {
			if okShort {
				_ = otherShort.Rollback(ctx)
			}
			if okLong {
				_ = otherLong.Rollback(ctx)
			}
			if attempt == 5 {
				t.Fatal("other relays released every fixture's rows first")
			}
			continue
		}
		// Held past its wait: left queued, ErrLockWait.
		if n, err := r.ReleaseNow(ctx, []uuid.UUID{short}, 100*time.Millisecond); n != 0 || !errors.Is(err, store.ErrLockWait) {
			t.Errorf("ReleaseNow of a row held past its wait: %d, %v; want 0 and ErrLockWait", n, err)
		}
		_ = otherShort.Rollback(ctx)

		done := make(chan result, 1)
		go func() {
			n, err := r.ReleaseNow(ctx, []uuid.UUID{long}, 10*time.Second)
			done <- result{n, err}
		}()
		select {
		case res := <-done:
			_ = otherLong.Rollback(ctx)
			t.Fatalf("ReleaseNow returned %d, %v while another pass held the row; want it to wait", res.n, res.err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := otherLong.Rollback(ctx); err != nil { // the other pass ends, its release failed
			t.Fatal(err)
		}
		if res := <-done; res.err != nil || res.n != 1 {
			t.Errorf("ReleaseNow after the other pass gave the row up: got %d, %v; want 1, nil", res.n, res.err)
		}
		return
	}
}

// ReleaseNow answers by its caller's deadline (a cancel's answer must beat
// the gateway's proxy timeout) even when the release takes longer, here
// waiting for a row another pass holds, and the release still happens in
// the background once it can.
func TestReleaseNowAnswersByTheCallersDeadline(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	r := relay.New(st, stk, quiet, metrics.New())
	for attempt := 1; ; attempt++ {
		_, evs := fixture(t, st, stk, nil)
		id := evs[1].OrderID
		other, held := holdRow(t, pool, id)
		if !held { // another test's relay released it first
			if attempt == 5 {
				t.Fatal("other relays released every fixture's rows first")
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		n, err := r.ReleaseNow(cctx, []uuid.UUID{id}, 10*time.Second)
		took := time.Since(start)
		cancel()
		if n != 0 || !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
			t.Errorf("ReleaseNow past its caller's 200 ms deadline: %d, %v after %v; want 0 and the deadline's error at once", n, err, took)
		}
		if err := other.Rollback(ctx); err != nil { // the other pass ends without releasing
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = r.Wait(wctx) // what a shutdown waits for
		cancel()
		if err != nil {
			t.Errorf("Wait for the background release: %v", err)
		}
		testdb.WaitReleased(t, pool, id) // by the background release, or another relay
		holders, err := stk.Holders(ctx, evs[1].SaleID)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := holders[evs[1].UserID]; ok {
			t.Errorf("%s still holds a unit after the release", evs[1].UserID)
		}
		return
	}
}

// With Redis unreachable a pass marks nothing and reports it; the rows stay
// queued and a later pass (Run) releases them, once.
func TestDrainRedisDown(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	dead, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	deadRelay := relay.New(st, stock.New(dead), quiet, metrics.New())

	// The outbox is shared: a relay of another package's test, running at
	// the same moment, may claim these rows first (SKIP LOCKED) and release
	// them. Then this pass rightly finds nothing, so it is tried again on
	// new rows. A pass that swallowed Redis's error answers (0, nil) every
	// time and fails.
	var s store.Sale
	var ids []uuid.UUID
	for attempt := 1; ; attempt++ {
		var evs []event.OrderPlaced
		s, evs = fixture(t, st, stk, nil)
		ids = []uuid.UUID{evs[1].OrderID, evs[2].OrderID}
		n, err := deadRelay.Drain(ctx, ids)
		if err != nil && n == 0 {
			break
		}
		if err != nil || n != 0 || attempt == 5 {
			t.Fatalf("drain with Redis down (attempt %d): got %d, %v; want 0 and an error", attempt, n, err)
		}
		t.Logf("attempt %d: another relay took the rows first; again with new ones", attempt)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.New(st, stk, quiet, metrics.New()).Run(rctx, 20*time.Millisecond) }()
	testdb.WaitReleased(t, pool, ids...)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	left, err := stk.Left(ctx, s.ID, s.Items[0].ID)
	if err != nil || left != 0 {
		t.Errorf("stock left: got %d, %v; want 0 (refused for lack of stock: nothing returned)", left, err)
	}
	if diff := cmp.Diff(map[uuid.UUID]string{ids[0]: "", ids[1]: ""}, outcomes(t, st, ids...)); diff != "" {
		t.Errorf("rows still queued (-want +got):\n%s", diff)
	}
}

// A release that meets a sale's stock paused (a sharded repair deletes the
// stock keys while it works) waits for the copy instead of being marked
// done: the repair kept the order's holder, so a release marked
// stock_not_loaded would have left it there (and a returned unit, lost).
func TestDrainWaitsWhileTheStockIsPaused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	rc := redis(t)
	st, stk := store.New(pool), stock.New(rc)
	var key string
	s, evs := fixture(t, st, stk, func(s store.Sale, evs []event.OrderPlaced) {
		// As pause.lua leaves it: the key gone, its marker there.
		key = stock.StockKey(s.ID, evs[1].ItemID)
		for _, c := range []rueidis.Completed{rc.B().Del().Key(key).Build(), rc.B().Set().Key(stock.PauseMarker(key)).Value("1").Px(time.Minute).Build()} {
			if err := rc.Do(ctx, c).Error(); err != nil {
				t.Fatal(err)
			}
		}
	})
	r := relay.New(st, stk, quiet, metrics.New())
	if _, err := r.Drain(ctx, []uuid.UUID{evs[1].OrderID}); err == nil {
		t.Error("Drain with the stock paused reported every row done")
	}
	if released(t, pool, evs[1].OrderID) {
		t.Fatal("outbox row marked done while the sale's stock was paused; its unit is lost")
	}
	// The repair writes its copy: the stock as it was, the holder kept.
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Do(context.Background(), rc.B().Del().Key(stock.PauseMarker(key)).Build()) })
	deadline := time.Now().Add(10 * time.Second)
	for !released(t, pool, evs[1].OrderID) {
		if time.Now().After(deadline) {
			t.Fatal("outbox row not released 10 s after the stock came back")
		}
		if _, err := r.Drain(ctx, []uuid.UUID{evs[1].OrderID}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// PostgreSQL refused it for lack of stock: the shopper is freed, no unit
	// comes back (the relay drops the holder).
	err := rc.Do(ctx, rc.B().Hget().Key(stock.HoldersKey(s.ID)).Field(evs[1].UserID).Build()).Error()
	if !rueidis.IsRedisNil(err) {
		t.Errorf("holder of %s after the release: %v, want none", evs[1].UserID, err)
	}
}

// A drain holds a connection of the pool for its transaction, and the
// releases inside it read the sale's shard count: the drain now learns it
// from its own claim, so a drain needs one connection. Reading it from the
// pool, four drains at once (relay, sweeper, consumer, a cancel) held the
// default pool's four connections and each waited for a fifth until the
// lookup's timeout: nothing in the order service reached PostgreSQL
// meanwhile, and every release failed.
func TestDrainNeedsOneConnection(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	cfg, err := pgxpool.ParseConfig(testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	st, rc := store.New(pool), redis(t)
	narrow := store.New(one)
	stk := stock.New(rc, stock.WithShards(narrow.ShardsOf(2*time.Second)))
	// Relays of other tests share the database and may drain the rows
	// first: a fixture whose rows this drain did not claim is tried again.
	for range 5 {
		_, evs := fixture(t, st, stock.New(rc), nil)
		rejected := []uuid.UUID{evs[1].OrderID, evs[2].OrderID}
		n, err := relay.New(narrow, stk, quiet, metrics.New()).Drain(ctx, rejected)
		if err != nil {
			t.Fatalf("drain over a one-connection pool: %v (a shard lookup waited for a second connection)", err)
		}
		if n == 0 {
			continue
		}
		return
	}
	t.Skip("other relays drained every fixture's rows first")
}

// A block of rows whose releases keep failing (a Redis node down for one
// sale's keys) held back every newer row: each pass claimed the same
// oldest rows, saw them fail and stopped. A pass now goes on past them.
func TestFailingRowsDoNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	rc := redis(t)
	st, stk := store.New(pool), stock.New(rc)

	// A sale of one unit whose other BatchLimit orders PostgreSQL refused:
	// as many outbox rows, older than the healthy sale's, whose releases
	// fail (the sale's holders key is not a hash: WRONGTYPE).
	bad := testdb.Sale(t, st, 1)
	holders := fmt.Sprintf("{fs:%d}:holders", bad.ID)
	if err := rc.Do(ctx, rc.B().Set().Key(holders).Value("not a hash").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rc.Do(ctx, rc.B().Del().Key(holders).Build()).Error()
		_, _ = pool.Exec(ctx, `UPDATE stock_release SET released_at = now(), outcome = 'not_held' WHERE sale_id = $1 AND released_at IS NULL`, bad.ID)
	})
	evs := make([]event.OrderPlaced, relay.BatchLimit+1)
	for i := range evs {
		evs[i] = event.OrderPlaced{Version: event.Version, OrderID: uuid.New(), SaleID: bad.ID, ItemID: bad.Items[0].ID,
			UserID: fmt.Sprint("u", i), PlacedAt: time.Now()}
	}
	if _, err := st.PersistBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}

	badIDs := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		badIDs[i] = e.OrderID
	}

	// A pass over these rows only (the whole outbox's passes walk the same
	// way), so what it marked is told by what Drain returns: the healthy
	// sale's two rows, after the failing ones. The relays of other tests
	// may release those two first (this pass then waits, and skips them):
	// then it is tried again with new ones.
	for attempt := 1; ; attempt++ {
		_, good := fixture(t, st, stk, nil)
		n, err := relay.New(st, stk, quiet, metrics.New()).Drain(ctx, append(badIDs, good[1].OrderID, good[2].OrderID))
		if err == nil {
			t.Errorf("a pass with %d failing releases reported no error", len(badIDs))
		}
		if n == 2 {
			return
		}
		if attempt == 5 {
			t.Fatalf("the pass marked %d of the 2 rows behind %d failing ones, in %d attempts", n, len(badIDs), attempt)
		}
		testdb.WaitReleased(t, pool, good[1].OrderID, good[2].OrderID)
		t.Logf("attempt %d: another relay released %d of the rows first; again with new ones", attempt, 2-n)
	}
}

// The relay gives an order that never came to exist its shopper's
// admission back with its unit, finding the token by the order id (it
// knows none): here one refused by PostgreSQL for lack of stock and one
// the order service abandoned. The placed order keeps its admission used.
// Before, the relay kept both tokens spent: an admission lost for good to
// a purchase that bought nothing.
func TestDrainGivesBackTheAdmissionOfOrdersNeverPlaced(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st, stk := store.New(pool), stock.New(redis(t))
	s := testdb.Sale(t, st, 1)
	item := s.Items[0].ID
	if err := stk.Load(ctx, s.ID, []stock.ItemStock{{ItemID: item, Left: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	evs := reserve(t, stk, s.ID, item, true)
	// u1's order takes PostgreSQL's one unit and u2's is refused; u3's never
	// reached the topic, and the order service writes it off.
	if _, err := st.PersistBatch(ctx, evs[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Abandon(ctx, []store.Abandoned{{OrderID: evs[2].OrderID, SaleID: s.ID, ItemID: item, UserID: "u3", PlacedAt: evs[2].PlacedAt}}); err != nil {
		t.Fatal(err)
	}
	written := []uuid.UUID{evs[1].OrderID, evs[2].OrderID}
	if _, err := relay.New(st, stk, quiet, metrics.New()).Drain(ctx, written); err != nil {
		t.Fatal(err)
	}
	testdb.WaitReleased(t, pool, written...) // or another test's relay did
	for u, want := range map[string]bool{"u1": true, "u2": false, "u3": false} {
		spent, holding, err := stk.AdmissionSpent(ctx, s.ID, u, "tok-"+u)
		if err != nil {
			t.Fatal(err)
		}
		if spent != want || holding != want {
			t.Errorf("%s: admission spent %v, holding a unit %v; want %v and %v", u, spent, holding, want, want)
		}
	}
}

func TestNeverPlaced(t *testing.T) {
	for reason, want := range map[string]bool{
		store.ReasonRejected: true, store.ReasonRejectedSoldOut: true, store.ReasonAbandoned: true, event.RejectPublishFailed: true,
		"EXPIRED": false, "CANCELLED": false,
	} {
		if got := (store.PendingRelease{Reason: reason}).NeverPlaced(); got != want {
			t.Errorf("NeverPlaced for %s: %v, want %v", reason, got, want)
		}
	}
}

// A relay pass whose COMMIT PostgreSQL refuses has given its units back in
// Redis already (the release runs inside the pass's transaction, before
// the outcome is recorded): the window between the release and its record
// that a crash also hits. The rows stay pending, so the next pass releases
// them again, and the release, keyed by order id, gives nothing twice.
func TestReleaseWhoseRecordFails(t *testing.T) {
	t.Parallel()
	pool, rc := testdb.Own(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	s := testdb.Sale(t, st, 3)
	testdb.Load(t, st, stk, s.ID)
	evs := testdb.Orders(t, st, stk, s, 0, time.Now(), "u1", "u2", "u3")
	ids := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		ids[i] = e.OrderID
		if _, err := st.Cancel(ctx, e.OrderID, e.UserID); err != nil { // an outbox row each, nothing released
			t.Fatal(err)
		}
	}
	recorded := func() map[uuid.UUID]string {
		t.Helper()
		got := map[uuid.UUID]string{}
		rows, err := pool.Query(ctx, `SELECT order_id, coalesce(outcome, 'pending') FROM stock_release WHERE order_id = ANY($1)`, ids)
		if err != nil {
			t.Fatal(err)
		}
		var id uuid.UUID
		var outcome string
		if _, err := pgx.ForEachRow(rows, []any{&id, &outcome}, func() error { got[id] = outcome; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	left := func(want int64, when string) {
		t.Helper()
		if got, err := stk.Left(ctx, s.ID, s.Items[0].ID); err != nil || got != want {
			t.Errorf("%s: Redis left %d (%v), want %d", when, got, err, want)
		}
	}
	left(0, "before the release")

	lift := testdb.FailCommits(t, pool, "UPDATE", "stock_release")
	rl := relay.New(st, stk, quiet, metrics.New())
	if n, err := rl.Drain(ctx, ids); err == nil || n != 0 {
		t.Errorf("drain with its commit refused: marked %d, err %v; want 0 and the error", n, err)
	}
	left(3, "after the refused record")
	pending := map[uuid.UUID]string{ids[0]: "pending", ids[1]: "pending", ids[2]: "pending"}
	if diff := cmp.Diff(pending, recorded()); diff != "" {
		t.Errorf("outcomes after the refused record (-want +got):\n%s", diff)
	}
	lift()

	if n, err := rl.Drain(ctx, ids); err != nil || n != 3 {
		t.Fatalf("drain: marked %d, err %v; want 3", n, err)
	}
	left(3, "after the second release")
	notHeld := map[uuid.UUID]string{ids[0]: store.OutcomeNotHeld, ids[1]: store.OutcomeNotHeld, ids[2]: store.OutcomeNotHeld}
	if diff := cmp.Diff(notHeld, recorded()); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if holders, err := stk.Holders(ctx, s.ID); err != nil || len(holders) != 0 {
		t.Errorf("holders: %v (%v), want none", holders, err)
	}
}
