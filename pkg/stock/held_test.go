package stock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A reservation notes its item beside the holder, so a shopper's order and
// an abandoned reservation's unit can be traced to their item with no order
// row; a stale note (her earlier order's) is never taken for the current.
func TestHeldByAndItemsOf(t *testing.T) {
	c, st, sale := newSale(t)
	ctx := testenv.Context(t)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}, {ItemID: 2, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, loaded, err := st.HeldBy(ctx, sale, "alice"); ok || !loaded || err != nil {
		t.Fatalf("HeldBy before any purchase: ok %v loaded %v err %v, want nothing in a loaded copy", ok, loaded, err)
	}
	if _, err := st.Reserve(ctx, sale, 2, "alice", "o1"); err != nil {
		t.Fatal(err)
	}
	if h, ok, _, err := st.HeldBy(ctx, sale, "alice"); !ok || err != nil || h != (stock.Held{OrderID: "o1", ItemID: 2}) {
		t.Fatalf("HeldBy = %+v %v %v, want o1 of item 2", h, ok, err)
	}
	// Released, then a holder written by a load from PostgreSQL under
	// another order: the note of o1 must not be read as o5's item.
	if ok, err := st.Release(ctx, sale, 2, "alice", "o1"); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 4}, {ItemID: 2, Left: 5}}, []stock.Holder{{UserID: "alice", OrderID: "o5"}}); err != nil {
		t.Fatal(err)
	}
	if h, ok, _, err := st.HeldBy(ctx, sale, "alice"); !ok || err != nil || h != (stock.Held{OrderID: "o5"}) {
		t.Fatalf("HeldBy after a load = %+v %v %v, want o5 with its item unknown", h, ok, err)
	}
	if _, err := st.Reserve(ctx, sale, 1, "bob", "o2"); err != nil {
		t.Fatal(err)
	}
	items, err := st.ItemsOf(ctx, sale, map[string]string{"alice": "o5", "bob": "o2", "carol": "o9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items["bob"] != 1 {
		t.Fatalf("ItemsOf = %v, want only bob's item 1", items)
	}
	// Redis lost the sale (a restart): nothing held, and nothing proven.
	if _, err := testenv.DeleteKeys(ctx, c, fmt.Sprintf("{fs:%d}*", sale)); err != nil {
		t.Fatal(err)
	}
	if _, ok, loaded, err := st.HeldBy(ctx, sale, "alice"); ok || loaded || err != nil {
		t.Fatalf("HeldBy after a loss: ok %v loaded %v err %v, want nothing, not loaded", ok, loaded, err)
	}
}

// A shopper who holds a unit hears so even with the admission token her
// purchase spent: a retry of a lost answer must learn her order, not be
// sent back to the queue.
func TestHolderBeforeSpentToken(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o2", "tok-1"); !errors.Is(err, stock.ErrAlreadyPurchased) {
		t.Fatalf("retry with the spent token while holding: %v, want ErrAlreadyPurchased", err)
	}
}

// On a sharded sale the note sits in the shopper's shard, beside her
// holder: HeldBy and ItemsOf find it there.
func TestHeldBySharded(t *testing.T) {
	c, _, sale := newSale(t)
	t.Cleanup(func() { _, _ = testenv.DeleteKeys(context.Background(), c, fmt.Sprintf("{fs:%d*", sale)) })
	st := stock.New(c, stock.WithShards(func(int64) (int, error) { return 3, nil }))
	ctx := testenv.Context(t)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 30}, {ItemID: 2, Left: 30}}, nil); err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for i, u := range []string{"ann", "ben", "cat", "dan", "eve", "fay"} {
		order := fmt.Sprintf("o%d", i)
		if _, err := st.Reserve(ctx, sale, int64(1+i%2), u, order); err != nil {
			t.Fatal(err)
		}
		holders[u] = order
	}
	items, err := st.ItemsOf(ctx, sale, holders)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"ann", "ben", "cat", "dan", "eve", "fay"} {
		want := int64(1 + i%2)
		if items[u] != want {
			t.Errorf("ItemsOf[%s] = %d, want %d", u, items[u], want)
		}
		if h, ok, loaded, err := st.HeldBy(ctx, sale, u); !ok || !loaded || err != nil || h.ItemID != want || h.OrderID != holders[u] {
			t.Errorf("HeldBy(%s) = %+v %v %v %v, want %s of item %d in a loaded copy", u, h, ok, loaded, err, holders[u], want)
		}
	}
}

// Whether an admission was spent, and whether its shopper holds a unit,
// is read where the reserve script wrote them: in her shard's slot on a
// sharded sale.
func TestAdmissionSpent(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			c, _, sale := newSale(t)
			t.Cleanup(func() { _, _ = testenv.DeleteKeys(context.Background(), c, fmt.Sprintf("{fs:%d*", sale)) })
			st := stock.New(c, stock.WithShards(func(int64) (int, error) { return shards, nil }))
			ctx := testenv.Context(t)
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 30}}, nil); err != nil {
				t.Fatal(err)
			}
			check := func(what, user, token string, wantSpent, wantHolding bool) {
				t.Helper()
				spent, holding, err := st.AdmissionSpent(ctx, sale, user, token)
				if err != nil || spent != wantSpent || holding != wantHolding {
					t.Fatalf("%s: spent %v holding %v (%v), want %v %v", what, spent, holding, err, wantSpent, wantHolding)
				}
			}
			for i, u := range []string{"ann", "ben", "cat", "dan"} {
				tok := "tok-" + u
				check(u+" admitted", u, tok, false, false)
				if _, err := st.ReserveAdmitted(ctx, sale, 1, u, fmt.Sprintf("o%d", i), tok); err != nil {
					t.Fatal(err)
				}
				check(u+" buying", u, tok, true, true)
			}
			// ann's order ends: spent, holding nothing. ben's purchase fails
			// before its order exists: his token comes back.
			if ok, err := st.Release(ctx, sale, 1, "ann", "o0"); !ok || err != nil {
				t.Fatalf("release: %v %v", ok, err)
			}
			check("ann after her order ended", "ann", "tok-ann", true, false)
			if ok, err := st.GiveBack(ctx, sale, 1, "ben", "o1", "tok-ben"); !ok || err != nil {
				t.Fatalf("give back: %v %v", ok, err)
			}
			check("ben after the give-back", "ben", "tok-ben", false, false)
		})
	}
}
