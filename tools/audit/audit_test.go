package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// fixture is a sale of one item with `quantity` units, `sold` of them held by
// consistent PENDING orders in PostgreSQL and Redis, as after a clean run.
type fixture struct {
	pool     *pgxpool.Pool
	st       *stock.Store
	sale     int64
	item     int64
	accepted map[string]string
}

func newFixture(t *testing.T, quantity, sold int) *fixture {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	pool := testenv.Pool(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	f := &fixture{pool: pool, st: stock.New(rc), accepted: map[string]string{}}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ('audit', now(), now() + interval '1 hour') RETURNING id`).Scan(&f.sale); err != nil {
		t.Fatal(err)
	}
	// Planted faults must not outlive the test: an order beyond quantity
	// would later make the expiry sweeper's sold - n go below zero.
	t.Cleanup(func() {
		c := context.Background()
		for _, q := range []string{
			`DELETE FROM stock_release WHERE sale_id = $1`, `DELETE FROM flash_sale_order WHERE sale_id = $1`,
			`DELETE FROM flash_sale_item WHERE sale_id = $1`, `DELETE FROM flash_sale WHERE id = $1`,
		} {
			if _, err := pool.Exec(c, q, f.sale); err != nil {
				t.Errorf("clean up sale %d: %v", f.sale, err)
			}
		}
		rc.Do(c, rc.B().Del().Key(stock.HoldersKey(f.sale), stock.StockKey(f.sale, f.item)).Build())
	})
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity, sold) VALUES ($1, 'p', 'i', 1, $2, $3) RETURNING id`, f.sale, quantity, sold).Scan(&f.item); err != nil {
		t.Fatal(err)
	}
	var holders []stock.Holder
	for i := range sold {
		id, user := uuid.NewString(), fmt.Sprintf("u%d", i)
		f.insertOrder(t, id, user)
		f.accepted[id] = user
		holders = append(holders, stock.Holder{UserID: user, OrderID: id})
	}
	if err := f.st.Load(ctx, f.sale, []stock.ItemStock{{ItemID: f.item, Left: int64(quantity - sold)}}, holders); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) insertOrder(t *testing.T, id, user string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 'PENDING', now(), now() + interval '10 minutes')`, id, f.sale, f.item, user); err != nil {
		t.Fatal(err)
	}
}

// insertRejected writes a REJECTED row whose unit was already given back.
func (f *fixture) insertRejected(t *testing.T, id, user, reason string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at, closed_at, reject_reason)
		VALUES ($1, $2, $3, $4, 'REJECTED', now(), now(), now(), $5)`, id, f.sale, f.item, user, reason); err != nil {
		t.Fatal(err)
	}
}

func TestAudit(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, f *fixture)
		check func(v Verdict) bool
	}{
		{"clean run passes", func(*testing.T, *fixture) {}, func(v Verdict) bool { return v.OK() }},
		{"planted oversell: an active order beyond quantity", func(t *testing.T, f *fixture) {
			id := uuid.NewString()
			f.insertOrder(t, id, "extra") // bypasses the sold counter, as a buggy consumer would
			f.accepted[id] = "extra"
		}, func(v Verdict) bool { return !v.OK() && v.Oversold == 1 }},
		{"planted lost order: a 202 without a row", func(t *testing.T, f *fixture) {
			f.accepted[uuid.NewString()] = "ghost"
		}, func(v Verdict) bool { return !v.OK() && v.Lost == 1 && v.Oversold == 0 }},
		{"a row nobody was told about is a duplicate", func(t *testing.T, f *fixture) {
			var id string
			for k := range f.accepted {
				id = k
				break
			}
			delete(f.accepted, id)
		}, func(v Verdict) bool { return !v.OK() && v.Duplicates == 1 }},
		{"a gateway's tombstone for a publish it gave up on is no duplicate", func(t *testing.T, f *fixture) {
			f.insertRejected(t, uuid.NewString(), "late", PublishFailed)
		}, func(v Verdict) bool { return v.OK() && v.Duplicates == 0 }},
		{"any other REJECTED row nobody was told about is a duplicate", func(t *testing.T, f *fixture) {
			f.insertRejected(t, uuid.NewString(), "late", "ALREADY_ACTIVE")
		}, func(v Verdict) bool { return !v.OK() && v.Duplicates == 1 }},
		{"Redis stock drifting from PostgreSQL breaks conservation", func(t *testing.T, f *fixture) {
			if err := f.st.Load(context.Background(), f.sale, []stock.ItemStock{{ItemID: f.item, Left: 5}}, nil); err != nil {
				t.Fatal(err)
			}
		}, func(v Verdict) bool { return !v.OK() && !v.StockConserved }},
		{"negative Redis stock is an oversell", func(t *testing.T, f *fixture) {
			if err := f.st.Load(context.Background(), f.sale, []stock.ItemStock{{ItemID: f.item, Left: -2}}, nil); err == nil {
				t.Fatal("Load accepted negative stock")
			}
			rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
			defer rc.Close()
			rc.Do(context.Background(), rc.B().Set().Key(stock.StockKey(f.sale, f.item)).Value("-2").Build())
		}, func(v Verdict) bool { return !v.OK() && v.Oversold >= 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 3, 3)
			tt.plant(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			v, err := Run(ctx, f.pool, f.st, f.sale, f.accepted)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(v) {
				t.Errorf("verdict %+v does not match the planted fault", v)
			}
		})
	}
}
