package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/tools/testenv"
)

func testCatalog(t *testing.T) (*Catalog, *pgxpool.Pool, context.Context) {
	t.Helper()
	ctx := testenv.Context(t)
	pool := testenv.Pool(t)
	return New(pool, []byte("0123456789abcdef0123456789abcdef")), pool, ctx
}

func createSale(t *testing.T, ctx context.Context, pool *pgxpool.Pool) (sale, item int64) {
	t.Helper()
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ($1, now(), now() + interval '10 minutes') RETURNING id`,
		t.Name()).Scan(&sale); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity) VALUES ($1, 'p', 'i', 1, 5) RETURNING id`,
		sale).Scan(&item); err != nil {
		t.Fatal(err)
	}
	return sale, item
}

// A refresh reads the sales only when catalog_version moved since the last
// load: other tests create sales on the same database meanwhile, so the
// test checks the rule (a load exactly when the version moved) refresh by
// refresh, and that it saw at least one refresh that skipped the load.
func TestRefreshLoadsOnlyWhenTheVersionMoved(t *testing.T) {
	c, pool, ctx := testCatalog(t)
	frozen := time.Now()
	c.now = func() time.Time { return frozen }
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.versioned {
		t.Fatal("no catalog_version read: is migration 0007 applied?")
	}
	skipped := false
	for range 50 {
		loads, version := c.Loads(), c.version
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		loaded := c.Loads() != loads
		if moved := c.version != version; loaded != moved {
			t.Fatalf("loaded=%v but the version moved=%v (%d -> %d)", loaded, moved, version, c.version)
		}
		if !loaded {
			skipped = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !skipped {
		t.Fatal("every refresh loaded: the version kept moving, or the refresh ignores it")
	}

	// A new sale, then an operator's change to it and to its item.
	sale, item := createSale(t, ctx, pool)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s, ok := c.Sale(sale)
	if !ok {
		t.Fatal("a sale created since the last refresh is not in the catalog")
	}
	if _, err := pool.Exec(ctx, `UPDATE flash_sale SET admission_rate = 777 WHERE id = $1`, sale); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ = c.Sale(sale); s.Queue.AdmissionRate != 777 {
		t.Fatalf("admission rate %v after the operator set 777", s.Queue.AdmissionRate)
	}
	if _, err := pool.Exec(ctx, `UPDATE flash_sale_item SET quantity = 9 WHERE id = $1`, item); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ = c.Sale(sale)
	if it, ok := s.Item(item); !ok || it.Quantity != 9 {
		t.Fatalf("item %+v after its quantity was set to 9", it)
	}
}

// A minute after the last load a refresh loads whatever the version says:
// sales leave the catalog by time alone, a day after they ended.
func TestRefreshLoadsAfterAMinuteWhatever(t *testing.T) {
	c, _, ctx := testCatalog(t)
	now := time.Now()
	c.now = func() time.Time { return now }
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	loads := c.Loads()
	now = now.Add(reloadEvery)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Loads() == loads {
		t.Fatal("no load a minute after the last one")
	}
}
