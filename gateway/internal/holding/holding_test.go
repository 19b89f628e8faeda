package holding

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// PostgreSQL answers when Redis cannot: a persisted order is found; no
// order is "unavailable", never "none" (an accepted order may still be on
// its way, and only Redis knows it).
func TestFindWhenRedisFails(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	pool := testenv.Pool(t)
	var sale, item int64
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ($1, now() - interval '1 minute', now() + interval '1 hour') RETURNING id`,
		t.Name()).Scan(&sale); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity, sold) VALUES ($1, 'p', 'item', 1, 5, 1) RETURNING id`,
		sale).Scan(&item); err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, 'pat', 'PENDING', now(), now() + interval '10 minutes')`, id, sale, item); err != nil {
		t.Fatal(err)
	}
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	// A store whose every call fails before reaching Redis, as a Redis
	// outage makes it fail.
	broken := stock.New(rc, stock.WithShards(func(int64) (int, error) { return 0, errors.New("redis: connection refused") }))
	working := stock.New(rc)

	tests := []struct {
		name     string
		st       *stock.Store
		user     string
		wantID   uuid.UUID
		wantNone bool // ErrNone; otherwise an error unless wantID
	}{
		// Redis down, PostgreSQL holds her order: found.
		{name: "redis down, persisted order", st: broken, user: "pat", wantID: id},
		// Redis down, nothing persisted: cannot tell.
		{name: "redis down, no order", st: broken, user: "nobody"},
		// Redis up without a holder, nothing persisted: none.
		{name: "no holder, no order", st: working, user: "nobody", wantNone: true},
		// Redis up without a holder (lost), PostgreSQL holds her order.
		{name: "no holder, persisted order", st: working, user: "pat", wantID: id},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(tt.st, rc, pool)
			if err != nil {
				t.Fatal(err)
			}
			o, err := f.Find(ctx, sale, tt.user)
			switch {
			case tt.wantID != uuid.Nil:
				if err != nil || o.ID != tt.wantID || o.Status != Pending || o.ItemID != item || o.ExpiresAt.Before(time.Now()) {
					t.Fatalf("Find = %+v, %v; want PENDING order %s of item %d", o, err, tt.wantID, item)
				}
			case tt.wantNone:
				if !errors.Is(err, ErrNone) {
					t.Fatalf("Find = %+v, %v; want ErrNone", o, err)
				}
			default:
				if err == nil || errors.Is(err, ErrNone) || errors.Is(err, ErrUnconfirmed) {
					t.Fatalf("Find = %+v, %v; want an error that is neither none nor unconfirmed", o, err)
				}
			}
		})
	}
}

// What a replay's lookup costs against the local stack, beside the
// reservation it replaces (one EVALSHA): a holder in a loaded sale whose
// order is persisted (Redis round trip, then a primary-key read), and a
// shopper with no holder (Redis alone).
//
//	go test ./internal/holding -run '^$' -bench . -benchmem
func BenchmarkFind(b *testing.B) {
	testenv.Require(b, testenv.RedisAddr())
	ctx := testenv.Context(b)
	pool := testenv.Pool(b)
	var sale, item int64
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale (name, starts_at, ends_at) VALUES ($1, now() - interval '1 minute', now() + interval '1 hour') RETURNING id`,
		b.Name()).Scan(&sale); err != nil {
		b.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity, sold) VALUES ($1, 'p', 'item', 1, 5, 1) RETURNING id`,
		sale).Scan(&item); err != nil {
		b.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	if _, err := pool.Exec(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, 'pat', 'PENDING', now(), now() + interval '10 minutes')`, id, sale, item); err != nil {
		b.Fatal(err)
	}
	rc := testenv.RedisClient(b, testenv.RedisAddr())
	st := stock.New(rc)
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: 4}}, []stock.Holder{{UserID: "pat", OrderID: id.String()}}); err != nil {
		b.Fatal(err)
	}
	f, err := New(st, rc, pool)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, user string
		want       error
	}{
		{"holder, persisted order", "pat", nil},
		{"no holder", "nobody", ErrNone},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Find(ctx, sale, c.user); !errors.Is(err, c.want) {
					b.Fatal(err)
				}
			}
		})
	}
}
