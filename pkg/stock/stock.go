// Package stock is the hot copy of a sale's stock in Redis: reserving a unit,
// giving one back, loading the copy from PostgreSQL's numbers and reading it
// for reconciliation. Every key of one sale shares one hash tag, so one Lua
// call sees them all, on a single node or a cluster.
package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"flashsale/lua"
)

// Outcomes of Reserve that callers branch on.
var (
	// ErrSoldOut: the item has no unit left.
	ErrSoldOut = errors.New("stock: sold out")
	// ErrAlreadyPurchased: the user already holds an active unit in this sale.
	ErrAlreadyPurchased = errors.New("stock: user already holds a unit in this sale")
	// ErrNotLoaded: the stock key is missing (never loaded, or Redis lost it).
	// It is never read as zero: the caller answers 503 and an operator reloads.
	ErrNotLoaded = errors.New("stock: not loaded")
	// ErrTokenSpent: the admission token already bought something.
	ErrTokenSpent = errors.New("stock: admission token already spent")
)

// ReturnedChannel is the pub/sub channel on which every stock return is
// announced as "<sale>:<item>" (or "<sale>" for a whole-sale load), so that
// gateways clear their sold-out flags.
const ReturnedChannel = "flashsale:stock-returned"

// Store runs the stock scripts against one Redis deployment.
type Store struct {
	client  rueidis.Client
	reserve *rueidis.Lua
	release *rueidis.Lua
	load    *rueidis.Lua
}

// New wraps a rueidis client. The scripts are sent with EVALSHA and fall
// back to EVAL once after a Redis restart.
func New(client rueidis.Client) *Store {
	return &Store{
		client:  client,
		reserve: rueidis.NewLuaScript(lua.Reserve),
		release: rueidis.NewLuaScript(lua.Release),
		load:    rueidis.NewLuaScript(lua.Load),
	}
}

// Keys of one sale. The hash tag {fs:<sale>} keeps them in one slot.
func saleTag(saleID int64) string { return "{fs:" + strconv.FormatInt(saleID, 10) + "}" }

// StockKey is the key holding the units left of an item.
func StockKey(saleID, itemID int64) string {
	return saleTag(saleID) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// HoldersKey is the hash of users holding an active unit in a sale (user -> order id).
func HoldersKey(saleID int64) string { return saleTag(saleID) + ":holders" }

// SpentTokensKey is the set of admission token ids that bought a unit.
func SpentTokensKey(saleID int64) string { return saleTag(saleID) + ":q:used" }

// Reserve takes one unit of itemID for userID under orderID. It returns the
// units left after the reservation, or ErrSoldOut, ErrAlreadyPurchased,
// ErrNotLoaded, or a Redis error. On a Redis error the outcome is unknown:
// the caller releases by order id, which is harmless if nothing was taken.
func (s *Store) Reserve(ctx context.Context, saleID, itemID int64, userID, orderID string) (int64, error) {
	return s.ReserveAdmitted(ctx, saleID, itemID, userID, orderID, "")
}

// ReserveAdmitted is Reserve for a shopper admitted by the virtual queue:
// it also refuses an admission token that already bought a unit
// (ErrTokenSpent). tokenID "" means no token.
func (s *Store) ReserveAdmitted(ctx context.Context, saleID, itemID int64, userID, orderID, tokenID string) (int64, error) {
	n, err := s.reserve.Exec(ctx, s.client,
		[]string{StockKey(saleID, itemID), HoldersKey(saleID), SpentTokensKey(saleID)},
		[]string{userID, orderID, tokenID}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("reserve sale %d item %d: %w", saleID, itemID, err)
	}
	switch {
	case n >= 0:
		return n, nil
	case n == -1:
		return 0, ErrSoldOut
	case n == -2:
		return 0, ErrAlreadyPurchased
	case n == -3:
		return 0, ErrNotLoaded
	case n == -4:
		return 0, ErrTokenSpent
	default:
		return 0, fmt.Errorf("reserve sale %d item %d: unexpected script answer %d", saleID, itemID, n)
	}
}

// SpendToken marks an admission token as used by an accepted purchase, so it
// cannot admit another one. The set lives as long as a sale may.
func (s *Store) SpendToken(ctx context.Context, saleID int64, tokenID string) error {
	key := SpentTokensKey(saleID)
	for _, r := range s.client.DoMulti(ctx,
		s.client.B().Sadd().Key(key).Member(tokenID).Build(),
		s.client.B().Expire().Key(key).Seconds(int64((7 * 24 * time.Hour).Seconds())).Build()) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("spend admission token %s: %w", tokenID, err)
		}
	}
	return nil
}

// Release gives back the unit that orderID holds. It reports whether a unit
// went back; repeating it, or releasing an order that holds nothing, is a
// no-op. ErrNotLoaded means the stock key is gone and reconciliation decides.
func (s *Store) Release(ctx context.Context, saleID, itemID int64, userID, orderID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "")
}

// Drop frees the user held by orderID without returning its unit: for an
// order PostgreSQL refused because the item had no stock left there, so
// Redis held one unit more than the truth. Once per order, like Release.
func (s *Store) Drop(ctx context.Context, saleID, itemID int64, userID, orderID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "drop")
}

func (s *Store) release1(ctx context.Context, saleID, itemID int64, userID, orderID, mode string) (bool, error) {
	n, err := s.release.Exec(ctx, s.client,
		[]string{StockKey(saleID, itemID), HoldersKey(saleID)},
		[]string{userID, orderID, ReturnedChannel, strconv.FormatInt(saleID, 10) + ":" + strconv.FormatInt(itemID, 10), mode}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("release order %s: %w", orderID, err)
	}
	if n == -3 {
		return false, fmt.Errorf("release order %s: %w", orderID, ErrNotLoaded)
	}
	return n == 1, nil
}

// ItemStock is the number of units an item has left to sell.
type ItemStock struct {
	ItemID int64
	Left   int64
}

// Holder is a user holding an active order in a sale.
type Holder struct {
	UserID  string
	OrderID string
}

// Load replaces the sale's hot copy with the given stock and holders in one
// atomic step. It sets, never adds, so loading twice gives the same numbers.
func (s *Store) Load(ctx context.Context, saleID int64, items []ItemStock, holders []Holder) error {
	keys := make([]string, 0, len(items)+1)
	args := make([]string, 0, 2+len(items)+2*len(holders))
	keys = append(keys, HoldersKey(saleID))
	args = append(args, ReturnedChannel, strconv.FormatInt(saleID, 10))
	for _, it := range items {
		if it.Left < 0 {
			return fmt.Errorf("load sale %d: item %d has negative stock %d", saleID, it.ItemID, it.Left)
		}
		keys = append(keys, StockKey(saleID, it.ItemID))
		args = append(args, strconv.FormatInt(it.Left, 10))
	}
	for _, h := range holders {
		args = append(args, h.UserID, h.OrderID)
	}
	if err := s.load.Exec(ctx, s.client, keys, args).Error(); err != nil {
		return fmt.Errorf("load sale %d: %w", saleID, err)
	}
	return nil
}

// Left reads the units left of an item; ErrNotLoaded when the key is missing.
func (s *Store) Left(ctx context.Context, saleID, itemID int64) (int64, error) {
	n, err := s.client.Do(ctx, s.client.B().Get().Key(StockKey(saleID, itemID)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, ErrNotLoaded
	}
	if err != nil {
		return 0, fmt.Errorf("read stock of sale %d item %d: %w", saleID, itemID, err)
	}
	return n, nil
}

// Holders reads the active holders of a sale (user -> order id).
func (s *Store) Holders(ctx context.Context, saleID int64) (map[string]string, error) {
	m, err := s.client.Do(ctx, s.client.B().Hgetall().Key(HoldersKey(saleID)).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("read holders of sale %d: %w", saleID, err)
	}
	return m, nil
}
