package sale_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/accepted"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A sharded sale on the Redis Cluster that lost units on the way (a move
// whose take survived a failover but whose journal entry did not): the
// read-only reconcile reports the drift without touching Redis, the repair
// rewrites it from PostgreSQL across the shard slots, keeps the holders of
// persisted and in-flight orders, and the sale sells on.
func TestReconcileShardedSale(t *testing.T) {
	t.Parallel()
	rc := testenv.RedisClient(t, testenv.RequireCluster(t))
	pool := testdb.Pool(t)
	st := store.New(pool)
	ctx := testenv.Context(t)
	now := time.Now()
	s, err := st.CreateSale(ctx, store.NewSale{
		Name: fmt.Sprintf("%s-%d", t.Name(), now.UnixNano()), StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentTTL: 10 * time.Minute, StockShards: 3,
		Items: []store.NewItem{{ProductID: "p0", Name: "hot", Price: "9.99", Quantity: 30}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testenv.DeleteKeys(context.Background(), rc, fmt.Sprintf("{fs:%d*", s.ID)) })
	stk := stock.New(rc, stock.WithShards(st.ShardsOf(5*time.Second)))
	testdb.Load(t, st, stk, s.ID)
	item := s.Items[0].ID
	testdb.Orders(t, st, stk, s, 0, now, "u0", "u1", "u2")
	inFlight := uuid.NewString()
	if _, err := stk.Reserve(ctx, s.ID, item, "u3", inFlight); err != nil {
		t.Fatal(err)
	}
	if err := accepted.Record(ctx, rc, inFlight, "u3"); err != nil {
		t.Fatal(err)
	}
	// 30 units, 4 held: 26 left. Lose 5 from the pool.
	keys, err := stk.StockKeys(s.ID, item)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Decrby().Key(keys[0]).Decrement(5).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithSettle(100*time.Millisecond))
	rec, err := svc.Reconcile(ctx, s.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Clean || len(rec.Differences) != 1 || rec.Differences[0].Kind != sale.DiffStockMismatch {
		t.Fatalf("read-only reconcile: %+v, want one STOCK_MISMATCH", rec)
	}
	if left, _ := stk.Left(ctx, s.ID, item); left != 21 {
		t.Fatalf("left = %d after a read-only reconcile, want the drifted 21 untouched", left)
	}
	rec, err = svc.Reconcile(ctx, s.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Repaired || rec.InFlight != 1 {
		t.Fatalf("repair: %+v, want repaired with 1 in flight kept", rec)
	}
	if left, err := stk.Left(ctx, s.ID, item); err != nil || left != 26 {
		t.Fatalf("left = %d (%v) after the repair, want 30 - 3 persisted - 1 in flight = 26", left, err)
	}
	holders, err := stk.Holders(ctx, s.ID)
	if err != nil || len(holders) != 4 || holders["u3"] != inFlight {
		t.Fatalf("holders %v (%v), want u0..u2 and u3's in-flight order", holders, err)
	}
	if rec, err := svc.Reconcile(ctx, s.ID, false); err != nil || !rec.Clean {
		t.Fatalf("after the repair: %+v, %v; want clean", rec, err)
	}
	// Sells on: every remaining unit, from every shard, then SOLD_OUT.
	for i := range 26 {
		if _, err := stk.Reserve(ctx, s.ID, item, fmt.Sprintf("late-%d", i), fmt.Sprintf("late-o-%d", i)); err != nil {
			t.Fatalf("late shopper %d: %v", i, err)
		}
	}
	if _, err := stk.Reserve(ctx, s.ID, item, "one-too-many", "late-o-x"); err == nil {
		t.Fatal("a 27th late shopper got a unit")
	}
}
