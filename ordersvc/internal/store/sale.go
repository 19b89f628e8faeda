package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"flashsale/pkg/stock"
)

// NewSale is a sale to create. Validation of the operator's input happens in
// package sale; the table constraints here are the last word.
type NewSale struct {
	Name       string
	StartsAt   time.Time
	EndsAt     time.Time
	PaymentTTL time.Duration
	Queue      Queue
	// StockShards splits each item's stock over this many Redis shards
	// (pkg/stock); 0 means 1.
	StockShards int
	Items       []NewItem
}

// Queue is a sale's admission settings, read by the gateways.
type Queue struct {
	Enabled       bool  // shoppers need an admission token from the virtual queue
	Draw          bool  // early joiners are ordered by a random draw at the opening
	AdmissionRate int64 // shoppers admitted per second at the start
	PowDifficulty int   // leading zero bits of the proof of work to join; 0 = none
}

// DefaultQueue is the queue of a sale created without settings: none.
var DefaultQueue = Queue{Draw: true, AdmissionRate: 100}

// NewItem is an item of a new sale. Price is a decimal string ("19.99") so
// no float ever touches money.
type NewItem struct {
	ProductID string
	Name      string
	Price     string
	Quantity  int64
}

// Sale is a stored sale with its items.
type Sale struct {
	ID          int64
	Name        string
	StartsAt    time.Time
	EndsAt      time.Time
	PaymentTTL  time.Duration
	Queue       Queue
	StockShards int
	CreatedAt   time.Time
	Items       []Item
}

// Item is a stored item. Sold counts units held by active orders.
type Item struct {
	ID        int64
	SaleID    int64
	ProductID string
	Name      string
	Price     string
	Quantity  int64
	Sold      int64
}

// CreateSale writes a sale and its items in one transaction.
func (s *Store) CreateSale(ctx context.Context, ns NewSale) (Sale, error) {
	sale, _, err := s.createSale(ctx, ns, "", nil)
	return sale, err
}

// ErrKeyReused refuses a sale whose idempotency key already made a sale
// from another request.
var ErrKeyReused = errors.New("store: idempotency key already used for another sale")

// CreateSaleOnce is CreateSale under an idempotency key (migration 0011):
// the first call with key creates the sale; a later one with the same key
// and the same request (RequestDigest) returns that sale, with replayed
// true, and creates nothing; one with another request gets ErrKeyReused.
// Two calls at once with one key make one sale: the second insert waits
// for the first's transaction and then finds its row.
func (s *Store) CreateSaleOnce(ctx context.Context, key string, ns NewSale) (sale Sale, replayed bool, err error) {
	digest := RequestDigest(ns)
	// The key's sale, looked up first: a replay inserts nothing, so it
	// does not move the catalog version (migration 0007's trigger fires on
	// an INSERT statement even when ON CONFLICT leaves it no row).
	sale, found, err := s.saleOfKey(ctx, key, digest)
	if err != nil || found {
		return sale, found, err
	}
	sale, created, err := s.createSale(ctx, ns, key, digest)
	if err != nil || created {
		return sale, false, err
	}
	// Another call with the key committed between the lookup and the insert.
	sale, found, err = s.saleOfKey(ctx, key, digest)
	if err == nil && !found {
		err = fmt.Errorf("create sale %q: key %q held by a sale not found", ns.Name, key)
	}
	return sale, found, err
}

// saleOfKey returns the sale made under key, found false when none was;
// ErrKeyReused when it was made from another request than digest's.
func (s *Store) saleOfKey(ctx context.Context, key string, digest []byte) (Sale, bool, error) {
	var id int64
	var was []byte
	err := s.pool.QueryRow(ctx, `SELECT id, request_digest FROM flash_sale WHERE idempotency_key = $1`, key).Scan(&id, &was)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Sale{}, false, nil
	case err != nil:
		return Sale{}, false, fmt.Errorf("read the sale of idempotency key %q: %w", key, err)
	case !bytes.Equal(was, digest):
		return Sale{}, false, fmt.Errorf("key %q made sale %d: %w", key, id, ErrKeyReused)
	}
	sale, err := s.GetSale(ctx, id)
	return sale, err == nil, err
}

// RequestDigest is the SHA-256 of a sale request in a canonical form, so
// two requests for the same sale match however they were spelt: times in
// UTC to PostgreSQL's microsecond, prices as decimals without trailing
// zeros ("1", "1.0" and 1.00 are one price), 0 shards as 1. Each field is
// written quoted or as a number, in a fixed order under a version tag, so
// a field added to NewSale later changes no earlier digest.
func RequestDigest(ns NewSale) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "sale/v1 %q %d %d %d %t %t %d %d %d %d\n", ns.Name, ns.StartsAt.UnixMicro(), ns.EndsAt.UnixMicro(), ns.PaymentTTL.Microseconds(),
		ns.Queue.Enabled, ns.Queue.Draw, ns.Queue.AdmissionRate, ns.Queue.PowDifficulty, max(ns.StockShards, 1), len(ns.Items))
	for _, it := range ns.Items {
		fmt.Fprintf(h, "item %q %q %q %d\n", it.ProductID, it.Name, canonicalPrice(it.Price), it.Quantity)
	}
	return h.Sum(nil)
}

// canonicalPrice drops a decimal's trailing zeros and point: "1.50" is
// "1.5", "1.00" is "1". A validated price has no other spellings.
func canonicalPrice(p string) string {
	if strings.Contains(p, ".") {
		p = strings.TrimRight(strings.TrimRight(p, "0"), ".")
	}
	return p
}

// createSale inserts the sale and its items; with a key, created is false
// (and nothing written) when a sale already holds it.
func (s *Store) createSale(ctx context.Context, ns NewSale, key string, digest []byte) (sale Sale, created bool, err error) {
	sale = Sale{Name: ns.Name, StartsAt: ns.StartsAt, EndsAt: ns.EndsAt, PaymentTTL: ns.PaymentTTL, Queue: ns.Queue,
		StockShards: max(ns.StockShards, 1)}
	var keyArg *string
	if key != "" {
		keyArg = &key
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO flash_sale (name, starts_at, ends_at, payment_ttl,
			                        queue_enabled, queue_draw, admission_rate, pow_difficulty, stock_shards,
			                        idempotency_key, request_digest)
			VALUES ($1, $2, $3, make_interval(secs => $4), $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (idempotency_key) DO NOTHING
			RETURNING id, starts_at, ends_at, created_at`,
			ns.Name, ns.StartsAt, ns.EndsAt, ns.PaymentTTL.Seconds(),
			ns.Queue.Enabled, ns.Queue.Draw, ns.Queue.AdmissionRate, ns.Queue.PowDifficulty, sale.StockShards,
			keyArg, digest,
		).Scan(&sale.ID, &sale.StartsAt, &sale.EndsAt, &sale.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the key's sale exists: created stays false
		}
		if err != nil {
			return fmt.Errorf("insert sale: %w", err)
		}
		b := &pgx.Batch{}
		for _, it := range ns.Items {
			b.Queue(`
				INSERT INTO flash_sale_item (sale_id, product_id, name, price, quantity)
				VALUES ($1, $2, $3, $4::numeric, $5)
				RETURNING id, price::text`,
				sale.ID, it.ProductID, it.Name, it.Price, it.Quantity)
		}
		br := tx.SendBatch(ctx, b)
		for _, it := range ns.Items {
			item := Item{SaleID: sale.ID, ProductID: it.ProductID, Name: it.Name, Quantity: it.Quantity}
			if err := br.QueryRow().Scan(&item.ID, &item.Price); err != nil {
				br.Close()
				return fmt.Errorf("insert item %q: %w", it.Name, err)
			}
			sale.Items = append(sale.Items, item)
		}
		created = true
		return br.Close()
	})
	if err != nil {
		return Sale{}, false, fmt.Errorf("create sale %q: %w", ns.Name, err)
	}
	return sale, created, nil
}

// GetSale reads a sale and its items in one snapshot.
func (s *Store) GetSale(ctx context.Context, saleID int64) (Sale, error) {
	var sale Sale
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		sale, err = getSale(ctx, tx, saleID)
		return err
	})
	if err != nil {
		return Sale{}, fmt.Errorf("get sale %d: %w", saleID, err)
	}
	return sale, nil
}

func getSale(ctx context.Context, tx pgx.Tx, saleID int64) (Sale, error) {
	sale := Sale{ID: saleID}
	var ttlMicros int64
	err := tx.QueryRow(ctx, `
		SELECT name, starts_at, ends_at, (extract(epoch FROM payment_ttl) * 1000000)::bigint, created_at,
		       queue_enabled, queue_draw, admission_rate, pow_difficulty, stock_shards
		FROM flash_sale WHERE id = $1`, saleID,
	).Scan(&sale.Name, &sale.StartsAt, &sale.EndsAt, &ttlMicros, &sale.CreatedAt,
		&sale.Queue.Enabled, &sale.Queue.Draw, &sale.Queue.AdmissionRate, &sale.Queue.PowDifficulty, &sale.StockShards)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sale{}, ErrNotFound
	}
	if err != nil {
		return Sale{}, fmt.Errorf("read sale: %w", err)
	}
	sale.PaymentTTL = time.Duration(ttlMicros) * time.Microsecond
	rows, err := tx.Query(ctx, `
		SELECT id, product_id, name, price::text, quantity, sold
		FROM flash_sale_item WHERE sale_id = $1 ORDER BY id`, saleID)
	if err != nil {
		return Sale{}, fmt.Errorf("read items: %w", err)
	}
	sale.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
		it := Item{SaleID: saleID}
		err := r.Scan(&it.ID, &it.ProductID, &it.Name, &it.Price, &it.Quantity, &it.Sold)
		return it, err
	})
	if err != nil {
		return Sale{}, fmt.Errorf("read items: %w", err)
	}
	return sale, nil
}

// StockSnapshot is what Redis must hold for a sale: per item the units left
// (quantity minus active orders) and the users holding active orders.
type StockSnapshot struct {
	Sale    Sale
	Items   []stock.ItemStock
	Holders []stock.Holder
	// Spent are the admissions orders were placed with: active or ended,
	// not rejected (a rejected order never existed, and the relay gave its
	// admission back). An admission buys once.
	Spent []stock.SpentAdmission
}

// StockSnapshot computes the sale's hot copy from active orders, in one
// REPEATABLE READ snapshot so stock and holders agree with each other.
func (s *Store) StockSnapshot(ctx context.Context, saleID int64) (StockSnapshot, error) {
	var snap StockSnapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		sale, err := getSale(ctx, tx, saleID)
		if err != nil {
			return err
		}
		snap = StockSnapshot{Sale: sale}
		snap.Items, err = collect(ctx, tx, "count active orders", pgx.RowToStructByPos[stock.ItemStock], `
			SELECT i.id, i.quantity - count(o.id)
			FROM flash_sale_item i
			LEFT JOIN flash_sale_order o ON o.sale_id = i.sale_id AND o.item_id = i.id AND o.status IN ('PENDING', 'PAID')
			WHERE i.sale_id = $1
			GROUP BY i.id ORDER BY i.id`, saleID)
		if err != nil {
			return err
		}
		snap.Holders, err = collect(ctx, tx, "read holders", pgx.RowToStructByPos[stock.Holder], `
			SELECT user_id, id::text FROM flash_sale_order
			WHERE sale_id = $1 AND status IN ('PENDING', 'PAID')
			ORDER BY user_id`, saleID)
		if err != nil {
			return err
		}
		snap.Spent, err = spentAdmissions(ctx, tx, saleID)
		return err
	})
	if err != nil {
		return StockSnapshot{}, fmt.Errorf("stock snapshot of sale %d: %w", saleID, err)
	}
	return snap, nil
}

// SpentAdmissions are the admissions the sale's orders were placed with
// (see StockSnapshot.Spent).
func (s *Store) SpentAdmissions(ctx context.Context, saleID int64) ([]stock.SpentAdmission, error) {
	spent, err := spentAdmissions(ctx, s.pool, saleID)
	if err != nil {
		return nil, fmt.Errorf("sale %d: %w", saleID, err)
	}
	return spent, nil
}

func spentAdmissions(ctx context.Context, q querier, saleID int64) ([]stock.SpentAdmission, error) {
	return collect(ctx, q, "read spent admissions", pgx.RowToStructByPos[stock.SpentAdmission], `
		SELECT user_id, admission_id FROM flash_sale_order
		WHERE sale_id = $1 AND admission_id IS NOT NULL AND status <> 'REJECTED'`, saleID)
}

// LockSaleWrites takes the sale's advisory lock on a session of its own, so
// that one repair or load-stock at a time rewrites the sale's Redis copy,
// across every order service instance: two at once could interleave their
// writes shard by shard (units lost, or sold twice). ok is false when
// another session holds it. unlock ends the session, which releases the
// lock; so does a crash, with the connection.
func (s *Store) LockSaleWrites(ctx context.Context, saleID int64) (unlock func(), ok bool, err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock sale %d: %w", saleID, err)
	}
	conn := pc.Hijack() // closed, not returned to the pool: a session that ends holds no lock
	closeConn := func() { _ = conn.Close(context.Background()) }
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+saleWritesKey+`)`, saleID).Scan(&ok); err != nil {
		closeConn()
		return nil, false, fmt.Errorf("lock sale %d: %w", saleID, err)
	}
	if !ok {
		closeConn()
		return nil, false, nil
	}
	return func() {
		// Unlocked before the session ends: the server drops a closed
		// session's locks a moment after the client has moved on, and the
		// caller's next repair or load must not find it still held.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(`+saleWritesKey+`)`, saleID)
		closeConn()
	}, true, nil
}

// saleWritesKey is the advisory lock key of sale $1's writes.
const saleWritesKey = `hashtextextended('flashsale:sale-writes:' || $1::bigint, 0)`
