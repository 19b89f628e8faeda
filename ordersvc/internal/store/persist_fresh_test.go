package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/tools/testenv"
)

// A batch written fresh (no lookups before the insert) must end as the same
// batch written checked would: the same outcome for every event, the same
// rows, the same sold counters and the same units queued for release. Two
// sales of the same shape get the same random history of batches, with
// redeliveries of earlier orders, repeat buyers, repeats within a batch,
// unknown items and both items selling out: one through PersistBatch, the
// other through the checked write alone. Both kinds of write must occur in
// the first, or the comparison proves nothing.
func TestFreshWritesDecideAsCheckedOnes(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := testenv.Context(t)
	withFresh, checkedOnly := store.New(pool), store.New(pool)
	saleA, saleB := testdb.Sale(t, withFresh, 300, 12), testdb.Sale(t, checkedOnly, 300, 12)
	other := testdb.Sale(t, withFresh, 1)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	idsA, idsB := map[string]uuid.UUID{}, map[string]uuid.UUID{}
	placed := time.Now().UTC().Truncate(time.Microsecond)

	var history []ev
	const batches = 60
	for b := range batches {
		var batch []ev
		for range 1 + rng.IntN(8) {
			var e ev
			switch r := rng.IntN(100); {
			case r < 5 && len(history) > 0: // a redelivery, maybe within this batch
				e = history[rng.IntN(len(history))]
			case r < 8:
				e = ev{order: fmt.Sprint(len(history)), item: -1 - rng.IntN(2), user: user(rng)}
			case r < 20: // the small item, which sells out
				e = ev{order: fmt.Sprint(len(history)), item: 1, user: user(rng)}
			default:
				e = ev{order: fmt.Sprint(len(history)), item: 0, user: user(rng)}
			}
			history = append(history, e)
			batch = append(batch, e)
		}
		got, err := withFresh.PersistBatch(ctx, orderEvents(saleA, other, idsA, placed, batch))
		if err != nil {
			t.Fatalf("batch %d: PersistBatch: %v", b, err)
		}
		want, err := checkedOnly.PersistBatchChecked(ctx, orderEvents(saleB, other, idsB, placed, batch))
		if err != nil {
			t.Fatalf("batch %d: checked write: %v", b, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("batch %d %+v: outcomes (-checked +with fresh writes):\n%s", b, batch, diff)
		}
	}

	checked := withFresh.CheckedBatches()
	t.Logf("%d of %d batches written checked", checked, batches)
	if checked < 5 || checked > batches-5 {
		t.Fatalf("%d of %d batches written checked: want both kinds of write, at least 5 of each", checked, batches)
	}
	if n := checkedOnly.CheckedBatches(); n != 0 {
		t.Errorf("the checked write alone counted %d checked batches, want 0 (PersistBatch counts them)", n)
	}

	rowsA, rowsB := saleRows(t, ctx, pool, saleA.ID), saleRows(t, ctx, pool, saleB.ID)
	for order := range idsA {
		if a, b := rowsA[idsA[order]], rowsB[idsB[order]]; a != b {
			t.Errorf("order %s: row %+v with fresh writes, %+v checked", order, a, b)
		}
	}
	if len(rowsA) != len(rowsB) {
		t.Errorf("%d rows with fresh writes, %d checked", len(rowsA), len(rowsB))
	}
	if len(idsA) != len(idsB) {
		t.Errorf("%d order ids with fresh writes, %d checked", len(idsA), len(idsB))
	}
	afterA, err := withFresh.GetSale(ctx, saleA.ID)
	if err != nil {
		t.Fatal(err)
	}
	afterB, err := checkedOnly.GetSale(ctx, saleB.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range afterA.Items {
		if a, b := afterA.Items[i].Sold, afterB.Items[i].Sold; a != b {
			t.Errorf("item %d: sold %d with fresh writes, %d checked", i, a, b)
		}
	}
	if afterA.Items[1].Sold < 12 {
		t.Errorf("item 1 sold %d of 12: the history should sell it out", afterA.Items[1].Sold)
	}
}

// user picks one of 300 shoppers, so that some buy twice.
func user(rng *rand.Rand) string { return fmt.Sprintf("u%d", rng.IntN(300)) }

// orderRow is what a comparison of two sales' orders reads of each.
type orderRow struct {
	user, status, reason, release string
	item                          int
}

// saleRows reads a sale's orders by id: the item by its place in the sale,
// and the reason of the order's stock release, if one was queued.
func saleRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, saleID int64) map[uuid.UUID]orderRow {
	t.Helper()
	rows, err := pool.Query(ctx, `
		SELECT o.id, o.user_id, o.status, coalesce(o.reject_reason, ''), coalesce(r.reason, ''),
		       (SELECT count(*) FROM flash_sale_item i WHERE i.sale_id = o.sale_id AND i.id < o.item_id)::int
		FROM flash_sale_order o LEFT JOIN stock_release r ON r.order_id = o.id
		WHERE o.sale_id = $1`, saleID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]orderRow{}
	for rows.Next() {
		var id uuid.UUID
		var r orderRow
		if err := rows.Scan(&id, &r.user, &r.status, &r.reason, &r.release, &r.item); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
