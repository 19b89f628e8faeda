package stock_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A sale's holders are settled once MarkSettled recorded the state read
// before them, until a holder is added or taken away in any shard. Above
// all, a holder taken away (a release, a load, a repair, a Redis loss and
// its reload) and another added in its place, the shard's count as it
// was, is never taken for the settled state; nor is a reservation made
// after the state a mark records was read.
func TestHolderStateSettles(t *testing.T) {
	shardsAndTopologies(t, testHolderStateSettles)
}

// inShardOf returns a user id with prefix in the same shard as user: FNV-1a
// of the id, as the stock's layout maps shoppers to shards.
func inShardOf(user, prefix string, shards int) string {
	shard := func(u string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(u))
		return h.Sum32() % uint32(shards)
	}
	for i := 0; ; i++ {
		if u := fmt.Sprintf("%s%d", prefix, i); shard(u) == shard(user) {
			return u
		}
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
	mark := func(s stock.HolderState) {
		t.Helper()
		if err := st.MarkSettled(ctx, sale, s); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(what string, count int64) stock.HolderState {
		t.Helper()
		s := state(what, count, false)
		mark(s)
		return state(what+", marked", count, true)
	}
	reserve := func(user string) {
		t.Helper()
		if _, err := st.Reserve(ctx, sale, 1, user, "order-"+user); err != nil {
			t.Fatalf("reserve for %s: %v", user, err)
		}
	}
	holders := func(users ...string) []stock.Holder {
		hs := make([]stock.Holder, 0, len(users))
		for _, u := range users {
			hs = append(hs, stock.Holder{UserID: u, OrderID: "order-" + u})
		}
		return hs
	}
	load := func(hs []stock.Holder) {
		t.Helper()
		if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 100}}, hs); err != nil {
			t.Fatal(err)
		}
	}
	// Twelve shoppers: every shard holds some.
	var twelve []string
	for i := range 12 {
		twelve = append(twelve, fmt.Sprintf("a%d", i))
	}

	settle("a sale never read", 0)
	load(holders(twelve...))
	first := settle("after a load", 12)
	for i := range 12 {
		before := state(fmt.Sprintf("before reservation %d", i), int64(12+i), true)
		reserve(fmt.Sprintf("b%d", i))
		// The state read before the reservation is not recorded.
		mark(before)
		settle(fmt.Sprintf("after reservation %d", i), int64(13+i))
	}
	// A late mark of an older state leaves the record as it is.
	mark(first)
	state("an older state marked late", 24, true)

	// Redis lost the sale (every key, the version and the record with it),
	// and a reload of the same holders: the version counts from nothing
	// again, as it did, and a mark of the state read before the loss,
	// landing late, is neither recorded nor taken for the new state.
	settled := state("before the loss", 24, true)
	before, err := st.Holders(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.DeleteKeys(ctx, c, fmt.Sprintf("{fs:%d*", sale)); err != nil {
		t.Fatal(err)
	}
	var again []stock.Holder
	for u, o := range before {
		again = append(again, stock.Holder{UserID: u, OrderID: o})
	}
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 100}}, again); err != nil {
		t.Fatal(err)
	}
	mark(settled)
	settle("the same holders reloaded, an old mark landing late", 24)

	// Taken away and another put in its place, in the same shard: never
	// settled.
	if ok, err := st.Release(ctx, sale, 1, "a0", "order-a0"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	reserve(inShardOf("a0", "after-release-", shards))
	settle("a release, then a reservation in its shard", 24)

	all, err := st.Holders(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for u := range all {
		if u != "a1" {
			users = append(users, u)
		}
	}
	load(holders(users...))
	reserve(inShardOf("a1", "after-load-", shards))
	settle("a load without a1, then a reservation in her shard", 24)

	_, err = st.Reconcile(ctx, sale, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) {
		var keep []string
		for _, u := range users {
			if u != "a2" {
				keep = append(keep, u)
			}
		}
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 99}}, Holders: holders(append(keep, inShardOf("a1", "after-load-", shards))...)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reserve(inShardOf("a2", "after-repair-", shards))
	settle("a repair without a2, then a reservation in her shard", 24)
}
