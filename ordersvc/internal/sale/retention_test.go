package sale_test

import (
	"testing"
	"time"

	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A sale's copy in Redis gets the expiry its end, payment window,
// in-flight window and retention give, on every pass (a changed end moves
// it), and a sale past that time is no longer touched.
func TestExpireHotCopies(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	st := store.New(testdb.Pool(t))
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	stk := stock.New(rc)
	sl := testdb.Sale(t, st, 5, 5)
	testdb.Load(t, st, stk, sl.ID)
	if _, err := stk.Reserve(ctx, sl.ID, sl.Items[0].ID, "alice", "o1"); err != nil {
		t.Fatal(err)
	}
	const window, retention = 30 * time.Second, time.Hour
	svc := sale.NewService(st, stk, sale.WithInFlightWindow(window))
	expiry := func(key string) int64 {
		t.Helper()
		ms, err := rc.Do(ctx, rc.B().Pexpiretime().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	keys := []string{stock.StockKey(sl.ID, sl.Items[0].ID), stock.StockKey(sl.ID, sl.Items[1].ID), stock.HoldersKey(sl.ID)}

	// While it sells, and until its last order's window and the in-flight
	// window have passed, the sale's keys get no expiry: a Redis evicting
	// keys that have one could otherwise take them mid-sale.
	if _, err := svc.ExpireHotCopies(ctx, time.Now(), retention); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if got := expiry(key); got != -1 {
			t.Errorf("%s of a live sale expires at %d, want no expiry", key, got)
		}
	}
	settled := sl.EndsAt.Add(sl.PaymentTTL + window + time.Second)
	n, err := svc.ExpireHotCopies(ctx, settled, retention)
	if err != nil || n < 1 {
		t.Fatalf("ExpireHotCopies: %d sales, %v; want this one at least", n, err)
	}
	want := sl.EndsAt.Add(sl.PaymentTTL + window + retention).UnixMilli()
	for _, key := range keys {
		if got := expiry(key); got != want {
			t.Errorf("%s expires at %d, want %d (end + payment window + in-flight window + retention)", key, got, want)
		}
	}

	// Seen from long after that time, the sale is no longer listed: a copy
	// loaded again then keeps no expiry the pass sets.
	if _, err := rc.Do(ctx, rc.B().Persist().Key(keys[0]).Build()).AsInt64(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ExpireHotCopies(ctx, sl.EndsAt.Add(sl.PaymentTTL+window+retention+31*24*time.Hour), retention); err != nil {
		t.Fatal(err)
	}
	if got := expiry(keys[0]); got != -1 {
		t.Errorf("%s of a sale a month past its retention got expiry %d, want none set by the pass", keys[0], got)
	}
	// A sale whose time has passed (it ended two hours ago) and whose copy
	// was loaded again: the copy is dropped at the next pass.
	old := testdb.Sale(t, st, 5)
	if _, err := testdb.Pool(t).Exec(ctx, `UPDATE flash_sale SET starts_at = now() - interval '3 hours', ends_at = now() - interval '2 hours' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	testdb.Load(t, st, stk, old.ID)
	oldKey := stock.StockKey(old.ID, old.Items[0].ID)
	if _, err := svc.ExpireHotCopies(ctx, time.Now(), retention); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Do(ctx, rc.B().Exists().Key(oldKey).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("%s of a sale past its retention: exists %d (%v), want dropped", oldKey, n, err)
	}
}
