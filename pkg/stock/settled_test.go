package stock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A sale's holders are settled once MarkSettled recorded the state read
// before them, until a holder is added or taken away in any shard. Above
// all, a holder taken away (a release, a load, a repair) and another added
// in its place, the count as it was, is never taken for the settled state;
// nor is a reservation made after the state a mark records was read.
func TestHolderStateSettles(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			topologies(t, func(t *testing.T, c rueidis.Client) { testHolderStateSettles(t, c, shards) })
		})
	}
}

func testHolderStateSettles(t *testing.T, c rueidis.Client, shards int) {
	newStore, sale := shardedSale(t, c, shards)
	st := newStore()
	ctx := testenv.Context(t)
	state := func(what string, count int64, settled bool) stock.HolderState {
		t.Helper()
		s, err := st.HolderState(ctx, sale)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if s.Count != count || s.Settled != settled {
			t.Fatalf("%s: %d holders, settled %v; want %d, %v", what, s.Count, s.Settled, count, settled)
		}
		return s
	}
	settle := func(what string, count int64) {
		t.Helper()
		if err := st.MarkSettled(ctx, sale, state(what, count, false)); err != nil {
			t.Fatal(err)
		}
		state(what+", marked", count, true)
	}
	reserve := func(user string) {
		t.Helper()
		if _, err := st.Reserve(ctx, sale, 1, user, "order-"+user); err != nil {
			t.Fatalf("reserve for %s: %v", user, err)
		}
	}
	// Twelve shoppers: every shard holds some.
	holders := func(prefix string, n int) []stock.Holder {
		hs := make([]stock.Holder, 0, n)
		for i := range n {
			u := fmt.Sprintf("%s%d", prefix, i)
			hs = append(hs, stock.Holder{UserID: u, OrderID: "order-" + u})
		}
		return hs
	}

	settle("a sale never read", 0)
	load := func(hs []stock.Holder) {
		t.Helper()
		if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 100}}, hs); err != nil {
			t.Fatal(err)
		}
	}
	load(holders("a", 12))
	settle("after a load", 12)
	for i := range 12 {
		before := state(fmt.Sprintf("before reservation %d", i), int64(12+i), true)
		reserve(fmt.Sprintf("b%d", i))
		// The state read before the reservation does not cover it.
		if err := st.MarkSettled(ctx, sale, before); err != nil {
			t.Fatal(err)
		}
		settle(fmt.Sprintf("after reservation %d", i), int64(13+i))
	}

	// Taken away and put back, the count as it was: never settled.
	if ok, err := st.Release(ctx, sale, 1, "a0", "order-a0"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	reserve("after-release")
	settle("a release, then a reservation", 24)
	load(holders("c", 23))
	reserve("after-load")
	settle("a load of one holder fewer, then a reservation", 24)
	_, err := st.Reconcile(ctx, sale, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) {
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 99}}, Holders: holders("d", 23)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reserve("after-repair")
	state("a repair of one holder fewer, then a reservation", 24, false)
}
