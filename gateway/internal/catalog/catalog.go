// Package catalog is the gateway's in-memory view of the sales: what is on
// sale, when it opens, and for each item a sold-out flag that refuses
// requests without any network call. Sales come from PostgreSQL (the source
// of truth) on a timer; units left come from Redis. The request path only
// reads an atomic pointer and atomics.
package catalog

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// State of a sale as shown to shoppers.
type State string

// Sale states.
const (
	Upcoming State = "UPCOMING"
	Open     State = "OPEN"
	SoldOut  State = "SOLD_OUT"
	Ended    State = "ENDED"
)

// Item is one product on sale. Its pointer is stable across refreshes, so
// the sold-out flag and the cached stock survive a catalog reload.
type Item struct {
	ID        int64
	SaleID    int64
	ProductID string
	Name      string
	Price     string // decimal text as stored, never a float
	Quantity  int64

	live *liveState // shared by every copy of this item across refreshes
}

// liveState is what the gateway learns about an item while it runs.
type liveState struct {
	soldOut atomic.Bool
	left    atomic.Int64 // last units left read from Redis; -1 unknown
}

// SoldOut reports the in-process flag.
func (it *Item) SoldOut() bool { return it.live.soldOut.Load() }

// MarkSoldOut sets the flag after Redis answered SOLD_OUT.
func (it *Item) MarkSoldOut() {
	it.live.soldOut.Store(true)
	it.live.left.Store(0)
}

// setLeft records units left read from Redis; stock above zero clears the flag.
func (it *Item) setLeft(n int64) {
	it.live.left.Store(n)
	if n > 0 {
		it.live.soldOut.Store(false)
	}
}

// Left is the last known number of units left (approximate), -1 if unknown.
func (it *Item) Left() int64 { return it.live.left.Load() }

// Sale is one flash sale with its items.
type Sale struct {
	ID       int64
	Name     string
	StartsAt time.Time
	EndsAt   time.Time
	Items    []*Item // ordered by id
	byID     map[int64]*Item
	gate     string
	gateB    []byte
	Queue    QueueSettings
	// StockShards is how many Redis shards hold each item's stock (see
	// pkg/stock); fixed for the sale's life.
	StockShards int
}

// QueueSettings are a sale's admission settings.
type QueueSettings struct {
	Enabled       bool    // a queue admission token is needed to buy
	Draw          bool    // early joiners are drawn at random at the opening
	AdmissionRate float64 // per second, the starting value; operators change it live
	PowDifficulty int     // leading zero bits asked to join; 0 = none
}

// Item returns the sale's item with that id.
func (s *Sale) Item(id int64) (*Item, bool) {
	it, ok := s.byID[id]
	return it, ok
}

// StateAt tells the state at t from the clock and the sold-out flags.
func (s *Sale) StateAt(t time.Time) State {
	switch {
	case t.Before(s.StartsAt):
		return Upcoming
	case !t.Before(s.EndsAt):
		return Ended
	}
	for _, it := range s.Items {
		if !it.SoldOut() && it.Left() != 0 {
			return Open
		}
	}
	return SoldOut
}

// IsOpen reports whether purchases are accepted at t (sold out or not).
func (s *Sale) IsOpen(t time.Time) bool { return !t.Before(s.StartsAt) && t.Before(s.EndsAt) }

// Gate is the secret path segment of the sale's purchase URL. It is derived
// from a server-side key, so every gateway computes the same one, and it is
// only revealed once the sale is open.
func (s *Sale) Gate() string { return s.gate }

// CheckGate compares a requested gate with the sale's in constant time.
func (s *Sale) CheckGate(g []byte) bool { return hmac.Equal(g, s.gateB) }

// Gate derives the purchase-URL secret of a sale.
func Gate(key []byte, saleID int64) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("flashsale gate v1:"))
	m.Write(strconv.AppendInt(nil, saleID, 10))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Catalog holds the current view. The zero value is not usable; use New.
type Catalog struct {
	pool    *pgxpool.Pool
	gateKey []byte
	sales   atomic.Pointer[map[int64]*Sale]
	loaded  atomic.Bool

	// mu serializes refreshes; the fields below are theirs.
	mu sync.Mutex
	// version is catalog_version's value read before the last load, and
	// versioned whether there was one (a database not migrated to 0007
	// has none: every refresh loads).
	version   int64
	versioned bool
	loadedAt  time.Time
	loads     atomic.Uint64
	now       func() time.Time
}

// reloadEvery bounds how long a refresh trusts an unchanged version: sales
// also leave the catalog by time alone, a day after they ended.
const reloadEvery = time.Minute

// New returns an empty catalog reading from pool.
func New(pool *pgxpool.Pool, gateKey []byte) *Catalog {
	c := &Catalog{pool: pool, gateKey: gateKey, now: time.Now}
	empty := map[int64]*Sale{}
	c.sales.Store(&empty)
	return c
}

// Sale looks a sale up; the request path calls it.
func (c *Catalog) Sale(id int64) (*Sale, bool) {
	s, ok := (*c.sales.Load())[id]
	return s, ok
}

// Sales returns every known sale.
func (c *Catalog) Sales() map[int64]*Sale { return *c.sales.Load() }

// ErrUnknownSale: a stock call for a sale the catalog does not hold (the
// API refuses such sales before any stock call; a guess could send a
// release to keys that hold nothing).
var ErrUnknownSale = errors.New("catalog: sale not known")

// Shards is how many stock shards a sale has; stock.WithShards takes it.
func (c *Catalog) Shards(saleID int64) (int, error) {
	s, ok := c.Sale(saleID)
	if !ok {
		return 0, fmt.Errorf("%w: %d", ErrUnknownSale, saleID)
	}
	return max(s.StockShards, 1), nil
}

// Loaded reports whether at least one refresh succeeded.
func (c *Catalog) Loaded() bool { return c.loaded.Load() }

// ErrNoCatalog is returned when the catalog has never been loaded.
var ErrNoCatalog = errors.New("catalog: not loaded")

// Loads counts the times Refresh read the sales (not only the version).
func (c *Catalog) Loads() uint64 { return c.loads.Load() }

// Refresh reads catalog_version (migration 0007: a number every change to
// the sales or their items bumps) and reloads the sales that have not ended
// more than a day ago when it moved since the last load, or when the last
// load is a minute old. The version is read before the sales, so a change
// committed in between is loaded again at the next refresh, never missed.
func (c *Catalog) Refresh(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v int64
	verErr := c.pool.QueryRow(ctx, `SELECT version FROM catalog_version`).Scan(&v)
	if verErr == nil && c.versioned && v == c.version && c.now().Sub(c.loadedAt) < reloadEvery && c.Loaded() {
		return nil
	}
	started := c.now()
	if err := c.load(ctx); err != nil {
		return err
	}
	c.version, c.versioned, c.loadedAt = v, verErr == nil, started
	return nil
}

// load reads the sales that have not ended more than a day ago.
func (c *Catalog) load(ctx context.Context) error {
	c.loads.Add(1)
	rows, err := c.pool.Query(ctx, `
		SELECT s.id, s.name, s.starts_at, s.ends_at,
		       s.queue_enabled, s.queue_draw, s.admission_rate, s.pow_difficulty, s.stock_shards,
		       i.id, i.product_id, i.name, i.price::text, i.quantity
		FROM flash_sale s JOIN flash_sale_item i ON i.sale_id = s.id
		WHERE s.ends_at > now() - interval '1 day'
		ORDER BY s.id, i.id`)
	if err != nil {
		return fmt.Errorf("load catalog: %w", err)
	}
	defer rows.Close()
	old := *c.sales.Load()
	next := make(map[int64]*Sale, len(old))
	for rows.Next() {
		var (
			sale Sale
			it   Item
		)
		var rateInt int
		if err := rows.Scan(&sale.ID, &sale.Name, &sale.StartsAt, &sale.EndsAt,
			&sale.Queue.Enabled, &sale.Queue.Draw, &rateInt, &sale.Queue.PowDifficulty, &sale.StockShards,
			&it.ID, &it.ProductID, &it.Name, &it.Price, &it.Quantity); err != nil {
			return fmt.Errorf("scan catalog: %w", err)
		}
		s, ok := next[sale.ID]
		if !ok {
			// The gate is an HMAC: computed once per sale, not per refresh.
			gate := ""
			if prev, ok := old[sale.ID]; ok {
				gate = prev.gate
			} else {
				gate = Gate(c.gateKey, sale.ID)
			}
			s = &Sale{ID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt,
				byID: map[int64]*Item{}, gate: gate, gateB: []byte(gate), Queue: sale.Queue, StockShards: sale.StockShards}
			s.Queue.AdmissionRate = float64(rateInt)
			next[sale.ID] = s
		}
		item := &Item{ID: it.ID, SaleID: sale.ID, ProductID: it.ProductID, Name: it.Name, Price: it.Price, Quantity: it.Quantity}
		// Carry the live state over so a refresh neither clears a sold-out
		// flag nor forgets the stock seen.
		if prev, ok := old[sale.ID]; ok {
			if p, ok := prev.byID[it.ID]; ok {
				item.live = p.live
			}
		}
		if item.live == nil {
			item.live = &liveState{}
			item.live.left.Store(-1)
		}
		s.Items = append(s.Items, item)
		s.byID[item.ID] = item
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	c.sales.Store(&next)
	c.loaded.Store(true)
	return nil
}
