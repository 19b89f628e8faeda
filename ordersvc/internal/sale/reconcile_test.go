package sale_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/accepted"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// recFixture is a sale whose orders u0..u(n-1) are persisted and held in
// Redis, consistent, before a test breaks something.
type recFixture struct {
	t    *testing.T
	ctx  context.Context
	rc   rueidis.Client
	st   *store.Store
	stk  *stock.Store
	sale store.Sale
	evs  []event.OrderPlaced
}

func newRecFixture(t *testing.T, rc rueidis.Client, st *store.Store, quantities []int64, orders []int) *recFixture {
	t.Helper()
	f := &recFixture{t: t, ctx: testenv.Context(t), rc: rc, st: st, stk: stock.New(rc)}
	f.sale = testdb.Sale(t, st, quantities...)
	testdb.Load(t, st, f.stk, f.sale.ID)
	for i, item := range orders {
		f.evs = append(f.evs, testdb.Orders(t, st, f.stk, f.sale, item, time.Now(), []string{"u0", "u1", "u2", "u3"}[i])...)
	}
	return f
}

// reserve takes a unit in Redis only, as a gateway does before Kafka.
func (f *recFixture) reserve(item int, user string) string {
	f.t.Helper()
	id := uuid.NewString()
	if _, err := f.stk.Reserve(f.ctx, f.sale.ID, f.sale.Items[item].ID, user, id); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// inFlight is a reservation the gateway answered 202 for: accepted, in
// Kafka, not persisted yet.
func (f *recFixture) inFlight(item int, user string) string {
	f.t.Helper()
	id := f.reserve(item, user)
	if err := accepted.Record(f.ctx, f.rc, id, user); err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *recFixture) del(keys ...string) {
	f.t.Helper()
	if err := f.rc.Do(f.ctx, f.rc.B().Del().Key(keys...).Build()).Error(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *recFixture) stockKeys() []string {
	var keys []string
	for _, it := range f.sale.Items {
		keys = append(keys, stock.StockKey(f.sale.ID, it.ID))
	}
	return keys
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.RedisAddr())
	pool := testdb.Pool(t)
	st := store.New(pool)
	rc := testenv.RedisClient(t, testenv.RedisAddr())

	type holders = map[string]string
	tests := []struct {
		name       string
		quantities []int64
		orders     []int // item index per persisted order, users u0, u1, ...
		// breakIt injects the fault; it returns Redis holders that must
		// survive the repair besides the persisted orders' (user -> order).
		breakIt  func(f *recFixture) holders
		wantDiff []string // kinds, sorted
		wantIn   reconcileCounts
		wantLeft []int64 // per item after the repair
		wantAttr string
		// requeued: the order whose release the read-only reconcile runs
		// again (a stale holder); the relay's release then heals the
		// sale before the repair, which finds nothing left to write.
		requeued func(f *recFixture) uuid.UUID
	}{
		{
			name: "consistent sale is clean", quantities: []int64{5}, orders: []int{0, 0},
			breakIt:  func(*recFixture) holders { return nil },
			wantLeft: []int64{3},
		},
		{
			name: "an order in flight is no difference", quantities: []int64{5}, orders: []int{0, 0},
			breakIt:  func(f *recFixture) holders { return holders{"fly": f.inFlight(0, "fly")} },
			wantIn:   reconcileCounts{inFlight: 1},
			wantLeft: []int64{2}, wantAttr: sale.AttributionExact,
		},
		{
			name: "leaked reservation is dropped and its unit returned", quantities: []int64{5}, orders: []int{0, 0},
			breakIt:  func(f *recFixture) holders { f.reserve(0, "leak"); return nil },
			wantDiff: []string{sale.DiffHolderLeaked, sale.DiffStockMismatch},
			wantIn:   reconcileCounts{leaked: 1},
			wantLeft: []int64{3},
		},
		{
			name: "in flight kept, leaked dropped", quantities: []int64{5}, orders: []int{0, 0},
			breakIt: func(f *recFixture) holders {
				f.reserve(0, "leak")
				return holders{"fly": f.inFlight(0, "fly")}
			},
			wantDiff: []string{sale.DiffHolderLeaked, sale.DiffStockMismatch},
			wantIn:   reconcileCounts{inFlight: 1, leaked: 1},
			wantLeft: []int64{2}, wantAttr: sale.AttributionExact,
		},
		{
			name: "an accepted record of another user does not make a holder in flight", quantities: []int64{5}, orders: []int{0},
			breakIt: func(f *recFixture) holders {
				id := f.reserve(0, "thief")
				if err := accepted.Record(f.ctx, f.rc, id, "someone-else"); err != nil {
					f.t.Fatal(err)
				}
				return nil
			},
			wantDiff: []string{sale.DiffHolderLeaked, sale.DiffStockMismatch},
			wantIn:   reconcileCounts{leaked: 1},
			wantLeft: []int64{4},
		},
		{
			name: "Redis lost every key of the sale", quantities: []int64{5, 2}, orders: []int{0, 1},
			breakIt: func(f *recFixture) holders {
				f.del(append(f.stockKeys(), stock.HoldersKey(f.sale.ID))...)
				return nil
			},
			wantDiff: []string{sale.DiffHolderMissing, sale.DiffHolderMissing, sale.DiffStockNotLoaded, sale.DiffStockNotLoaded},
			wantLeft: []int64{4, 1},
		},
		{
			name: "stock keys lost, holders kept, one in flight", quantities: []int64{5}, orders: []int{0, 0},
			breakIt: func(f *recFixture) holders {
				fly := f.inFlight(0, "fly")
				f.del(f.stockKeys()...)
				return holders{"fly": fly}
			},
			wantDiff: []string{sale.DiffStockNotLoaded},
			wantIn:   reconcileCounts{inFlight: 1},
			wantLeft: []int64{2}, wantAttr: sale.AttributionExact,
		},
		{
			name: "two items, in flight placed by the shortfall", quantities: []int64{3, 3}, orders: []int{0},
			breakIt: func(f *recFixture) holders {
				fly := f.inFlight(1, "fly")
				f.del(stock.HoldersKey(f.sale.ID)) // and the holders gone: only the persisted one comes back
				f.reserveHolder("fly", fly)
				return holders{"fly": fly}
			},
			wantDiff: []string{sale.DiffHolderMissing},
			wantIn:   reconcileCounts{inFlight: 1},
			wantLeft: []int64{2, 2}, wantAttr: sale.AttributionExact,
		},
		{
			name: "holder of a cancelled order whose release is done", quantities: []int64{5}, orders: []int{0, 0},
			breakIt: func(f *recFixture) holders {
				// u1 cancels, the unit goes back, then a bug puts the holder
				// and its unit back in Redis.
				e := f.evs[1]
				if _, err := f.st.Cancel(f.ctx, e.OrderID, e.UserID); err != nil {
					f.t.Fatal(err)
				}
				f.drain(e.OrderID)
				if _, err := f.stk.Reserve(f.ctx, f.sale.ID, e.ItemID, e.UserID, e.OrderID.String()); err != nil {
					f.t.Fatal(err)
				}
				return holders{"u1": ""} // not kept
			},
			wantDiff: []string{sale.DiffHolderStale, sale.DiffStockMismatch},
			wantLeft: []int64{4},
			requeued: func(f *recFixture) uuid.UUID { return f.evs[1].OrderID },
		},
		{
			// A paid order holds its unit and its shopper like a pending
			// one: a repair that counted only PENDING would sell u0's unit
			// again and let u0 buy a second.
			name: "Redis lost every key of a sale with a paid order", quantities: []int64{5, 2}, orders: []int{0, 0, 1},
			breakIt: func(f *recFixture) holders {
				for _, e := range []event.OrderPlaced{f.evs[0], f.evs[2]} {
					if _, err := f.st.Pay(f.ctx, e.OrderID, e.UserID, "pay-"+e.OrderID.String()); err != nil {
						f.t.Fatal(err)
					}
				}
				f.del(append(f.stockKeys(), stock.HoldersKey(f.sale.ID))...)
				return nil
			},
			wantDiff: []string{sale.DiffHolderMissing, sale.DiffHolderMissing, sale.DiffHolderMissing, sale.DiffStockNotLoaded, sale.DiffStockNotLoaded},
			wantLeft: []int64{3, 1},
		},
		{
			name: "a user held under an older order", quantities: []int64{5}, orders: []int{0},
			breakIt: func(f *recFixture) holders {
				f.reserveHolder("u0", uuid.NewString())
				return nil
			},
			wantDiff: []string{sale.DiffHolderMissing},
			wantLeft: []int64{4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRecFixture(t, rc, st, tt.quantities, tt.orders)
			keep := tt.breakIt(f)
			svc := sale.NewService(st, f.stk, sale.WithAcceptedRecords(rc), sale.WithSettle(100*time.Millisecond))

			rec, err := svc.Reconcile(f.ctx, f.sale.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, d := range rec.Differences {
				kinds = append(kinds, d.Kind)
				if d.SaleID != f.sale.ID {
					t.Errorf("difference of sale %d, want %d: %+v", d.SaleID, f.sale.ID, d)
				}
			}
			sort.Strings(kinds)
			if diff := cmp.Diff(tt.wantDiff, kinds); diff != "" {
				t.Errorf("differences (-want +got):\n%s\n%+v", diff, rec.Differences)
			}
			if rec.Clean != (len(tt.wantDiff) == 0) || rec.Repaired {
				t.Errorf("clean %v repaired %v, want clean %v and not repaired", rec.Clean, rec.Repaired, len(tt.wantDiff) == 0)
			}
			if got := (reconcileCounts{inFlight: rec.InFlight, leaked: rec.Leaked}); got != tt.wantIn {
				t.Errorf("counts: got %+v, want %+v", got, tt.wantIn)
			}
			if rec.Attribution != tt.wantAttr {
				t.Errorf("attribution: got %q, want %q", rec.Attribution, tt.wantAttr)
			}
			wantRepaired := len(tt.wantDiff) > 0
			if tt.requeued != nil {
				if rec.Requeued != 1 {
					t.Errorf("requeued %d releases, want the stale holder's", rec.Requeued)
				}
				f.drain(tt.requeued(f)) // the relay's next pass
				wantRepaired = false
			} else if rec.Requeued != 0 {
				t.Errorf("a read-only reconcile requeued %d releases, want none", rec.Requeued)
			}

			rec, err = svc.Reconcile(f.ctx, f.sale.ID, true)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Repaired != wantRepaired {
				t.Errorf("repaired: got %v, want %v", rec.Repaired, wantRepaired)
			}
			again, err := svc.Reconcile(f.ctx, f.sale.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Clean {
				t.Errorf("after the repair: %+v", again.Differences)
			}
			var left []int64
			for _, it := range f.sale.Items {
				n, err := f.stk.Left(f.ctx, f.sale.ID, it.ID)
				if err != nil {
					t.Fatal(err)
				}
				left = append(left, n)
			}
			if diff := cmp.Diff(tt.wantLeft, left); diff != "" {
				t.Errorf("stock after the repair (-want +got):\n%s", diff)
			}
			want := holders{}
			for _, e := range f.evs {
				if o, err := st.GetOrder(f.ctx, e.OrderID); err == nil && (o.Status == store.StatusPending || o.Status == store.StatusPaid) {
					want[e.UserID] = e.OrderID.String()
				}
			}
			for u, o := range keep {
				if o != "" {
					want[u] = o
				}
			}
			got, err := f.stk.Holders(f.ctx, f.sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("holders after the repair (-want +got):\n%s", diff)
			}
			// The sale goes on: a new shopper can reserve.
			if _, err := f.stk.Reserve(f.ctx, f.sale.ID, f.sale.Items[0].ID, "newcomer", uuid.NewString()); err != nil {
				t.Errorf("reserve after the repair: %v", err)
			}
		})
	}
}

type reconcileCounts struct{ inFlight, leaked int }

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// reserveHolder writes a holder entry directly, stock untouched: a fault no
// script would make.
func (f *recFixture) reserveHolder(user, order string) {
	f.t.Helper()
	if err := f.rc.Do(f.ctx, f.rc.B().Hset().Key(stock.HoldersKey(f.sale.ID)).FieldValue().FieldValue(user, order).Build()).Error(); err != nil {
		f.t.Fatal(err)
	}
}

// drain releases an order's outbox row and waits until it is done, by
// whichever relay took it.
func (f *recFixture) drain(id uuid.UUID) {
	f.t.Helper()
	if _, err := relay.New(f.st, f.stk, quietLog, metrics.New()).Drain(f.ctx, []uuid.UUID{id}); err != nil {
		f.t.Fatal(err)
	}
	testdb.WaitReleased(f.t, testdb.Pool(f.t), id)
}

func TestReconcileErrors(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	if _, err := sale.NewService(st, stock.New(rc), sale.WithAcceptedRecords(rc)).Reconcile(ctx, 1<<62, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown sale: got %v, want ErrNotFound", err)
	}
	if _, err := sale.NewService(st, stock.New(rc)).Reconcile(ctx, 1, false); !errors.Is(err, sale.ErrNoAcceptedRecords) {
		t.Errorf("without accepted records: got %v, want ErrNoAcceptedRecords", err)
	}
}

// With two items, a leaked and an in-flight holder leave two readings of
// Redis. A repair waits for the in-flight order to be persisted, and then
// knows its item; when it is not persisted in time, the repair estimates,
// says so, and the next reconciliation after the persist sets it right.
func TestReconcileAttribution(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	persist := func(f *recFixture, item int, user, order string) {
		t.Helper()
		ev := event.OrderPlaced{Version: event.Version, OrderID: uuid.MustParse(order), SaleID: f.sale.ID,
			ItemID: f.sale.Items[item].ID, UserID: user, PlacedAt: time.Now()}
		if _, err := st.PersistBatch(f.ctx, []event.OrderPlaced{ev}); err != nil {
			t.Error(err)
		}
	}
	left := func(f *recFixture) []int64 {
		t.Helper()
		var out []int64
		for _, it := range f.sale.Items {
			n, err := f.stk.Left(f.ctx, f.sale.ID, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	tests := []struct {
		name        string
		persistedIn time.Duration // when the in-flight order lands; 0 = not during the repair
		wantAttr    string        // of the repair
		wantFlying  int           // in flight at the repair
		wantLeft    []int64       // after the repair
	}{
		{"persisted while the repair waits", 150 * time.Millisecond, "", 0, []int64{3, 2}},
		{"not persisted in time", 0, sale.AttributionEstimated, 1, []int64{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRecFixture(t, rc, st, []int64{3, 3}, nil)
			f.reserve(0, "leak")
			fly := f.inFlight(1, "fly")
			svc := sale.NewService(st, f.stk, sale.WithAcceptedRecords(rc), sale.WithSettle(time.Second))
			if tt.persistedIn > 0 {
				time.AfterFunc(tt.persistedIn, func() { persist(f, 1, "fly", fly) })
			}
			rec, err := svc.Reconcile(f.ctx, f.sale.ID, true)
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Repaired || rec.Leaked != 1 || rec.InFlight != tt.wantFlying || rec.Attribution != tt.wantAttr {
				t.Errorf("repair: repaired %v leaked %d inFlight %d attribution %q, want true 1 %d %q",
					rec.Repaired, rec.Leaked, rec.InFlight, rec.Attribution, tt.wantFlying, tt.wantAttr)
			}
			if diff := cmp.Diff(tt.wantLeft, left(f)); diff != "" {
				t.Errorf("stock after the repair (-want +got):\n%s", diff)
			}
			if tt.persistedIn == 0 {
				persist(f, 1, "fly", fly)
				if rec, err = svc.Reconcile(f.ctx, f.sale.ID, true); err != nil || !rec.Repaired {
					t.Fatalf("second repair: %+v %v", rec, err)
				}
				if diff := cmp.Diff([]int64{3, 2}, left(f)); diff != "" {
					t.Errorf("stock after the second repair (-want +got):\n%s", diff)
				}
			}
			if rec, err := svc.Reconcile(f.ctx, f.sale.ID, false); err != nil || !rec.Clean {
				t.Errorf("finally: %+v %v", rec, err)
			}
		})
	}
}

// An order that ends between a repair's read of PostgreSQL and its write
// to Redis: its release ran in between and found no holder (Redis had lost
// the sale), then the repair's copy brought the holder back with its unit
// counted as taken. The repair runs that release again, so the shopper is
// free and the unit is on sale.
func TestRepairReleasesOrdersThatEndedMeanwhile(t *testing.T) {
	t.Parallel()
	st, rc := storeAndRedis(t)
	f := newRecFixture(t, rc, st, []int64{5}, []int{0, 0}) // u0 and u1 hold a unit each
	f.del(append(f.stockKeys(), stock.HoldersKey(f.sale.ID))...)

	rl := relay.New(st, f.stk, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.New())
	svc := sale.NewService(st, f.stk, sale.WithAcceptedRecords(rc), sale.WithSettle(100*time.Millisecond), sale.WithReleases(rl.Drain))
	cancelled := false
	sale.SetBeforeRepairWrite(svc, func() {
		if cancelled {
			return
		}
		cancelled = true
		if _, err := st.Cancel(f.ctx, f.evs[0].OrderID, "u0"); err != nil {
			t.Errorf("cancel u0's order: %v", err)
		}
		if _, err := rl.Drain(f.ctx, []uuid.UUID{f.evs[0].OrderID}); err != nil {
			t.Errorf("drain u0's release: %v", err)
		}
	})
	rec, err := svc.Reconcile(f.ctx, f.sale.ID, true)
	if err != nil || !rec.Repaired || !cancelled {
		t.Fatalf("Reconcile = %+v, %v (order cancelled meanwhile: %v); want a repair", rec, err, cancelled)
	}
	if rec.Requeued != 1 {
		t.Errorf("requeued %d releases, want 1 (u0's)", rec.Requeued)
	}
	testdb.WaitReleased(t, testdb.Pool(t), f.evs[0].OrderID) // the repair's drain may have met another relay's pass
	holder, err := rc.Do(f.ctx, rc.B().Hget().Key(stock.HoldersKey(f.sale.ID)).Field("u0").Build()).ToString()
	if !rueidis.IsRedisNil(err) {
		t.Errorf("u0 still holds %q (%v) after her order was cancelled: she cannot buy again", holder, err)
	}
	if left, err := f.stk.Left(f.ctx, f.sale.ID, f.sale.Items[0].ID); err != nil || left != 4 {
		t.Errorf("left = %d, %v; want 4 (5 less u1's active order)", left, err)
	}
}

// A repair ends a leaked reservation as the abandoned-reservation pass
// does, not by dropping its holder: an ABANDONED row takes its order id (a
// late copy of its event can never be persisted after the unit was sold
// again), and the relay gives back the unit and the admission token, so
// the shopper of a queued sale can buy again. Run by the order service
// (the relay drains at once) and by the CLI (the rows wait for a relay).
func TestRepairWritesLeakedReservationsOff(t *testing.T) {
	t.Parallel()
	st, rc := storeAndRedis(t)
	for _, drainNow := range []bool{true, false} {
		t.Run(fmt.Sprintf("drain now %v", drainNow), func(t *testing.T) {
			t.Parallel()
			f := newRecFixture(t, rc, st, []int64{5}, []int{0}) // u0 holds a unit
			item := f.sale.Items[0].ID
			const window = 2 * time.Second
			leak := v7At(t, time.Now().Add(-window-time.Second))
			if _, err := f.stk.ReserveAdmitted(f.ctx, f.sale.ID, item, "leak", leak.String(), "tok-leak"); err != nil {
				t.Fatal(err)
			}
			// A v4 id carries no time: its holder is dropped by the rewrite, as before.
			f.reserve(0, "v4-leak")
			rl := relay.New(st, f.stk, quietLog, metrics.New())
			opts := []sale.Option{sale.WithAcceptedRecords(rc), sale.WithSettle(100 * time.Millisecond), sale.WithInFlightWindow(window)}
			if drainNow {
				opts = append(opts, sale.WithReleases(rl.Drain))
			}
			svc := sale.NewService(st, f.stk, opts...)

			rec, err := svc.Reconcile(f.ctx, f.sale.ID, true)
			if err != nil {
				t.Fatal(err)
			}
			wantReleasing := 0
			if !drainNow {
				wantReleasing = 1 // written off, its release waiting for the relay
			}
			if !rec.Repaired || rec.Clean || rec.WrittenOff != 1 || rec.Leaked != 1 || rec.Releasing != wantReleasing {
				t.Fatalf("repair = repaired %v, clean %v, written off %d, leaked %d, releasing %d; want repaired, 1 written off, 1 leaked (dropped), %d releasing (%+v)",
					rec.Repaired, rec.Clean, rec.WrittenOff, rec.Leaked, rec.Releasing, wantReleasing, rec.Differences)
			}
			if !slices.ContainsFunc(rec.Differences, func(d sale.Difference) bool {
				return d.Kind == sale.DiffHolderLeaked && d.OrderID == leak.String() && d.UserID == "leak"
			}) {
				t.Errorf("the written-off holder is not among the differences: %+v", rec.Differences)
			}
			o, err := st.GetOrder(f.ctx, leak)
			if err != nil || o.Status != store.StatusRejected || o.RejectReason != event.RejectAbandoned {
				t.Fatalf("the leaked order's row = %+v, %v; want REJECTED (%s), taking its id", o, err, event.RejectAbandoned)
			}
			if !drainNow {
				f.drain(leak) // the running order service's relay
			}
			testdb.WaitReleased(t, testdb.Pool(t), leak)
			spent, holding, err := f.stk.AdmissionSpent(f.ctx, f.sale.ID, "leak", "tok-leak")
			if err != nil || spent || holding {
				t.Errorf("the leaked reservation's admission: spent %v, holding %v (%v); want given back", spent, holding, err)
			}
			if left, err := f.stk.Left(f.ctx, f.sale.ID, item); err != nil || left != 4 {
				t.Errorf("left = %d, %v; want 4 (5 less u0's order)", left, err)
			}
			if again, err := svc.Reconcile(f.ctx, f.sale.ID, false); err != nil || !again.Clean {
				t.Errorf("after the repair and the release: %+v, %v; want clean", again.Differences, err)
			}
			if _, err := f.stk.ReserveAdmitted(f.ctx, f.sale.ID, item, "leak", uuid.NewString(), "tok-leak"); err != nil {
				t.Errorf("the written-off reservation's admission buys again: %v", err)
			}
		})
	}
}

// One repair or load-stock of a sale at a time, across instances: two at
// once could interleave their writes shard by shard. A read-only
// reconcile is never held back.
func TestRepairsOfOneSaleRunOneAtATime(t *testing.T) {
	t.Parallel()
	st, rc := storeAndRedis(t)
	f := newRecFixture(t, rc, st, []int64{5}, []int{0})
	svc := sale.NewService(st, f.stk, sale.WithAcceptedRecords(rc), sale.WithSettle(100*time.Millisecond))

	unlock, ok, err := st.LockSaleWrites(f.ctx, f.sale.ID) // another instance's repair, running
	if err != nil || !ok {
		t.Fatalf("LockSaleWrites = %v, %v; want the lock", ok, err)
	}
	if _, ok, err := st.LockSaleWrites(f.ctx, f.sale.ID); ok || err != nil {
		t.Errorf("a second LockSaleWrites = %v, %v; want refused", ok, err)
	}
	if _, err := svc.Reconcile(f.ctx, f.sale.ID, true); !errors.Is(err, sale.ErrWriting) {
		t.Errorf("repair while another runs: %v, want ErrWriting", err)
	}
	if _, err := svc.LoadStock(f.ctx, f.sale.ID, true); !errors.Is(err, sale.ErrWriting) {
		t.Errorf("load-stock while a repair runs: %v, want ErrWriting", err)
	}
	if _, err := svc.Reconcile(f.ctx, f.sale.ID, false); err != nil {
		t.Errorf("read-only reconcile while a repair runs: %v", err)
	}
	unlock()
	if _, err := svc.Reconcile(f.ctx, f.sale.ID, true); err != nil {
		t.Errorf("repair after the other ended: %v", err)
	}
	if _, err := svc.LoadStock(f.ctx, f.sale.ID, true); err != nil {
		t.Errorf("load-stock after the repair ended: %v", err)
	}
}

// storeAndRedis is a store on the test database and a client of the local
// Redis, closed at the end.
func storeAndRedis(t *testing.T) (*store.Store, rueidis.Client) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	st := store.New(testdb.Pool(t))
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	return st, rc
}

// A repair puts back the admissions the sale's orders were placed with,
// even when the copy is clean: a failover that lost an admission spent by
// an order that ended since leaves nothing else to repair, and only the
// spent admission stops its shopper buying again with it.
func TestRepairPutsBackSpentAdmissions(t *testing.T) {
	t.Parallel()
	st, rc := storeAndRedis(t)
	ctx := testenv.Context(t)
	stk := stock.New(rc)
	sl := testdb.Sale(t, st, 5)
	testdb.Load(t, st, stk, sl.ID)
	item := sl.Items[0].ID
	e := event.OrderPlaced{Version: event.Version, OrderID: uuid.New(), SaleID: sl.ID, ItemID: item,
		UserID: "u0", PlacedAt: time.Now(), AdmissionID: "t-u0"}
	if _, err := stk.ReserveAdmitted(ctx, sl.ID, item, e.UserID, e.OrderID.String(), e.AdmissionID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PersistBatch(ctx, []event.OrderPlaced{e}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, e.OrderID, "u0"); err != nil {
		t.Fatal(err)
	}
	// Another test's relay may drain the cancellation's release first.
	if _, err := stk.Release(ctx, sl.ID, item, "u0", e.OrderID.String()); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Del().Key(stock.SpentTokensKey(sl.ID)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithSettle(100*time.Millisecond))
	if rec, err := svc.Reconcile(ctx, sl.ID, true); err != nil || !rec.Clean {
		t.Fatalf("Reconcile = %+v, %v; want a clean copy", rec, err)
	}
	if _, err := stk.ReserveAdmitted(ctx, sl.ID, item, "u0", uuid.NewString(), "t-u0"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Errorf("after the repair, a purchase with the cancelled order's admission: %v, want ErrTokenSpent", err)
	}
}
