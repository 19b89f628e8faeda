package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

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
