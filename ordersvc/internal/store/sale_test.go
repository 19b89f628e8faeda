package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/tools/testenv"
)

// A create-sale retried after a lost answer made a second sale. Under an
// idempotency key, calls racing with one key make one sale and all get it;
// the key with another request is refused; calls without a key each make
// their own sale, as before.
func TestCreateSaleOnce(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st := store.New(pool)
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	ns := store.NewSale{Name: fmt.Sprintf("%s-%d", t.Name(), start.UnixNano()), StartsAt: start, EndsAt: start.Add(time.Hour),
		PaymentTTL: 10 * time.Minute, Queue: store.DefaultQueue,
		Items: []store.NewItem{{ProductID: "p", Name: "n", Price: "1.00", Quantity: 3}}}
	key := "test-" + uuid.NewString()

	const callers = 8
	var wg sync.WaitGroup
	ids := make([]int64, callers)
	replays := make([]bool, callers)
	for i := range callers {
		wg.Go(func() {
			// The same sale spelt otherwise is the same request: the same
			// instant in another zone and to PostgreSQL's microsecond, the
			// same price with another zero, 1 shard said or not.
			n := ns
			if i%2 == 1 {
				n.StartsAt = n.StartsAt.In(time.FixedZone("X", 3600)).Add(300 * time.Nanosecond)
				n.Items = []store.NewItem{{ProductID: "p", Name: "n", Price: "1.0", Quantity: 3}}
				n.StockShards = 1
			}
			s, replayed, err := st.CreateSaleOnce(ctx, key, n)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			ids[i], replays[i] = s.ID, replayed
			if len(s.Items) != 1 || s.Items[0].Quantity != 3 {
				t.Errorf("caller %d: items %+v", i, s.Items)
			}
		})
	}
	wg.Wait()
	made := 0
	for i := range callers {
		if ids[i] != ids[0] {
			t.Errorf("caller %d got sale %d, caller 0 sale %d: want one sale", i, ids[i], ids[0])
		}
		if !replays[i] {
			made++
		}
	}
	if made != 1 {
		t.Errorf("callers told they made the sale: %d, want 1", made)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale WHERE idempotency_key = $1`, key).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("sales with the key: %d, %v; want 1", rows, err)
	}

	other := ns
	other.Items = []store.NewItem{{ProductID: "p", Name: "n", Price: "1.00", Quantity: 4}}
	if _, _, err := st.CreateSaleOnce(ctx, key, other); !errors.Is(err, store.ErrKeyReused) {
		t.Errorf("the key with another request: got %v, want ErrKeyReused", err)
	}

	a, err := st.CreateSale(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.CreateSale(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.ID == ids[0] {
		t.Errorf("sales without a key: %d and %d (keyed %d), want each its own", a.ID, b.ID, ids[0])
	}
}
