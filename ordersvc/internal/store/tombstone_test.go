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
// writes the order REJECTED (PUBLISH_FAILED), with no outbox row, and gives
// the unit back itself (gateway/internal/purchase/settle.go). The broker may
// still append the event; its late copy must then change nothing: no second
// row, nothing counted in sold, nothing for the relay to release, and the
// shopper free to buy again.
func TestLateCopyOfAbandonedOrder(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	sale := testdb.Sale(t, st, 3)
	ctx := testenv.Context(t)
	placed := time.Now().UTC().Truncate(time.Microsecond)
	late := event.OrderPlaced{Version: event.Version, OrderID: uuid.Must(uuid.NewV7()), SaleID: sale.ID,
		ItemID: sale.Items[0].ID, UserID: "alice", PlacedAt: placed}
	// The row as the gateway's settler writes it.
	if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order
		  (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
		VALUES ($1, $2, $3, $4, 'REJECTED', $5, $5, now(), 'PUBLISH_FAILED')
		ON CONFLICT (id) DO NOTHING`, late.OrderID, late.SaleID, late.ItemID, late.UserID, late.PlacedAt); err != nil {
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
	if sold != 1 || outbox != 0 || status != store.StatusRejected {
		t.Errorf("sold %d, outbox rows %d, tombstone %s; want 1 (the retry only), 0, REJECTED", sold, outbox, status)
	}

	// The consumer hands a REJECTED duplicate to the relay (Outcome.Redead);
	// the relay finds nothing of it to release.
	claimed, _, err := st.DrainReleases(ctx, []uuid.UUID{late.OrderID}, 10, func(_ context.Context, rows []store.PendingRelease) []string {
		t.Errorf("relay asked to release %+v", rows)
		return make([]string, len(rows))
	})
	if err != nil || claimed != 0 {
		t.Errorf("drain of the late copy: claimed %d, %v; want 0", claimed, err)
	}
}
