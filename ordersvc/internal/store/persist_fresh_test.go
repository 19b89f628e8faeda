package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// A batch written fresh (no lookups before the insert) must end as the same
// batch written checked would: the same outcome for every event, the same
// rows, the same sold counters and the same units queued for release. Two
// sales of the same shape get the same random history of batches, with
// redeliveries of earlier orders, repeat buyers, repeats within a batch,
// unknown items, admissions, both items selling out, and between batches
// shoppers cancelling or paying earlier orders: one through PersistBatch,
// the other through the checked write alone. The first must have written
// batches fresh, and checked for both causes, or the comparison proves
// nothing.
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
	events := func(s store.Sale, ids map[string]uuid.UUID, batch []ev) []event.OrderPlaced {
		evs := orderEvents(s, other, ids, placed, batch)
		for i, e := range batch {
			if len(e.order)%2 == 0 { // some orders of a queued sale
				evs[i].AdmissionID = "adm-" + e.order
			}
		}
		return evs
	}

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
		got, err := withFresh.PersistBatch(ctx, events(saleA, idsA, batch))
		if err != nil {
			t.Fatalf("batch %d: PersistBatch: %v", b, err)
		}
		want, err := checkedOnly.PersistBatchChecked(ctx, events(saleB, idsB, batch))
		if err != nil {
			t.Fatalf("batch %d: checked write: %v", b, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("batch %d %+v: outcomes (-checked +with fresh writes):\n%s", b, batch, diff)
		}
		// A shopper ends or pays an earlier order of hers, the same in both.
		if e := history[rng.IntN(len(history))]; rng.IntN(3) == 0 {
			pay := rng.IntN(2) == 0
			if ga, gb := lifecycle(ctx, withFresh, idsA[e.order], e.user, pay), lifecycle(ctx, checkedOnly, idsB[e.order], e.user, pay); ga != gb {
				t.Fatalf("after batch %d, order %s (pay %v): %s with fresh writes, %s checked", b, e.order, pay, ga, gb)
			}
		}
	}

	rejection, conflict := withFresh.CheckedBatches(store.CheckedRejection), withFresh.CheckedBatches(store.CheckedConflict)
	fresh := batches - int(rejection+conflict)
	t.Logf("of %d batches: %d fresh, %d checked for a rejection, %d for a conflict", batches, fresh, rejection, conflict)
	if fresh == 0 || rejection == 0 || conflict == 0 {
		t.Fatalf("want every kind of write at least once")
	}
	if n := checkedOnly.CheckedBatches(store.CheckedRejection) + checkedOnly.CheckedBatches(store.CheckedConflict); n != 0 {
		t.Errorf("the checked write alone counted %d checked batches, want 0 (PersistBatch counts them)", n)
	}

	rowsA, rowsB := saleRows(t, ctx, pool, saleA.ID), saleRows(t, ctx, pool, saleB.ID)
	for order := range idsA {
		if a, b := rowsA[idsA[order]], rowsB[idsB[order]]; a != b {
			t.Errorf("order %s: row %+v with fresh writes, %+v checked", order, a, b)
		}
	}
	if len(rowsA) != len(rowsB) || len(idsA) != len(idsB) {
		t.Errorf("%d rows of %d ids with fresh writes, %d of %d checked", len(rowsA), len(idsA), len(rowsB), len(idsB))
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
	if afterA.Items[1].Sold+int64(cancelled(rowsA, 1)) < 12 {
		t.Errorf("item 1 sold %d of 12, %d cancelled: the history should sell it out", afterA.Items[1].Sold, cancelled(rowsA, 1))
	}
}

// lifecycle pays or cancels order id for user in st and says how that
// went: the order's status, or the error's kind.
func lifecycle(ctx context.Context, st *store.Store, id uuid.UUID, user string, pay bool) string {
	var tr store.Transition
	var err error
	if pay {
		tr, err = st.Pay(ctx, id, user, "ref-"+id.String())
	} else {
		tr, err = st.Cancel(ctx, id, user)
	}
	for _, known := range []error{store.ErrNotFound, store.ErrPaid, store.ErrExpired, store.ErrCancelled, store.ErrRejected} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return tr.Order.Status
}

// cancelled counts the CANCELLED orders of the item at index item.
func cancelled(rows map[uuid.UUID]orderRow, item int) int {
	n := 0
	for _, r := range rows {
		if r.item == item && r.status == store.StatusCancelled {
			n++
		}
	}
	return n
}

// user picks one of 300 shoppers, so that some buy twice.
func user(rng *rand.Rand) string { return fmt.Sprintf("u%d", rng.IntN(300)) }

// orderRow is what a comparison of two sales' orders reads of each.
type orderRow struct {
	user, status, reason, release, admission string
	item                                     int
	created, expires                         time.Time
	closed                                   bool
}

// saleRows reads a sale's orders by id: the item by its place in the sale,
// and the reason of the order's stock release, if one was queued.
func saleRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, saleID int64) map[uuid.UUID]orderRow {
	t.Helper()
	rows, err := pool.Query(ctx, `
		SELECT o.id, o.user_id, o.status, coalesce(o.reject_reason, ''), coalesce(r.reason, ''), coalesce(o.admission_id, ''),
		       (SELECT count(*) FROM flash_sale_item i WHERE i.sale_id = o.sale_id AND i.id < o.item_id)::int,
		       o.created_at, o.expires_at, o.closed_at IS NOT NULL
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
		if err := rows.Scan(&id, &r.user, &r.status, &r.reason, &r.release, &r.admission, &r.item, &r.created, &r.expires, &r.closed); err != nil {
			t.Fatal(err)
		}
		r.created, r.expires = r.created.UTC(), r.expires.UTC()
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A shopper's cancel updates her order, then its item's sold counter; a
// batch locks the item, then inserts. A redelivery of that order in a
// fresh batch would wait for the cancel to commit (its primary key entry
// is being updated) while the cancel waits for the item: a deadlock that
// PostgreSQL breaks after a second by failing one of them. The fresh write
// gives up instead (freshLockTimeout), the cancel goes through, and the
// batch, written checked, finds the order a duplicate.
func TestFreshWriteGivesWayToACancel(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := testenv.Context(t)
	st := store.New(pool)
	sale := testdb.Sale(t, st, 5)
	ids := map[string]uuid.UUID{}
	placed := time.Now().UTC().Truncate(time.Microsecond)
	batch := orderEvents(sale, sale, ids, placed, []ev{{"o1", 0, "u1"}})
	if _, err := st.PersistBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}

	// The cancel's first half, held open.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below unless the test failed
	var cancelPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&cancelPID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE flash_sale_order SET status = 'CANCELLED', closed_at = now() WHERE id = $1`, ids["o1"]); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out []store.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := st.PersistBatch(ctx, batch) // the redelivery
		done <- result{out, err}
	}()
	// Once the batch waits for the cancel, the cancel asks for the item.
	for waiting := 0; waiting == 0; {
		select {
		case r := <-done:
			t.Fatalf("the redelivery ended (%v, %v) before waiting for the cancel", r.out, r.err)
		default:
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, cancelPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE flash_sale_item SET sold = sold - 1 WHERE id = $1`, sale.Items[0].ID); err != nil {
		t.Fatalf("the cancel's item update: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the cancel's commit: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the redelivery: %v", r.err)
	}
	// A duplicate of the order as the checked write read it: cancelled, or
	// still pending when the fresh write gave up before the cancel asked
	// for the item (a loaded machine), and read it before the commit.
	if len(r.out) != 1 || r.out[0].Kind != store.Duplicate ||
		(r.out[0].Status != store.StatusCancelled && r.out[0].Status != store.StatusPending) {
		t.Errorf("the redelivery's outcome: %+v, want one duplicate of a CANCELLED or PENDING order", r.out)
	}
	if n := st.CheckedBatches(store.CheckedConflict); n != 1 {
		t.Errorf("batches checked for a conflict: %d, want 1", n)
	}
}
