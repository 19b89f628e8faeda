package schema_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/schema"
	"flashsale/tools/testenv"
)

// Several services start at once: each migrates, each file applies once.
func TestMigrateConcurrentlyAndTwice(t *testing.T) {
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = schema.MigrateDSN(ctx, testenv.PostgresDSN()) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := schema.MigrateDSN(ctx, testenv.PostgresDSN()); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}

// The constraints are the safety net under Redis: check they bite.
func TestConstraints(t *testing.T) {
	ctx := testenv.Context(t)
	pool := testenv.Pool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // nothing of this test stays
	var sale, item int64
	if err := tx.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ('c', now(), now() + interval '1 hour') RETURNING id`).Scan(&sale); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity) VALUES ($1, 'p', 'i', 1, 2) RETURNING id`, sale).Scan(&item); err != nil {
		t.Fatal(err)
	}
	var otherSale int64
	if err := tx.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ('c2', now(), now() + interval '1 hour') RETURNING id`).Scan(&otherSale); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
	           VALUES (gen_random_uuid(), $1, $2, $3, $4, now(), now() + interval '10 minutes')`
	tests := []struct {
		name     string
		sql      string
		args     []any
		wantCode string // "" = must succeed
	}{
		{"first active order", insert, []any{sale, item, "u1", "PENDING"}, ""},
		{"second active order of the same user", insert, []any{sale, item, "u1", "PAID"}, "23505"},
		{"an ended order does not block", insert, []any{sale, item, "u1", "EXPIRED"}, ""},
		{"unknown status", insert, []any{sale, item, "u2", "WHATEVER"}, "23514"},
		{"sold within quantity", `UPDATE flash_sale_item SET sold = 2 WHERE id = $1`, []any{item}, ""},
		{"sold above quantity (off by one)", `UPDATE flash_sale_item SET sold = 3 WHERE id = $1`, []any{item}, "23514"},
		{"negative sold", `UPDATE flash_sale_item SET sold = -1 WHERE id = $1`, []any{item}, "23514"},
		{"an item of another sale", `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		  SELECT gen_random_uuid(), $1, $2, 'u3', 'PENDING', now(), now() + interval '10 minutes'`, []any{otherSale, item}, "23503"},
		{"an unknown item", insert, []any{sale, int64(-1), "u4", "PENDING"}, "23503"},
		{"an unknown sale", insert, []any{int64(-1), item, "u5", "PENDING"}, "23503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
				t.Fatal(err)
			}
			_, err := tx.Exec(ctx, tt.sql, tt.args...)
			var pgErr *pgconn.PgError
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.wantCode != "" && (!errors.As(err, &pgErr) || pgErr.Code != tt.wantCode):
				t.Fatalf("got %v, want SQLSTATE %s", err, tt.wantCode)
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
				t.Fatal(err)
			}
			if tt.wantCode == "" {
				// keep successful steps for the next rows
				if _, err := tx.Exec(ctx, tt.sql, tt.args...); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCatalogVersion: every statement that changes what a gateway's catalog
// shows bumps catalog_version, and the order service's sold updates do not
// (gateways would reload the catalog on every consumer batch).
func TestCatalogVersion(t *testing.T) {
	pool := testenv.Pool(t)
	steps := []catalogStep{
		{"sale created", `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ('v', now(), now() + interval '1 hour')`, true},
		{"item added", `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
			SELECT max(id), 'p', 'i', 1, 5 FROM flash_sale`, true},
		{"sold counted (the consumer's batch)", `UPDATE flash_sale_item SET sold = sold + 1 WHERE sale_id = (SELECT max(id) FROM flash_sale)`, false},
		{"sold counted with a join (the expiry's form)", `UPDATE flash_sale_item i SET sold = i.sold - 1 FROM flash_sale s
			WHERE s.id = i.sale_id AND s.id = (SELECT max(id) FROM flash_sale)`, false},
		{"quantity changed", `UPDATE flash_sale_item SET quantity = quantity + 1 WHERE sale_id = (SELECT max(id) FROM flash_sale)`, true},
		{"price changed", `UPDATE flash_sale_item SET price = 2 WHERE sale_id = (SELECT max(id) FROM flash_sale)`, true},
		{"admission settings changed", `UPDATE flash_sale SET admission_rate = 7 WHERE id = (SELECT max(id) FROM flash_sale)`, true},
		{"sale ended early", `UPDATE flash_sale SET ends_at = starts_at + interval '1 second' WHERE id = (SELECT max(id) FROM flash_sale)`, true},
		{"item removed", `DELETE FROM flash_sale_item WHERE sale_id = (SELECT max(id) FROM flash_sale)`, true},
	}
	// In one REPEATABLE READ transaction, rolled back: its own bumps are
	// the only ones it sees, whatever other tests commit meanwhile. One
	// that commits a bump first makes ours fail to serialize: run again.
	for attempt := 1; ; attempt++ {
		err := catalogVersionSteps(t, pool, steps)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" && attempt < 10 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// catalogStep is a statement and whether it must bump catalog_version.
type catalogStep struct {
	name string
	sql  string
	bump bool
}

func catalogVersionSteps(t *testing.T, pool *pgxpool.Pool, steps []catalogStep) error {
	ctx := testenv.Context(t)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // nothing of this test stays
	version := func() (int64, error) {
		var v int64
		err := tx.QueryRow(ctx, `SELECT version FROM catalog_version`).Scan(&v)
		return v, err
	}
	before, err := version()
	if err != nil {
		return err
	}
	for _, s := range steps {
		if _, err := tx.Exec(ctx, s.sql); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		after, err := version()
		if err != nil {
			return err
		}
		if bumped := after != before; bumped != s.bump {
			t.Errorf("%s: version %d -> %d, want bumped=%v", s.name, before, after, s.bump)
		}
		before = after
	}
	return nil
}
