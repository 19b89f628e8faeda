package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/tools/testenv"
)

// TestActiveLookupSurvivesStaleStatistics: the consumer's check for
// shoppers who already hold an active order (sqlActive) must look each
// pair up in the one-active index, even when the statistics say almost no
// order is active. That is the state after the order service expired a
// day of sales and an analyze ran, and then a sale of 10,000 orders
// streamed in: a plain join then read the sale's whole active set for
// every pair of a batch. The test builds that state in a database of its
// own (the shared one's statistics belong to every other test).
func TestActiveLookupSurvivesStaleStatistics(t *testing.T) {
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.FreshDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		// 400 sales with 750 expired orders each, analyzed.
		`INSERT INTO flash_sale (name, starts_at, ends_at)
		 SELECT 'past ' || g, now() - interval '1 hour', now() + interval '1 hour' FROM generate_series(1, 400) g`,
		`INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity) SELECT id, 'p', 'i', 1, 1000 FROM flash_sale`,
		`INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		 SELECT gen_random_uuid(), i.sale_id, i.id, 'u' || g, 'EXPIRED', now(), now()
		 FROM flash_sale_item i, generate_series(1, 750) g`,
		`ANALYZE flash_sale_order`,
		// The sale being sold: 10,000 active orders the statistics do not know.
		`INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ('hot', now(), now() + interval '1 hour')`,
		`INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
		 SELECT max(id), 'p', 'i', 1, 100000 FROM flash_sale`,
		`INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		 SELECT gen_random_uuid(), i.sale_id, i.id, 'h' || g, 'PENDING', now(), now() + interval '10 minutes'
		 FROM flash_sale_item i, generate_series(1, 10000) g WHERE i.sale_id = (SELECT max(id) FROM flash_sale)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var hot int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM flash_sale`).Scan(&hot); err != nil {
		t.Fatal(err)
	}
	// A batch of 500: 499 new shoppers and one who holds an order.
	sales, users := make([]int64, 500), make([]string, 500)
	for i := range sales {
		sales[i], users[i] = hot, fmt.Sprintf("new-%d", i)
	}
	users[0] = "h42"
	rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+sqlActive, sales, users)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Join Filter") || !strings.Contains(plan, "Index Cond: ((sale_id = u.sale_id) AND (user_id = u.user_id))") {
		t.Fatalf("the active-order check does not look each pair up in an index:\n%s", plan)
	}
	// And it answers: the one shopper who holds an order, only her.
	got, err := pool.Query(ctx, sqlActive, sales, users)
	if err != nil {
		t.Fatal(err)
	}
	var active []string
	var sale int64
	var user string
	if _, err := pgx.ForEachRow(got, []any{&sale, &user}, func() error {
		active = append(active, fmt.Sprintf("%d/%s", sale, user))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d/h42", hot); len(active) != 1 || active[0] != want {
		t.Fatalf("active pairs %v, want [%s]", active, want)
	}
}
