package stock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

var saleSeq atomic.Int64

// newSale returns a client and a sale id no other test uses.
func newSale(t *testing.T) (rueidis.Client, *stock.Store, int64) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// Far above any id PostgreSQL hands out in tests, distinct per run.
	sale := 9_000_000_000 + time.Now().UnixNano()%1_000_000_000*10 + saleSeq.Add(1)
	t.Cleanup(func() { // every key of the sale, sharded or not
		for _, pattern := range []string{fmt.Sprintf("{fs:%d}*", sale), fmt.Sprintf("{fs:%d:*", sale)} {
			_, _ = testenv.DeleteKeys(context.Background(), c, pattern)
		}
	})
	return c, stock.New(c), sale
}

// fiveUnits is a sale whose item 1 has five units loaded.
func fiveUnits(t *testing.T) (*stock.Store, int64, context.Context) {
	t.Helper()
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	return st, sale, ctx
}

// The articles' contention test: 1,000 concurrent users, 100 units.
func TestReserveContention(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	const units, users = 100, 1000
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: units}}, nil); err != nil {
		t.Fatal(err)
	}
	var reserved, soldOut atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := st.Reserve(ctx, sale, 1, fmt.Sprintf("user-%d", u), fmt.Sprintf("order-%d", u))
			switch {
			case err == nil:
				reserved.Add(1)
			case errors.Is(err, stock.ErrSoldOut):
				soldOut.Add(1)
			default:
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("reserve: %v", err)
	}
	if got := reserved.Load(); got != units {
		t.Errorf("reserved %d units, want exactly %d", got, units)
	}
	if got := soldOut.Load(); got != users-units {
		t.Errorf("%d sold-out answers, want %d", got, users-units)
	}
	left, err := st.Left(ctx, sale, 1)
	if err != nil || left != 0 {
		t.Errorf("stock left = %d, %v; want 0", left, err)
	}
	holders, err := st.Holders(ctx, sale)
	if err != nil || len(holders) != units {
		t.Errorf("holders = %d, %v; want %d", len(holders), err, units)
	}
	if n, err := st.HolderCount(ctx, sale); err != nil || n != units {
		t.Errorf("holder count = %d, %v; want %d", n, err, units)
	}
	// A winner trying again is told it already holds a unit, even though the
	// item is sold out: the duplicate check comes before the stock check.
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		if _, ok := holders[user]; !ok {
			continue
		}
		if _, err := st.Reserve(ctx, sale, 1, user, "again"); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Errorf("winner %s again: %v, want ErrAlreadyPurchased", user, err)
		}
		break
	}
}

func TestReserveReleaseOutcomes(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)

	if _, err := st.Reserve(ctx, sale, 1, "u1", "o1"); !errors.Is(err, stock.ErrNotLoaded) {
		t.Fatalf("reserve before load: %v, want ErrNotLoaded (a missing key is not zero)", err)
	}
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 1}, {ItemID: 2, Left: 0}}, nil); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		do      func() error
		wantErr error
		left    int64
	}{
		{"last unit is sold", func() error { _, err := st.Reserve(ctx, sale, 1, "u1", "o1"); return err }, nil, 0},
		{"one more is refused", func() error { _, err := st.Reserve(ctx, sale, 1, "u2", "o2"); return err }, stock.ErrSoldOut, 0},
		{"holder is refused on another item of the sale", func() error { _, err := st.Reserve(ctx, sale, 2, "u1", "o3"); return err }, stock.ErrAlreadyPurchased, 0},
		{"release by another order id is a no-op", func() error { return released(st.Release(ctx, sale, 1, "u1", "o-other"))(false) }, nil, 0},
		{"release by the order returns the unit", func() error { return released(st.Release(ctx, sale, 1, "u1", "o1"))(true) }, nil, 1},
		{"second release of the same order is a no-op", func() error { return released(st.Release(ctx, sale, 1, "u1", "o1"))(false) }, nil, 1},
		{"returned unit is buyable by someone else", func() error { _, err := st.Reserve(ctx, sale, 1, "u2", "o2"); return err }, nil, 0},
		{"reloading sets, never adds", func() error {
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}}, []stock.Holder{{UserID: "u9", OrderID: "o9"}}); err != nil {
				return err
			}
			return st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}}, []stock.Holder{{UserID: "u9", OrderID: "o9"}})
		}, nil, 5},
		{"reloaded holders are enforced", func() error { _, err := st.Reserve(ctx, sale, 1, "u9", "o10"); return err }, stock.ErrAlreadyPurchased, 5},
	}
	for _, s := range steps {
		err := s.do()
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
		}
		if left, _ := st.Left(ctx, sale, 1); left != s.left {
			t.Fatalf("%s: stock left = %d, want %d", s.name, left, s.left)
		}
	}
}

func released(ok bool, err error) func(want bool) error {
	return func(want bool) error {
		if err != nil {
			return err
		}
		if ok != want {
			return fmt.Errorf("released = %v, want %v", ok, want)
		}
		return nil
	}
}

func BenchmarkReserveSoldOut(b *testing.B) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st := stock.New(c)
	ctx := context.Background()
	sale := int64(8_999_999_999)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 0}}, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Reserve(ctx, sale, 1, "u", "o"); !errors.Is(err, stock.ErrSoldOut) {
				b.Fatal(err)
			}
		}
	})
}

// The reservation spends its admission token in the same step: nothing
// written after the broker's acknowledgement (which a lost write or a
// gateway's death could skip) is needed to keep the token from buying twice.
// A purchase that failed before its order existed gives it back with the
// unit (GiveBack); an order that ended does not (Release).
func TestSpentAdmissionTokenIsRefused(t *testing.T) {
	st, sale, ctx := fiveUnits(t)
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	// u1's order is cancelled and the unit returned; the token its
	// reservation spent still cannot buy again.
	if ok, err := st.Release(ctx, sale, 1, "u1", "o1"); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o2", "tok-1"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Fatalf("replayed token: %v, want ErrTokenSpent", err)
	}
	if left, _ := st.Left(ctx, sale, 1); left != 5 {
		t.Fatalf("stock left %d after a refused replay, want 5", left)
	}
	// u2's purchase fails before its order exists: unit and token go back,
	// and she buys with the same token.
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u2", "o3", "tok-2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.GiveBack(ctx, sale, 1, "u2", "o3", "tok-2"); !ok || err != nil {
		t.Fatalf("give back: %v %v", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u2", "o4", "tok-2"); err != nil {
		t.Fatalf("token given back with its unit: %v, want it to buy", err)
	}
	// A give-back repeated after her new purchase changes nothing: o3 holds
	// nothing now, and tok-2 is spent by o4.
	if ok, err := st.GiveBack(ctx, sale, 1, "u2", "o3", "tok-2"); ok || err != nil {
		t.Fatalf("repeated give back: %v %v, want a no-op", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u3", "o5", "tok-2"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Fatalf("token of a purchase in progress after a stale give-back: %v, want ErrTokenSpent", err)
	}
}

// ReturnToken gives a spent token back for a purchase whose unit someone
// else released first, and never while its shopper holds a unit: a late
// retry of a failed purchase's give-back, after she bought again with the
// token it had already returned, must not let the admission buy a third
// time.
func TestReturnTokenKeepsItSpentWhileSheHoldsAUnit(t *testing.T) {
	st, sale, ctx := fiveUnits(t)
	// The legitimate case: the relay wrote o1 off and released its unit
	// without the token; the token goes back alone and buys.
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, sale, 1, "u1", "o1"); !ok || err != nil {
		t.Fatalf("relay's release: %v %v", ok, err)
	}
	if back, err := st.ReturnToken(ctx, sale, "u1", "o1", "tok-1"); !back || err != nil {
		t.Fatalf("ReturnToken after the relay's release: %v %v, want given back", back, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o2", "tok-1"); err != nil {
		t.Fatalf("the returned token: %v, want it to buy", err)
	}

	// The late retry: o3's give-back ran (unit and token back) but its
	// answer was lost; she bought o4 with the token; then the retry.
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u2", "o3", "tok-2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.GiveBack(ctx, sale, 1, "u2", "o3", "tok-2"); !ok || err != nil {
		t.Fatalf("give back: %v %v", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u2", "o4", "tok-2"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.GiveBack(ctx, sale, 1, "u2", "o3", "tok-2"); ok || err != nil {
		t.Fatalf("retried give back: %v %v, want a no-op", ok, err)
	}
	if back, err := st.ReturnToken(ctx, sale, "u2", "o3", "tok-2"); back || err != nil {
		t.Fatalf("ReturnToken while she holds o4: %v %v, want kept spent", back, err)
	}
	// o4 existed (an order), ends, and its unit goes back without the token.
	if ok, err := st.Release(ctx, sale, 1, "u2", "o4"); !ok || err != nil {
		t.Fatalf("release of o4: %v %v", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u2", "o5", "tok-2"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Fatalf("the token after it bought o4: %v, want ErrTokenSpent", err)
	}
}

// A late retry of a failed purchase's give-back returns nothing once that
// purchase's token went back, however her later orders went: here she
// bought again with the returned token and that order has ended (it
// existed, so its admission stays used), and she holds nothing. Without the
// note of which order spent the token, the retry found no unit held and
// gave the token back a second time: one admission, a third purchase.
func TestReturnTokenOncePerOrder(t *testing.T) {
	st, sale, ctx := fiveUnits(t)
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.GiveBack(ctx, sale, 1, "u1", "o1", "tok-1"); !ok || err != nil {
		t.Fatalf("give back of o1: %v %v", ok, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o2", "tok-1"); err != nil {
		t.Fatalf("the returned token: %v, want it to buy", err)
	}
	if ok, err := st.Release(ctx, sale, 1, "u1", "o2"); !ok || err != nil { // o2 expired
		t.Fatalf("release of o2: %v %v", ok, err)
	}
	if back, err := st.ReturnToken(ctx, sale, "u1", "o1", "tok-1"); back || err != nil {
		t.Fatalf("late ReturnToken for o1 after o2 bought with the token and ended: %v %v, want kept spent", back, err)
	}
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o3", "tok-1"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Fatalf("the token after it bought o2: %v, want ErrTokenSpent", err)
	}
}

// ending is one way an admitted reservation ends, and whether its
// admission stays spent: written off and dropped (the order never
// existed) give it back, released (the order existed) keeps it.
type ending struct {
	user, order, token string
	end                func(ctx context.Context, sale, item int64, user, order string) (bool, error)
	wantSpent          bool
}

func endings(st *stock.Store) []ending {
	return []ending{
		{"u1", "o1", "tok-1", st.WriteOff, false},
		{"u2", "o2", "tok-2", st.Drop, false},
		{"u3", "o3", "tok-3", st.Release, true},
	}
}

// The order service writes off an order that never came to exist (its
// gateway died, or the consumer refused it) knowing no admission token:
// WriteOff finds the token by the order and gives it back with the unit,
// so the shopper can buy again with her admission. Release, for an order
// that ended, keeps it spent. Before the note of which order spent each
// token, the write-off left the admission used for good.
func TestWriteOffGivesTheAdmissionBack(t *testing.T) {
	st, sale, ctx := fiveUnits(t)
	for _, tc := range endings(st) {
		if _, err := st.ReserveAdmitted(ctx, sale, 1, tc.user, tc.order, tc.token); err != nil {
			t.Fatal(err)
		}
		if ok, err := tc.end(ctx, sale, 1, tc.user, tc.order); !ok || err != nil {
			t.Fatalf("%s: release: %v %v", tc.order, ok, err)
		}
		spent, holding, err := st.AdmissionSpent(ctx, sale, tc.user, tc.token)
		if err != nil || spent != tc.wantSpent || holding {
			t.Fatalf("%s: after its release the token is spent %v, holding %v (%v); want spent %v, not holding", tc.order, spent, holding, err, tc.wantSpent)
		}
		// A second release of the same order is a no-op, and gives nothing back.
		if ok, err := tc.end(ctx, sale, 1, tc.user, tc.order); ok || err != nil {
			t.Fatalf("%s: repeated release: %v %v, want a no-op", tc.order, ok, err)
		}
	}
	// A reload or a repair dropped the holder of an order being written
	// off before the relay came: the unit is not the relay's to return,
	// but the admission still comes back.
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u5", "o5", "tok-5"); err != nil {
		t.Fatal(err)
	}
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 5}}, nil); err != nil { // a reload: no holders
		t.Fatal(err)
	}
	if ok, err := st.WriteOff(ctx, sale, 1, "u5", "o5"); ok || err != nil {
		t.Fatalf("write-off of an order whose holder a reload dropped: %v %v, want no unit released", ok, err)
	}
	if spent, _, err := st.AdmissionSpent(ctx, sale, "u5", "tok-5"); spent || err != nil {
		t.Fatalf("the token of an order written off after a reload: spent %v (%v), want given back", spent, err)
	}
	// The written-off admission buys again, once.
	if _, err := st.ReserveAdmitted(ctx, sale, 1, "u1", "o4", "tok-1"); err != nil {
		t.Fatalf("the written-off order's token: %v, want it to buy", err)
	}
	if back, err := st.ReturnToken(ctx, sale, "u1", "o1", "tok-1"); back || err != nil {
		t.Fatalf("ReturnToken for o1 after its write-off gave the token back: %v %v, want a no-op", back, err)
	}
}

// A stock key gone with no repair under way (a repair that failed after
// its pause, a Redis that lost it): the write-off of an order that never
// existed still gives its admission back, which nothing would do later
// (the relay marks the release done, the reload drops the holder); the
// release of an order that existed keeps it spent.
func TestWriteOffOfAnUnloadedItemGivesTheAdmissionBack(t *testing.T) {
	st, sale, ctx := fiveUnits(t)
	cases := endings(st)
	for _, tc := range cases {
		if _, err := st.ReserveAdmitted(ctx, sale, 1, tc.user, tc.order, tc.token); err != nil {
			t.Fatal(err)
		}
	}
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(sale, 1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if _, err := tc.end(ctx, sale, 1, tc.user, tc.order); !errors.Is(err, stock.ErrNotLoaded) {
			t.Fatalf("%s: release with the stock key gone: %v, want ErrNotLoaded", tc.order, err)
		}
		spent, _, err := st.AdmissionSpent(ctx, sale, tc.user, tc.token)
		if err != nil || spent != tc.wantSpent {
			t.Errorf("%s: admission spent %v (%v), want %v", tc.order, spent, err, tc.wantSpent)
		}
	}
}

// An order PostgreSQL refused for lack of stock frees its shopper without
// putting back a unit that PostgreSQL never had; once per order.
func TestDropFreesTheShopperWithoutAUnit(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, sale, 1, "u1", "o1"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		ok, err := st.Drop(ctx, sale, 1, "u1", "o1")
		if err != nil || ok != want {
			t.Fatalf("drop %d: %v %v, want %v", i+1, ok, err, want)
		}
	}
	if left, _ := st.Left(ctx, sale, 1); left != 0 {
		t.Fatalf("stock left %d after a drop, want 0", left)
	}
	if holders, _ := st.Holders(ctx, sale); len(holders) != 0 {
		t.Fatalf("holders %v after a drop, want none", holders)
	}
}

// Holders reads a sale's holders a page at a time: every holder of a sale
// with several pages of them comes back, each once, with its order id.
func TestHoldersReadsEveryPage(t *testing.T) {
	c, st, sale := newSale(t)
	ctx := context.Background()
	n := 2*stock.HoldersPage + stock.HoldersPage/2
	want := make(map[string]string, n)
	cmds := make(rueidis.Commands, 0, n)
	for i := range n {
		user, order := fmt.Sprintf("shopper-%d", i), fmt.Sprintf("order-%d", i)
		want[user] = order
		cmds = append(cmds, c.B().Hset().Key(stock.HoldersKey(sale)).FieldValue().FieldValue(user, order).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Holders(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d holders read, want %d", len(got), n)
	}
	for u, o := range want {
		if got[u] != o {
			t.Fatalf("holder %s: order %q, want %q", u, got[u], o)
		}
	}
	if count, err := st.HolderCount(ctx, sale); err != nil || count != int64(n) {
		t.Fatalf("HolderCount = %d, %v; want %d", count, err, n)
	}

	// Paced, the same holders, with a wait of a page before every page.
	pace := &recordingPacer{}
	paced, err := st.HoldersPaced(ctx, sale, pace)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(paced, got) {
		t.Fatalf("paced read: %d holders, not the %d of the unpaced one", len(paced), len(got))
	}
	if min := (n + stock.HoldersPage - 1) / stock.HoldersPage; len(pace.waits) < min {
		t.Fatalf("%d waits for %d holders, want one a page (at least %d)", len(pace.waits), n, min)
	}
	for _, w := range pace.waits {
		if w != stock.HoldersPage {
			t.Fatalf("waits %v, want %d each", pace.waits, stock.HoldersPage)
		}
	}
	// A pace that refuses (its context ending) ends the read, before any page.
	stop := errors.New("pace refused")
	if _, err := st.HoldersPaced(ctx, sale, refusingPacer{stop}); !errors.Is(err, stop) {
		t.Fatalf("read with a refusing pace: %v, want %v", err, stop)
	}
}

// recordingPacer lets every read through at once and records each wait.
type recordingPacer struct{ waits []int }

func (p *recordingPacer) WaitN(_ context.Context, n int) error {
	p.waits = append(p.waits, n)
	return nil
}

type refusingPacer struct{ err error }

func (p refusingPacer) WaitN(context.Context, int) error { return p.err }

// PaceHolders paces nothing at 0.
func TestPaceHoldersOff(t *testing.T) {
	if p := stock.PaceHolders(0); p != nil {
		t.Fatalf("PaceHolders(0) = %v, want nil (unpaced)", p)
	}
}
