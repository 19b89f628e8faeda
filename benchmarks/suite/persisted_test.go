package suite

import (
	"io"
	"testing"
	"time"

	"flashsale/tools/testenv"
)

// "Persisted" is when the sale's last order was committed, not when the
// transaction that wrote it began: a consumer writing a big batch starts
// its transaction right after the last sale and commits well after it.
func TestLastCommittedIsTheCommit(t *testing.T) {
	pool := testenv.Pool(t)
	ctx := testenv.Context(t)
	var tracked string
	if err := pool.QueryRow(ctx, `SHOW track_commit_timestamp`).Scan(&tracked); err != nil {
		t.Fatal(err)
	}
	if tracked != "on" {
		t.Fatal("the stack's PostgreSQL runs without track_commit_timestamp, which deploy/stack/postgres.sh sets: restart it (bash deploy/stack.sh restart postgres)")
	}
	// An ended sale, so no gateway or order service of another test acts on it.
	var saleID, itemID int64
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at)
		VALUES ('bench commit time', now() - interval '2 hours', now() - interval '1 hour') RETURNING id`).Scan(&saleID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
		VALUES ($1, 'p', 'item', 1, 10) RETURNING id`, saleID).Scan(&itemID); err != nil {
		t.Fatal(err)
	}
	r := &runner{pool: pool, progress: io.Discard}
	if last, err := r.lastCommitted(ctx, saleID); err != nil || last != nil {
		t.Fatalf("a sale without orders: %v, %v; want none", last, err)
	}

	const held = 300 * time.Millisecond
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	if _, err := tx.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES (gen_random_uuid(), $1, $2, 'u1', 'PENDING', now(), now() + interval '10 minutes')`, saleID, itemID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(held)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()

	last, err := r.lastCommitted(ctx, saleID)
	if err != nil || last == nil {
		t.Fatalf("last committed: %v, %v", last, err)
	}
	var began time.Time
	if err := pool.QueryRow(ctx, `SELECT persisted_at FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&began); err != nil {
		t.Fatal(err)
	}
	if last.Sub(began) < held {
		t.Errorf("last committed %v is %v after its transaction began, want at least the %v it was held open", last, last.Sub(began), held)
	}
	if last.After(committed) {
		t.Errorf("last committed %v is after the commit returned (%v)", last, committed)
	}
}
