package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// A gateway that could not confirm a publish takes the order id first: it
// writes the order REJECTED (PUBLISH_FAILED) with an outbox row, and gives
// the unit back itself (gateway/internal/purchase/settle.go); the outbox row
// returns it should the gateway die first. The broker may still append the
// event; its late copy must then change nothing: no second row, nothing
// counted in sold, no release but the outbox row's (a no-op once the
// gateway released), and the shopper free to buy again.
func TestLateCopyOfAbandonedOrder(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	sale := testdb.Sale(t, st, 3)
	ctx := testenv.Context(t)
	placed := time.Now().UTC().Truncate(time.Microsecond)
	late := event.OrderPlaced{Version: event.Version, OrderID: uuid.Must(uuid.NewV7()), SaleID: sale.ID,
		ItemID: sale.Items[0].ID, UserID: "alice", PlacedAt: placed}
	// The rows as the gateway's settler writes them.
	if _, err := pool.Exec(ctx, `WITH written AS (
		  INSERT INTO flash_sale_order
		    (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
		  VALUES ($1, $2, $3, $4, 'REJECTED', $5, $5, now(), 'PUBLISH_FAILED')
		  ON CONFLICT (id) DO NOTHING
		  RETURNING id, sale_id, item_id, user_id)
		INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
		SELECT id, sale_id, item_id, user_id, 'PUBLISH_FAILED' FROM written`,
		late.OrderID, late.SaleID, late.ItemID, late.UserID, late.PlacedAt); err != nil {
		t.Fatal(err)
	}
	retry := event.OrderPlaced{Version: event.Version, OrderID: uuid.Must(uuid.NewV7()), SaleID: sale.ID,
		ItemID: sale.Items[0].ID, UserID: "alice", PlacedAt: placed.Add(time.Second)}

	out, err := st.PersistBatch(ctx, []event.OrderPlaced{late, retry})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Outcome{Kind: store.Duplicate, Status: store.StatusRejected, Reason: "PUBLISH_FAILED"}); out[0] != want {
		t.Errorf("late copy: %+v, want %+v", out[0], want)
	}
	if out[1].Kind != store.Accepted {
		t.Errorf("alice's next purchase: %+v, want accepted (the tombstone is not an active order)", out[1])
	}

	var sold, outbox int
	var status string
	if err := pool.QueryRow(ctx, `SELECT i.sold, (SELECT count(*) FROM stock_release WHERE sale_id = $1),
		    (SELECT status FROM flash_sale_order WHERE id = $3)
		FROM flash_sale_item i WHERE i.id = $2`, sale.ID, sale.Items[0].ID, late.OrderID).Scan(&sold, &outbox, &status); err != nil {
		t.Fatal(err)
	}
	if sold != 1 || outbox != 1 || status != store.StatusRejected {
		t.Errorf("sold %d, outbox rows %d, tombstone %s; want 1 (the retry only), 1 (the gateway's), REJECTED", sold, outbox, status)
	}

	// The consumer hands a REJECTED duplicate to the relay (Outcome.Redead);
	// the relay finds the gateway's outbox row only, for the late copy's own
	// order id (the release script gives back nothing once the gateway did).
	claimed, _, _, err := st.DrainReleases(ctx, []uuid.UUID{late.OrderID}, 10, store.Cursor{}, func(_ context.Context, rows []store.PendingRelease) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			if r.OrderID != late.OrderID || r.Reason != "PUBLISH_FAILED" {
				t.Errorf("relay asked to release %+v", r)
			}
			out[i] = store.OutcomeNotHeld
		}
		return out
	})
	if err != nil || claimed > 1 {
		t.Errorf("drain of the late copy: claimed %d, %v; want the gateway's outbox row only", claimed, err)
	}
	if claimed == 0 {
		// Another package's relay (every relay drains the whole outbox)
		// took the row first: it must be the gateway's row all the same.
		var reason string
		if err := pool.QueryRow(ctx, `SELECT reason FROM stock_release WHERE order_id = $1 AND released_at IS NOT NULL`, late.OrderID).Scan(&reason); err != nil || reason != "PUBLISH_FAILED" {
			t.Errorf("drain of the late copy claimed nothing, and its released outbox row reads %q, %v; want the gateway's (PUBLISH_FAILED)", reason, err)
		}
	}
}

// The abandoned-reservation pass and a consumer batch storing the same
// order id at once (its event came later than the in-flight window): the
// pass waits for the batch's item lock and finds the id taken. Inserting
// first, it held the uncommitted id the batch waited on while it waited on
// the batch's item lock, until the deadlock detector aborted one of them.
func TestAbandonWhileTheBatchStoresTheOrder(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	sale := testdb.Sale(t, st, 3)
	ctx := testenv.Context(t)
	o := store.Abandoned{OrderID: uuid.Must(uuid.NewV7()), SaleID: sale.ID, ItemID: sale.Items[0].ID, UserID: "alice",
		PlacedAt: time.Now().UTC().Truncate(time.Microsecond)}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below; a rollback after it is a no-op
	if _, err := tx.Exec(ctx, `SELECT 1 FROM flash_sale_item WHERE id = $1 FOR UPDATE`, o.ItemID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		written []uuid.UUID
		err     error
	}
	done := make(chan result, 1)
	go func() {
		w, err := st.Abandon(ctx, []store.Abandoned{o})
		done <- result{w, err}
	}()
	time.Sleep(300 * time.Millisecond) // the pass is waiting on the item now
	if _, err := tx.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 'PENDING', $5, $6) ON CONFLICT (id) DO NOTHING`,
		o.OrderID, o.SaleID, o.ItemID, o.UserID, o.PlacedAt, o.PlacedAt.Add(10*time.Minute)); err != nil {
		t.Fatalf("the batch's insert: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the batch's commit: %v", err)
	}
	if r := <-done; r.err != nil || len(r.written) != 0 {
		t.Fatalf("Abandon = %v, %v; want nothing written (the order is stored)", r.written, r.err)
	}
}
