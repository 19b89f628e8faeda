package stock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// Every key the stock scripts made for a sale, sharded or not, gets the
// expiry: found by listing the sale's keys after reservations with
// admission tokens, refills from the pool and a give-back, so a key a
// script starts writing later and ExpireSale forgets turns this red.
func TestExpireSaleReachesEveryKey(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			c, _, sale := newSale(t)
			st := stock.New(c, stock.WithShards(func(int64) (int, error) { return shards, nil }))
			ctx := testenv.Context(t)
			// Few units, so sharded shards run dry and refill from the pool.
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 6}, {ItemID: 2, Left: 6}}, nil); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				user, order, token := fmt.Sprintf("u%d", i), fmt.Sprintf("o%d", i), fmt.Sprintf("tok-%d", i)
				if _, err := st.ReserveAdmitted(ctx, sale, int64(1+i%2), user, order, token); err != nil {
					t.Fatalf("reserve %s: %v", user, err)
				}
				if i%4 == 0 {
					if _, err := st.GiveBack(ctx, sale, int64(1+i%2), user, order, token); err != nil {
						t.Fatal(err)
					}
				}
			}

			at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			if err := st.ExpireSale(ctx, sale, []int64{1, 2}, at); err != nil {
				t.Fatal(err)
			}
			keys := saleKeys(t, ctx, c, sale)
			if want := 6; len(keys) < want {
				t.Fatalf("sale %d has %d keys %v, want at least %d (stock, holders, notes, spent tokens)", sale, len(keys), keys, want)
			}
			sawJournal := shards == 1
			for _, key := range keys {
				sawJournal = sawJournal || strings.HasSuffix(key, ":moves-in")
				got, err := c.Do(ctx, c.B().Pexpiretime().Key(key).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				if got != at.UnixMilli() {
					t.Errorf("key %s expires at %d, want %d (%v)", key, got, at.UnixMilli(), at)
				}
			}
			if !sawJournal {
				t.Errorf("no refill ran (no moves-in key among %v): the test did not reach the moves' keys", keys)
			}
		})
	}
}

// saleKeys lists the keys under a sale's tags, {fs:<sale>} and its
// shards' {fs:<sale>:<k>.<j>}, on the one test node.
func saleKeys(t *testing.T, ctx context.Context, c rueidis.Client, sale int64) []string {
	t.Helper()
	var keys []string
	for _, pattern := range []string{fmt.Sprintf("{fs:%d}*", sale), fmt.Sprintf("{fs:%d:*", sale)} {
		cursor := uint64(0)
		for {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return keys
}
