// Package stock is the hot copy of a sale's stock in Redis: reserving a unit,
// giving one back, loading the copy from PostgreSQL's numbers and reading it
// for reconciliation, on a single node or a cluster. Every key one script
// touches shares one hash tag: for an unsharded sale that is all of its keys;
// a sharded one spreads each item over shard slots and a pool (layout.go),
// and units cross slots only through journaled moves (refill.go).
package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"flashsale/pkg/lua"
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
	// ErrPaused (an ErrNotLoaded): a repair of the sharded sale took the
	// stock key away while it rewrites the sale; a release that meets it
	// must be tried again once the repair's copy is written, which keeps
	// the order's holder. The pause ends within pauseMarkerLife.
	ErrPaused = fmt.Errorf("%w: paused by a repair", ErrNotLoaded)
	// ErrTokenSpent: the admission token already bought something.
	ErrTokenSpent = errors.New("stock: admission token already spent")
)

// ReturnedChannel is the pub/sub channel on which every stock return is
// announced as "<sale>:<item>" (or "<sale>" for a whole-sale load), so that
// gateways clear their sold-out flags.
const ReturnedChannel = "flashsale:stock-returned"

// Store runs the stock scripts against one Redis deployment, a single node
// or a cluster.
type Store struct {
	client   rueidis.Client
	reserve  *rueidis.Lua
	release  *rueidis.Lua
	load     *rueidis.Lua
	take     *rueidis.Lua
	give     *rueidis.Lua
	slotRead *rueidis.Lua
	pause    *rueidis.Lua
	retToken *rueidis.Lua
	// holdersState reads a slot's holders' state, or records it settled.
	holdersState *rueidis.Lua
	shards       func(saleID int64) (int, error)
	tags         sync.Map // layoutKey -> []string, the shard tags of a sharded sale
	refills      singleflight.Group
}

type layoutKey struct {
	sale   int64
	shards int
}

// Option configures a Store.
type Option func(*Store)

// WithShards tells the store how many shards each sale's stock has (see
// layout). Without it every sale is unsharded. The answer must not change
// during a sale: it decides where a shopper's keys are. An error fails the
// call that needed it (a guess would send a release to the wrong keys).
func WithShards(shards func(saleID int64) (int, error)) Option {
	return func(s *Store) { s.shards = shards }
}

// New wraps a rueidis client. The scripts are sent with EVALSHA and fall
// back to EVAL once after a Redis restart.
func New(client rueidis.Client, opts ...Option) *Store {
	s := &Store{
		client:       client,
		reserve:      rueidis.NewLuaScript(lua.Reserve),
		release:      rueidis.NewLuaScript(lua.Release),
		load:         rueidis.NewLuaScript(lua.Load),
		take:         rueidis.NewLuaScript(lua.MoveTake),
		give:         rueidis.NewLuaScript(lua.MoveGive),
		slotRead:     rueidis.NewLuaScript(lua.SlotRead),
		pause:        rueidis.NewLuaScript(lua.Pause),
		retToken:     rueidis.NewLuaScript(lua.ReturnToken),
		holdersState: rueidis.NewLuaScript(lua.HoldersState),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Store) layout(saleID int64) (layout, error) {
	if s.shards == nil {
		return layout{sale: saleID, shards: 1}, nil
	}
	n, err := s.shards(saleID)
	if err != nil {
		return layout{}, fmt.Errorf("stock shards of sale %d: %w", saleID, err)
	}
	l := layout{sale: saleID, shards: min(max(n, 1), MaxShards)}
	if l.shards > 1 {
		key := layoutKey{saleID, l.shards}
		tags, ok := s.tags.Load(key)
		if !ok {
			tags, _ = s.tags.LoadOrStore(key, shardTags(saleID, l.shards))
		}
		l.tags = tags.([]string)
	}
	return l, nil
}

// Keys of one sale. The hash tag {fs:<sale>} keeps them in one slot.
func saleTag(saleID int64) string { return "{fs:" + strconv.FormatInt(saleID, 10) + "}" }

// StockKey is the key holding the units left of an unsharded item.
func StockKey(saleID, itemID int64) string {
	return saleTag(saleID) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// HoldersKey is the hash of users holding an active unit in an unsharded
// sale (user -> order id).
func HoldersKey(saleID int64) string { return holdersOf(saleTag(saleID)) }

// SpentTokensKey is the set of admission token ids that bought a unit in an
// unsharded sale.
func SpentTokensKey(saleID int64) string { return tokensOf(saleTag(saleID)) }

// Reserve takes one unit of itemID for userID under orderID. It returns the
// units left after the reservation (in the shopper's shard when the sale is
// sharded), or ErrSoldOut, ErrAlreadyPurchased, ErrNotLoaded, or a Redis
// error. On a Redis error the outcome is unknown: the caller releases by
// order id, which is harmless if nothing was taken.
func (s *Store) Reserve(ctx context.Context, saleID, itemID int64, userID, orderID string) (int64, error) {
	return s.ReserveAdmitted(ctx, saleID, itemID, userID, orderID, "")
}

// refillRounds bounds the refill-then-retry rounds of one reservation on a
// dry shard. Other shoppers of the shard may take the refilled units first,
// so near the end a shopper can need many rounds; each round moves at least
// one unit or ends in a sum that proves the item empty, and the caller's
// deadline bounds the time. Measured (BenchmarkSoldOutTail): at 32 rounds
// about one shopper in 3,000 was told SOLD_OUT while units were left; with
// the bound out of reach, none.
const refillRounds = 1024

// ReserveAdmitted is Reserve for a shopper admitted by the virtual queue:
// it also refuses an admission token that already bought a unit
// (ErrTokenSpent). tokenID "" means no token.
//
// On a sharded sale a dry shard refills from the item's pool, then from
// the other shards (refill), so ErrSoldOut means every shard and the pool
// read empty, short of units caught in a move that another gateway is
// making at that instant.
func (s *Store) ReserveAdmitted(ctx context.Context, saleID, itemID int64, userID, orderID, tokenID string) (int64, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return 0, err
	}
	k := l.shardOf(userID)
	n, err := s.reserveOn(ctx, l, k, itemID, userID, orderID, tokenID)
	if l.shards == 1 || !errors.Is(err, ErrSoldOut) {
		return n, err
	}
	for range refillRounds {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("reserve sale %d item %d: %w", saleID, itemID, err)
		}
		moved, err := s.refill(ctx, l, itemID, k)
		if err != nil {
			return 0, err
		}
		if moved == 0 {
			// Every key read empty, one at a time; a unit another gateway was
			// moving may have landed behind the scan. One sum settles it.
			left, err := s.Left(ctx, saleID, itemID)
			if err != nil {
				return 0, err // not loaded or unreadable: never a guessed SOLD_OUT
			}
			if left <= 0 {
				return 0, ErrSoldOut
			}
		}
		n, err = s.reserveOn(ctx, l, k, itemID, userID, orderID, tokenID)
		if !errors.Is(err, ErrSoldOut) {
			return n, err
		}
	}
	return 0, ErrSoldOut
}

func (s *Store) reserveOn(ctx context.Context, l layout, k int, itemID int64, userID, orderID, tokenID string) (int64, error) {
	tag := l.tag(k)
	n, err := s.reserve.Exec(ctx, s.client,
		[]string{l.stockKey(k, itemID), holdersOf(tag), tokensOf(tag), holderItemsOf(tag), spentByOf(tag)},
		[]string{userID, orderID, tokenID, strconv.FormatInt(itemID, 10), spentTokensTTL}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("reserve sale %d item %d: %w", l.sale, itemID, err)
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
		return 0, fmt.Errorf("reserve sale %d item %d: unexpected script answer %d", l.sale, itemID, n)
	}
}

// spentTokensTTL is how long a sale's spent admission tokens are kept, in
// seconds for the reserve script: as long as a sale may run.
var spentTokensTTL = strconv.FormatInt(spentTokensSeconds, 10)

const spentTokensSeconds = int64(7 * 24 * time.Hour / time.Second)

// Release gives back the unit that orderID holds, for an order that ended
// (expired, cancelled): the admission token its reservation spent stays
// spent, since an admission buys once. It reports whether a unit went
// back; repeating it, or releasing an order that holds nothing, is a
// no-op. ErrNotLoaded means the stock key is gone and reconciliation decides.
func (s *Store) Release(ctx context.Context, saleID, itemID int64, userID, orderID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "", "")
}

// WriteOff is Release for an order that never came to exist (refused,
// abandoned, or given up by its gateway): the admission token its
// reservation spent goes back with the unit, found by the order id, so
// the shopper can try again with her admission. The order service's relay
// knows no token; GiveBack is the gateway's own give-back.
func (s *Store) WriteOff(ctx context.Context, saleID, itemID int64, userID, orderID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "", "*")
}

// GiveBack is Release for a purchase that failed before its order existed:
// the admission token it spent (tokenID; "" for none) goes back with the
// unit, so the shopper can try again. Only if orderID still held the unit.
func (s *Store) GiveBack(ctx context.Context, saleID, itemID int64, userID, orderID, tokenID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "", tokenID)
}

// Drop frees the user held by orderID without returning its unit: for an
// order PostgreSQL refused because the item had no stock left there, so
// Redis held one unit more than the truth. Her admission token goes back,
// as with WriteOff: the admission bought nothing. Once per order, like
// Release.
func (s *Store) Drop(ctx context.Context, saleID, itemID int64, userID, orderID string) (bool, error) {
	return s.release1(ctx, saleID, itemID, userID, orderID, "drop", "*")
}

func (s *Store) release1(ctx context.Context, saleID, itemID int64, userID, orderID, mode, tokenID string) (bool, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return false, err
	}
	k := l.shardOf(userID)
	n, err := s.release.Exec(ctx, s.client,
		[]string{l.stockKey(k, itemID), holdersOf(l.tag(k)), tokensOf(l.tag(k)), PauseMarker(l.stockKey(k, itemID)), spentByOf(l.tag(k)), holdersVersionOf(l.tag(k))},
		[]string{userID, orderID, ReturnedChannel, strconv.FormatInt(saleID, 10) + ":" + strconv.FormatInt(itemID, 10), mode, tokenID}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("release order %s: %w", orderID, err)
	}
	switch n {
	case -3:
		return false, fmt.Errorf("release order %s: %w", orderID, ErrNotLoaded)
	case -5:
		return false, fmt.Errorf("release order %s: %w", orderID, ErrPaused)
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

// Load replaces the sale's hot copy with the given stock and holders. It
// sets, never adds, so loading twice gives the same numbers. An unsharded
// sale is written in one atomic step; a sharded one slot by slot: the pools
// first, then each shard with its first share of the units and the holders
// whose users hash to it. Until a shard is written its shoppers are told
// "not loaded", never sold out.
func (s *Store) Load(ctx context.Context, saleID int64, items []ItemStock, holders []Holder) error {
	for _, it := range items {
		if it.Left < 0 {
			return fmt.Errorf("load sale %d: item %d has negative stock %d", saleID, it.ItemID, it.Left)
		}
	}
	l, err := s.layout(saleID)
	if err != nil {
		return err
	}
	// The load's epoch orders it against moves in flight (move_give.lua).
	epoch := strconv.FormatInt(time.Now().UnixMicro(), 10)
	msg := strconv.FormatInt(saleID, 10)
	if l.shards == 1 {
		return s.loadSlot(ctx, l, l.base(), epoch, msg, items, func(it ItemStock) (string, int64) {
			return l.stockKey(0, it.ItemID), it.Left
		}, holders)
	}
	// Each shard starts with a fraction of the units so the first shoppers
	// need no refill; the pool keeps the rest (and any remainder).
	share := func(it ItemStock) int64 { return it.Left / int64(2*l.shards) }
	if err := s.loadSlot(ctx, l, l.base(), epoch, msg, items, func(it ItemStock) (string, int64) {
		return l.poolKey(it.ItemID), it.Left - int64(l.shards)*share(it)
	}, nil); err != nil {
		return err
	}
	byShard := make([][]Holder, l.shards)
	for _, h := range holders {
		k := l.shardOf(h.UserID)
		byShard[k] = append(byShard[k], h)
	}
	for k := range l.shards {
		if err := s.loadSlot(ctx, l, l.tag(k), epoch, msg, items, func(it ItemStock) (string, int64) {
			return l.stockKey(k, it.ItemID), share(it)
		}, byShard[k]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) loadSlot(ctx context.Context, l layout, tag, epoch, msg string, items []ItemStock,
	value func(ItemStock) (string, int64), holders []Holder) error {
	keys := make([]string, 0, 4+len(items))
	args := make([]string, 0, 3+len(items)+2*len(holders))
	keys = append(keys, holdersOf(tag), journalOf(tag), appliedOf(tag), epochOf(tag))
	args = append(args, ReturnedChannel, msg, epoch)
	for _, it := range items {
		k, v := value(it)
		keys = append(keys, k)
		args = append(args, strconv.FormatInt(v, 10))
	}
	for _, h := range holders {
		args = append(args, h.UserID, h.OrderID)
	}
	if err := s.load.Exec(ctx, s.client, keys, args).Error(); err != nil {
		return fmt.Errorf("load sale %d (%s): %w", l.sale, tag, err)
	}
	return nil
}

// SpentAdmission is an admission token that bought a unit in a sale: its
// id, and the shopper it was issued to (whose shard keeps it).
type SpentAdmission struct {
	UserID  string
	TokenID string
}

// spentPage bounds the members of one SADD that RestoreSpent sends.
const spentPage = 1000

// RestoreSpent adds admissions to the sale's spent sets, each in its
// shopper's shard, as the reserve script spends them (with the same
// expiry). It only adds: a set Redis kept stays as it was. It is for a hot
// copy rebuilt from PostgreSQL after a Redis loss, before the stock is
// loaded, so that no purchase can spend one of them in between.
func (s *Store) RestoreSpent(ctx context.Context, saleID int64, spent []SpentAdmission) error {
	if len(spent) == 0 {
		return nil
	}
	l, err := s.layout(saleID)
	if err != nil {
		return err
	}
	byShard := make([][]string, l.shards)
	for _, a := range spent {
		k := l.shardOf(a.UserID)
		byShard[k] = append(byShard[k], a.TokenID)
	}
	var cmds rueidis.Commands
	for k, ids := range byShard {
		if len(ids) == 0 {
			continue
		}
		key := tokensOf(l.tag(k))
		for page := range slices.Chunk(ids, spentPage) {
			cmds = append(cmds, s.client.B().Sadd().Key(key).Member(page...).Build())
		}
		cmds = append(cmds, s.client.B().Expire().Key(key).Seconds(spentTokensSeconds).Build())
	}
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("restore spent admissions of sale %d: %w", saleID, err)
		}
	}
	return nil
}

// Left reads the units left of an item (the pool and every shard of a
// sharded one); ErrNotLoaded when a key is missing.
func (s *Store) Left(ctx context.Context, saleID, itemID int64) (int64, error) {
	keys, err := s.StockKeys(saleID, itemID)
	if err != nil {
		return 0, err
	}
	cmds := make(rueidis.Commands, 0, len(keys))
	for _, k := range keys {
		cmds = append(cmds, s.client.B().Get().Key(k).Build())
	}
	var total int64
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if rueidis.IsRedisNil(err) {
			return 0, ErrNotLoaded
		}
		if err != nil {
			return 0, fmt.Errorf("read stock of sale %d item %d: %w", saleID, itemID, err)
		}
		total += n
	}
	return total, nil
}

// Held is the reservation a user holds in a sale.
type Held struct {
	OrderID string
	// ItemID is the item the reservation took, as the reserve script noted
	// it; 0 when unknown (a holder written by a load or a repair from
	// PostgreSQL, whose order row knows its item).
	ItemID int64
}

// HeldBy reads the order userID holds in the sale and, when the
// reservation noted it, its item; ok is false when she holds nothing.
// loaded reports whether her part of the sale's hot copy was loaded into
// this Redis (a load writes its epoch; a restart loses it): when it was
// not, the absence of a holder proves nothing and PostgreSQL must be asked.
// One round trip: every key read lives in her shard's slot.
func (s *Store) HeldBy(ctx context.Context, saleID int64, userID string) (h Held, ok, loaded bool, err error) {
	l, err := s.layout(saleID)
	if err != nil {
		return Held{}, false, false, err
	}
	tag := l.tag(l.shardOf(userID))
	res := s.client.DoMulti(ctx,
		s.client.B().Hget().Key(holdersOf(tag)).Field(userID).Build(),
		s.client.B().Hget().Key(holderItemsOf(tag)).Field(userID).Build(),
		s.client.B().Exists().Key(epochOf(tag)).Build())
	n, err := res[2].AsInt64()
	if err != nil {
		return Held{}, false, false, fmt.Errorf("read load epoch of sale %d: %w", saleID, err)
	}
	loaded = n == 1
	h.OrderID, err = res[0].ToString()
	if rueidis.IsRedisNil(err) {
		return Held{}, false, loaded, nil
	}
	if err != nil {
		return Held{}, false, false, fmt.Errorf("read holder of sale %d: %w", saleID, err)
	}
	note, err := res[1].ToString()
	switch {
	case rueidis.IsRedisNil(err):
	case err != nil:
		return Held{}, false, false, fmt.Errorf("read holder item of sale %d: %w", saleID, err)
	default:
		h.ItemID = itemOfNote(note, h.OrderID)
	}
	return h, true, loaded, nil
}

// AdmissionSpent reads whether the admission token tokenID has been spent
// by a purchase of userID's in the sale, and whether she holds a unit
// now (a purchase in progress or an active order: its token may still be
// given back if the purchase fails). One round trip: the spent set and her
// holder entry live in her shard's slot (reserve.lua writes both there).
func (s *Store) AdmissionSpent(ctx context.Context, saleID int64, userID, tokenID string) (spent, holding bool, err error) {
	l, err := s.layout(saleID)
	if err != nil {
		return false, false, err
	}
	tag := l.tag(l.shardOf(userID))
	// One transaction: read apart, a release giving unit and token back
	// between the two reads showed the token spent and no unit held, and
	// the page stopped polling with her admission good again.
	res := s.client.DoMulti(ctx,
		s.client.B().Multi().Build(),
		s.client.B().Sismember().Key(tokensOf(tag)).Member(tokenID).Build(),
		s.client.B().Hexists().Key(holdersOf(tag)).Field(userID).Build(),
		s.client.B().Exec().Build())
	replies, err := res[3].ToArray()
	if err == nil && len(replies) != 2 {
		err = fmt.Errorf("%d replies, want 2", len(replies))
	}
	if err != nil {
		return false, false, fmt.Errorf("read spent admission and holder of sale %d: %w", saleID, err)
	}
	if spent, err = replies[0].AsBool(); err != nil {
		return false, false, fmt.Errorf("read spent admissions of sale %d: %w", saleID, err)
	}
	if holding, err = replies[1].AsBool(); err != nil {
		return false, false, fmt.Errorf("read holder of sale %d: %w", saleID, err)
	}
	return spent, holding, nil
}

// ReturnToken makes the admission token that orderID's reservation spent
// good again: for a purchase whose order will never exist, when someone
// else released the unit first (a reload, or a relay from before WriteOff
// gave tokens back). Once per order: when orderID's token went back
// already, a late retry of the give-back changes nothing, even after she
// bought again with it and that order ended; one admission buys once. (A
// reservation made before the spent-by notes falls back to "not while she
// holds a unit".) It reports whether the token was given back.
func (s *Store) ReturnToken(ctx context.Context, saleID int64, userID, orderID, tokenID string) (bool, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return false, err
	}
	tag := l.tag(l.shardOf(userID))
	n, err := s.retToken.Exec(ctx, s.client, []string{holdersOf(tag), tokensOf(tag), spentByOf(tag)}, []string{userID, tokenID, orderID}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("return admission token of sale %d: %w", saleID, err)
	}
	return n == 1, nil
}

// ItemsOf reads the items of the given holders' reservations (user -> order
// id, as Holders returns them): user -> item id, for the holders whose
// reservation noted its item under that same order.
func (s *Store) ItemsOf(ctx context.Context, saleID int64, holders map[string]string) (map[string]int64, error) {
	out := make(map[string]int64, len(holders))
	if len(holders) == 0 {
		return out, nil
	}
	l, err := s.layout(saleID)
	if err != nil {
		return nil, err
	}
	users := make([]string, 0, len(holders))
	cmds := make(rueidis.Commands, 0, len(holders))
	for u := range holders {
		users = append(users, u)
		cmds = append(cmds, s.client.B().Hget().Key(holderItemsOf(l.tag(l.shardOf(u)))).Field(u).Build())
	}
	for i, r := range s.client.DoMulti(ctx, cmds...) {
		note, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read holder items of sale %d: %w", saleID, err)
		}
		if item := itemOfNote(note, holders[users[i]]); item > 0 {
			out[users[i]] = item
		}
	}
	return out, nil
}

// itemOfNote reads a holder-items entry "<item>:<order>"; 0 unless it is
// about orderID (a stale entry of an earlier reservation is never trusted).
func itemOfNote(note, orderID string) int64 {
	item, order, ok := strings.Cut(note, ":")
	if !ok || order != orderID {
		return 0
	}
	id, err := strconv.ParseInt(item, 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// HolderCount is how many active holders a sale has, over every shard: one
// HLEN per shard in one round trip, where Holders reads them all.
func (s *Store) HolderCount(ctx context.Context, saleID int64) (int64, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return 0, err
	}
	cmds := make(rueidis.Commands, 0, l.shards)
	for k := range l.shards {
		cmds = append(cmds, s.client.B().Hlen().Key(holdersOf(l.tag(k))).Build())
	}
	var n int64
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		c, err := r.AsInt64()
		if err != nil {
			return 0, fmt.Errorf("count holders of sale %d: %w", saleID, err)
		}
		n += c
	}
	return n, nil
}

// HolderState is what a sale's holders are now, over every shard, read in
// one round trip: how many, and whether they are the ones a pass last
// found every holder explained among (MarkSettled).
type HolderState struct {
	Count int64
	// Settled: every shard is in the state MarkSettled last recorded
	// (holders_state.lua says why that means the same holders).
	Settled bool
	shards  []string // per shard, "<count>:<version>:<epoch>" as read
}

// HolderState reads the sale's holder count and each shard's state, at one
// instant per shard (holders_state.lua). The holders, their version and
// the epoch live in one hash slot, so they are kept and lost together.
func (s *Store) HolderState(ctx context.Context, saleID int64) (HolderState, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return HolderState{}, err
	}
	st := HolderState{Settled: true, shards: make([]string, 0, l.shards)}
	for _, r := range s.holdersState.ExecMulti(ctx, s.client, s.holdersStateExecs(l)...) {
		vs, err := r.ToArray()
		if err != nil {
			return HolderState{}, fmt.Errorf("read holders' state of sale %d: %w", saleID, err)
		}
		if len(vs) != 3 {
			return HolderState{}, fmt.Errorf("read holders' state of sale %d: %d replies, want 3", saleID, len(vs))
		}
		n, err := vs[0].AsInt64()
		if err != nil {
			return HolderState{}, fmt.Errorf("read holders' state of sale %d: count: %w", saleID, err)
		}
		now, err := vs[1].ToString()
		if err != nil {
			return HolderState{}, fmt.Errorf("read holders' state of sale %d: %w", saleID, err)
		}
		settled, err := vs[2].ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return HolderState{}, fmt.Errorf("read holders' state of sale %d: settled: %w", saleID, err)
		}
		st.Count += n
		st.shards = append(st.shards, now)
		st.Settled = st.Settled && settled == now
	}
	return st, nil
}

// MarkSettled records that a pass which read st before reading the holders
// found every holder explained: until a holder is added or taken away,
// HolderState reports the sale Settled, so the pass need not read it. A
// shard whose state changed since st was read is not recorded (the script
// compares), so it is read next time.
func (s *Store) MarkSettled(ctx context.Context, saleID int64, st HolderState) error {
	l, err := s.layout(saleID)
	if err != nil {
		return err
	}
	if len(st.shards) != l.shards {
		return fmt.Errorf("mark sale %d settled: state of %d shards, the sale has %d", saleID, len(st.shards), l.shards)
	}
	execs := s.holdersStateExecs(l)
	for k := range execs {
		execs[k].Args = []string{st.shards[k]}
	}
	for _, r := range s.holdersState.ExecMulti(ctx, s.client, execs...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("mark sale %d settled: %w", saleID, err)
		}
	}
	return nil
}

// holdersStateExecs are holders_state.lua's calls, one per shard.
func (s *Store) holdersStateExecs(l layout) []rueidis.LuaExec {
	execs := make([]rueidis.LuaExec, 0, l.shards)
	for k := range l.shards {
		tag := l.tag(k)
		execs = append(execs, rueidis.LuaExec{Keys: []string{holdersOf(tag), holdersVersionOf(tag), epochOf(tag)}})
	}
	return execs
}

// HoldersPage is how many holders one HSCAN call asks Redis for. Redis
// runs one command at a time, and every purchase waits behind the one
// running: one HGETALL of a sale with 100,000 holders held it for 52 ms;
// a page of 1,000 holds it for about half a millisecond.
const HoldersPage = 1000

// Holders reads the active holders of a sale (user -> order id), from
// every shard, a page at a time (HSCAN), so that a big sale's holders do
// not stall the purchases behind one long command. The pages are not one
// snapshot: a holder present for the whole read is returned; one taken or
// given back during it may or may not be. Callers act on holders a
// while old and recheck each before writing (the release script checks
// the holder's order id), as they must with any read followed by a write.
func (s *Store) Holders(ctx context.Context, saleID int64) (map[string]string, error) {
	return s.HoldersPaced(ctx, saleID, nil)
}

// Pacer spaces out reads: a reader calls WaitN before it reads n more
// items, and it returns when they may be read, or with ctx's error. A
// *rate.Limiter is one; PaceHolders' pays for a burst of pages at a time.
type Pacer interface {
	WaitN(ctx context.Context, n int) error
}

// PaceBurst is how many pages of holders a pace from PaceHolders lets be
// read back to back. Spread a page at a time, every HSCAN found Redis and
// the reader cold: a first pass over 80,000 holders cost Redis 362 µs a
// page instead of 230, and the order service 1.5 times the CPU, for the
// same calls.
const PaceBurst = 10

// PaceHolders is a Pacer for HoldersPaced that lets perSecond holders be
// read a second on average, PaceBurst pages at a time at most; nil (no
// pacing) when perSecond is 0. One pace serves one reader at a time.
func PaceHolders(perSecond int) Pacer {
	if perSecond <= 0 {
		return nil
	}
	return &burstPace{lim: rate.NewLimiter(rate.Limit(perSecond), PaceBurst*HoldersPage)}
}

// burstPace pays the limiter for a whole burst before the burst's first
// read, then lets the reads it paid for through: a burst is never more
// than the limiter's, even after the bucket refilled in a quiet spell.
// Not safe for concurrent use.
type burstPace struct {
	lim interface {
		WaitN(ctx context.Context, n int) error
		Burst() int
	}
	credit int // paid for, not read yet
}

func (p *burstPace) WaitN(ctx context.Context, n int) error {
	if n <= p.credit {
		p.credit -= n
		return nil
	}
	burst := p.lim.Burst()
	if err := p.lim.WaitN(ctx, burst); err != nil {
		return err
	}
	p.credit = max(burst-n, 0)
	return nil
}

// HoldersPaced is Holders with each page waiting for pace first (nil: no
// wait), for a background reader that must not take Redis, and the CPU
// the purchases share, in a burst: a fresh order service's first
// abandoned-reservation pass reads the holders of every sale in play at once.
func (s *Store) HoldersPaced(ctx context.Context, saleID int64, pace Pacer) (map[string]string, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k := range l.shards {
		key := holdersOf(l.tag(k))
		for cursor := uint64(0); ; {
			if pace != nil {
				if err := pace.WaitN(ctx, HoldersPage); err != nil {
					return nil, fmt.Errorf("read holders of sale %d: %w", saleID, err)
				}
			}
			page, err := s.client.Do(ctx, s.client.B().Hscan().Key(key).Cursor(cursor).Count(HoldersPage).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("read holders of sale %d: %w", saleID, err)
			}
			for i := 0; i+1 < len(page.Elements); i += 2 {
				out[page.Elements[i]] = page.Elements[i+1]
			}
			if cursor = page.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out, nil
}
