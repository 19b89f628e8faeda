package stock_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// RestoreSpent puts each admission in its shopper's shard, where the
// reserve script looks, in pages, and adds to what the sets hold: every
// restored admission is refused a second purchase, and one that was not
// restored still buys.
func TestRestoreSpent(t *testing.T) {
	shardsAndTopologies(t, testRestoreSpent)
}

func testRestoreSpent(t *testing.T, c rueidis.Client, shards int) {
	newStore, sale := shardedSale(t, c, shards)
	st := newStore()
	ctx := testenv.Context(t)
	const n = 7000 // each call more than one SADD's page per shard
	spent := make([]stock.SpentAdmission, 0, n)
	for i := range n {
		spent = append(spent, stock.SpentAdmission{UserID: fmt.Sprintf("u%d", i), TokenID: fmt.Sprintf("t%d", i)})
	}
	if err := st.RestoreSpent(ctx, sale, spent[:n/2]); err != nil {
		t.Fatal(err)
	}
	if err := st.RestoreSpent(ctx, sale, spent[n/2:]); err != nil {
		t.Fatal(err)
	}
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 100}}, nil); err != nil {
		t.Fatal(err)
	}
	for i, a := range spent {
		ok, _, err := st.AdmissionSpent(ctx, sale, a.UserID, a.TokenID)
		if err != nil || !ok {
			t.Fatalf("admission %d (%s of %s): spent %v, %v; want spent", i, a.TokenID, a.UserID, ok, err)
		}
	}
	for _, i := range []int{0, n / 2, n - 1} {
		a := spent[i]
		if _, err := st.ReserveAdmitted(ctx, sale, 1, a.UserID, fmt.Sprintf("order-%d", i), a.TokenID); !errors.Is(err, stock.ErrTokenSpent) {
			t.Errorf("purchase with restored admission %s: %v, want ErrTokenSpent", a.TokenID, err)
		}
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u-new", "order-new", "t-new"); err != nil {
		t.Errorf("purchase with an admission never spent: %v", err)
	}
	if shards == 1 { // kept as long as the reserve script keeps spent admissions
		ttl, err := c.Do(ctx, c.B().Ttl().Key(stock.SpentTokensKey(sale)).Build()).AsInt64()
		if err != nil || ttl < 6*24*3600 {
			t.Errorf("the spent set's TTL: %d s, %v; want about a week", ttl, err)
		}
	}
}
