package sale_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/stock"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

// The periodic reconcile finds the drift of an open sale, keeps the verdict
// for Status and /metrics, and never writes: the lost key stays lost until
// an operator repairs.
func TestWatchOpenSales(t *testing.T) {
	t.Parallel()
	// A database of its own: the shared one holds every other test's open
	// sales, more than the 64 whose series are kept.
	pool, rc := testdb.Own(t)
	st, stk := store.New(pool), stock.New(rc)
	m := metrics.New()
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithMetrics(m))
	ctx := testenv.Context(t)

	open, broken := testdb.Sale(t, st, 3), testdb.Sale(t, st, 2)
	for _, s := range []store.Sale{open, broken} {
		testdb.Load(t, st, stk, s.ID)
	}
	testdb.Orders(t, st, stk, open, 0, time.Now(), "alice")
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(broken.ID, broken.Items[0].ID)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.LastVerdict(broken.ID); ok {
		t.Fatal("a verdict before any reconcile")
	}

	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- svc.WatchOpenSales(wctx, 100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, okOpen := svc.LastVerdict(open.ID)
		_, okBroken := svc.LastVerdict(broken.ID)
		if okOpen && okBroken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no verdict for both sales within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v", err)
	}

	if v, _ := svc.LastVerdict(open.ID); v.Verdict != sale.VerdictOK || v.Repaired || !strings.Contains(v.Summary, "1 active") {
		t.Errorf("verdict of the consistent sale: %+v, want OK with 1 active order", v)
	}
	v, _ := svc.LastVerdict(broken.ID)
	if v.Verdict != sale.VerdictDrift || v.Repaired || !strings.Contains(v.Summary, sale.DiffStockNotLoaded) {
		t.Errorf("verdict of the sale with a lost key: %+v, want DRIFT naming %s, not repaired", v, sale.DiffStockNotLoaded)
	}
	if _, err := stk.Left(ctx, broken.ID, broken.Items[0].ID); !errors.Is(err, stock.ErrNotLoaded) {
		t.Errorf("the periodic reconcile wrote the lost key: %v", err)
	}
	st2, err := svc.Status(ctx, broken.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Reconcile == nil || st2.Reconcile.Verdict != sale.VerdictDrift || st2.ConsumerLag.Error == "" {
		t.Errorf("status: %+v, want the DRIFT verdict and a lag error (no tracker)", st2)
	}
	fams, err := scrape.Gather(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := fams.Value("flashsale_ordersvc_reconcile_differences", "sale", strconv.FormatInt(broken.ID, 10)); !ok || got != 1 {
		t.Errorf("reconcile_differences of the broken sale: %v (present %v), want 1", got, ok)
	}

	// The broken sale ends: its series go at the next pass (its drift
	// would otherwise page until a restart); its verdict stays in its
	// status, and the series of the open sale and of a sale yet to open
	// (reconciled after its load-stock) stay.
	if _, err := pool.Exec(ctx, `UPDATE flash_sale SET ends_at = now() - interval '1 second' WHERE id = $1`, broken.ID); err != nil {
		t.Fatal(err)
	}
	soon := testdb.Sale(t, st, 2)
	if _, err := pool.Exec(ctx, `UPDATE flash_sale SET starts_at = now() + interval '1 hour', ends_at = now() + interval '2 hours' WHERE id = $1`, soon.ID); err != nil {
		t.Fatal(err)
	}
	testdb.Load(t, st, stk, soon.ID)
	if _, err := svc.Reconcile(ctx, soon.ID, false); err != nil {
		t.Fatal(err)
	}
	wctx, stop = context.WithCancel(ctx)
	go func() {
		done <- svc.WatchOpenSales(wctx, 100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fams, err := scrape.Gather(m.Gatherer())
		if err != nil {
			t.Fatal(err)
		}
		_, brokenShown := fams.Value("flashsale_ordersvc_reconcile_differences", "sale", strconv.FormatInt(broken.ID, 10))
		_, openShown := fams.Value("flashsale_ordersvc_reconcile_differences", "sale", strconv.FormatInt(open.ID, 10))
		_, soonShown := fams.Value("flashsale_ordersvc_reconcile_differences", "sale", strconv.FormatInt(soon.ID, 10))
		if !brokenShown {
			if !openShown || !soonShown {
				t.Errorf("series of the open sale (%v) and of the sale yet to open (%v) went with the ended one's", openShown, soonShown)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ended sale's reconcile series still exported 30s after its end")
		}
	}
	if v, ok := svc.LastVerdict(broken.ID); !ok || v.Verdict != sale.VerdictDrift {
		t.Errorf("the ended sale's verdict: %+v (%v), want its DRIFT kept", v, ok)
	}
}
