package naive_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/naive"
	"flashsale/tools/testenv"
)

// The race that pkg/stock's contention test runs against the atomic script
// oversells on the non-atomic GET-then-DECR design, which is what shows the
// race can tell right from wrong.
func TestReserveOversells(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// Far above any id PostgreSQL hands out in tests, distinct per run.
	sale := 9_100_000_000 + time.Now().UnixNano()%1_000_000_000
	t.Cleanup(func() {
		c.Do(context.Background(), c.B().Del().Key(stock.HoldersKey(sale), stock.StockKey(sale, 1)).Build())
	})
	st := stock.New(c)
	ctx := testenv.Context(t)
	const units, users = 100, 1000
	// Several rounds: the race needs interleaving, which one round on a
	// quiet machine may not give. One oversell in any round is the proof.
	for round := range 5 {
		if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: units}}, nil); err != nil {
			t.Fatal(err)
		}
		var sold atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := naive.Reserve(ctx, c, sale, 1)
				if err == nil && ok {
					sold.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		left, _ := st.Left(ctx, sale, 1)
		t.Logf("round %d: naive design sold %d of %d units, stock left %d", round, sold.Load(), units, left)
		if sold.Load() > units && left < 0 {
			return
		}
	}
	t.Fatal("the naive GET-then-DECR design never oversold: the race test cannot tell right from wrong")
}
