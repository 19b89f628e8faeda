package schema_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	if err := schema.MigrateDSN(ctx, testenv.PostgresDSN()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
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
