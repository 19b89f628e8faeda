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

// The abandoned-reservation watch reads a sale's holders (SalesInPlay)
// exactly until retention starts giving its copy in Redis an expiry
// (HotCopyExpiries with the in-flight window): at any instant each ended
// sale is in one of the two, never both, never neither, so no copy is
// read while expiring and no holder is left unread before its copy goes.
// Sales ending either side of end + payment window, and of end + payment
// window + in-flight window, at a fixed now.
func TestSalesInPlayUntilTheirCopyExpires(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st := store.New(testdb.Pool(t))
	const (
		ttl      = time.Minute
		inFlight = 5 * time.Second
	)
	now := time.Now().Truncate(time.Millisecond)
	cases := []struct {
		name   string
		endsAt time.Time
		inPlay bool
	}{
		{"open", now.Add(time.Hour), true},
		{"ended, payment window open", now.Add(-ttl + time.Second), true},
		{"payment window just closed, in-flight window open", now.Add(-ttl - time.Second), true},
		{"in-flight window closes a millisecond from now", now.Add(-ttl - inFlight + time.Millisecond), true},
		{"in-flight window closed now", now.Add(-ttl - inFlight), false},
		{"in-flight window closed a second ago", now.Add(-ttl - inFlight - time.Second), false},
	}
	ids := map[int64]int{}
	for i, c := range cases {
		ids[testdb.SaleAt(t, st, now.Add(-2*time.Hour), c.endsAt, ttl, 1).ID] = i
	}
	inPlay, err := st.SalesInPlay(ctx, now, 0, inFlight)
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := st.HotCopyExpiries(ctx, now.Add(-30*24*time.Hour), now.Add(-inFlight), inFlight+time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, len(cases))
	gotInPlay := make([]bool, len(cases))
	for _, id := range inPlay {
		if i, ok := ids[id]; ok {
			seen[i]++
			gotInPlay[i] = true
		}
	}
	for _, e := range expiring {
		if i, ok := ids[e.SaleID]; ok {
			seen[i]++
		}
	}
	for i, c := range cases {
		if seen[i] != 1 || gotInPlay[i] != c.inPlay {
			t.Errorf("%s: listed %d times, in play %t; want once, in play %t", c.name, seen[i], gotInPlay[i], c.inPlay)
		}
	}
}
