package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// A create-sale retried after a lost answer made a second sale. Under an
// idempotency key, calls racing with one key make one sale and all get it;
// the key with another request is refused; calls without a key each make
// their own sale, as before.
func TestCreateSaleOnce(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st := store.New(pool)
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	ns := store.NewSale{Name: fmt.Sprintf("%s-%d", t.Name(), start.UnixNano()), StartsAt: start, EndsAt: start.Add(time.Hour),
		PaymentTTL: 10 * time.Minute, Queue: store.DefaultQueue,
		Items: []store.NewItem{{ProductID: "p", Name: "n", Price: "1.00", Quantity: 3}}}
	key := "test-" + uuid.NewString()

	const callers = 8
	var wg sync.WaitGroup
	ids := make([]int64, callers)
	replays := make([]bool, callers)
	for i := range callers {
		wg.Go(func() {
			// The same sale spelt otherwise is the same request: the same
			// instant in another zone and to PostgreSQL's microsecond, the
			// same price with another zero, 1 shard said or not.
			n := ns
			if i%2 == 1 {
				n.StartsAt = n.StartsAt.In(time.FixedZone("X", 3600)).Add(300 * time.Nanosecond)
				n.Items = []store.NewItem{{ProductID: "p", Name: "n", Price: "1.0", Quantity: 3}}
				n.StockShards = 1
			}
			s, replayed, err := st.CreateSaleOnce(ctx, key, n)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			ids[i], replays[i] = s.ID, replayed
			if len(s.Items) != 1 || s.Items[0].Quantity != 3 {
				t.Errorf("caller %d: items %+v", i, s.Items)
			}
		})
	}
	wg.Wait()
	made := 0
	for i := range callers {
		if ids[i] != ids[0] {
			t.Errorf("caller %d got sale %d, caller 0 sale %d: want one sale", i, ids[i], ids[0])
		}
		if !replays[i] {
			made++
		}
	}
	if made != 1 {
		t.Errorf("callers told they made the sale: %d, want 1", made)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale WHERE idempotency_key = $1`, key).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("sales with the key: %d, %v; want 1", rows, err)
	}

	other := ns
	other.Items = []store.NewItem{{ProductID: "p", Name: "n", Price: "1.00", Quantity: 4}}
	if _, _, err := st.CreateSaleOnce(ctx, key, other); !errors.Is(err, store.ErrKeyReused) {
		t.Errorf("the key with another request: got %v, want ErrKeyReused", err)
	}

	a, err := st.CreateSale(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.CreateSale(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.ID == ids[0] {
		t.Errorf("sales without a key: %d and %d (keyed %d), want each its own", a.ID, b.ID, ids[0])
	}
}

// A pass over the whole outbox (the relay's Run) walks it from a cursor: a
// full batch of rows whose releases keep failing (a Redis node down for
// one sale) does not stop it short of the rows behind them.
func TestDrainReleasesWalksPastFailingRows(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st := store.New(pool)
	const limit = 50
	bad := testdb.Sale(t, st, 1)
	evs := make([]event.OrderPlaced, limit+1) // the first is placed, the rest refused for lack of stock
	for i := range evs {
		evs[i] = event.OrderPlaced{Version: event.Version, OrderID: uuid.New(), SaleID: bad.ID, ItemID: bad.Items[0].ID,
			UserID: fmt.Sprint("u", i), PlacedAt: time.Now()}
	}
	if _, err := st.PersistBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `UPDATE stock_release SET released_at = now(), outcome = 'not_held' WHERE sale_id = $1 AND released_at IS NULL`, bad.ID)
	})
	for attempt := 1; ; attempt++ {
		good := testdb.Sale(t, st, 1)
		goodEvs := []event.OrderPlaced{
			{Version: event.Version, OrderID: uuid.New(), SaleID: good.ID, ItemID: good.Items[0].ID, UserID: "a", PlacedAt: time.Now()},
			{Version: event.Version, OrderID: uuid.New(), SaleID: good.ID, ItemID: good.Items[0].ID, UserID: "b", PlacedAt: time.Now()},
		}
		if _, err := st.PersistBatch(ctx, goodEvs); err != nil {
			t.Fatal(err)
		}
		handed := false
		release := func(_ context.Context, rows []store.PendingRelease) []string {
			out := make([]string, len(rows))
			for i, r := range rows {
				switch r.SaleID {
				case good.ID:
					handed, out[i] = true, store.OutcomeNotHeld
				case bad.ID:
					// fails: stays queued
				default:
					// another test's row: left as it is
				}
			}
			return out
		}
		var after store.Cursor
		for batch := 0; ; batch++ {
			claimed, _, last, err := st.DrainReleases(ctx, nil, limit, after, release)
			if err != nil {
				t.Fatal(err)
			}
			if claimed < limit {
				break
			}
			if batch == 10_000 {
				t.Fatal("the pass never reached the end of the outbox (the cursor does not move)")
			}
			after = last
		}
		if handed {
			return
		}
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, good.ID).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending > 0 || attempt == 5 {
			t.Fatalf("the pass never handed out the rows behind %d failing ones (%d still pending)", limit, pending)
		}
		t.Logf("attempt %d: another relay released the rows first; again with new ones", attempt)
	}
}
