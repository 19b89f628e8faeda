package stock

import "strconv"

// MaxShards bounds the shards of one item (the schema's CHECK says the same).
const MaxShards = 64

// layout names the keys of one sale. An unsharded sale (shards == 1) keeps
// every key under the hash tag {fs:<sale>}, so one Lua call sees them all.
// A sharded sale splits each item's stock over shards whose keys carry
// {fs:<sale>:<k>} and so hash to different slots (different nodes of a
// cluster). A shopper always lands on the shard her user id hashes to: her
// holder entry, her admission token and the units she buys live there, so
// the one-unit-per-shopper rule still holds inside one script. The item's
// pool, under {fs:<sale>}, feeds the shards as they run dry.
type layout struct {
	sale   int64
	shards int
	tags   []string // shard k's hash tag (see shardTags); nil when unsharded
}

// base is the sale's own tag: every key of an unsharded sale, the pools of
// a sharded one.
func (l layout) base() string { return saleTag(l.sale) }

// tag is shard k's hash tag; the base tag when the sale is not sharded.
func (l layout) tag(k int) string {
	if l.shards <= 1 {
		return l.base()
	}
	return l.tags[k]
}

// slotCount is Redis Cluster's number of hash slots.
const slotCount = 16384

// shardTags names the shards of a sale so that shard k's slot falls in the
// k-th of S equal slot ranges: "{fs:<sale>:<k>.<j>}" with the smallest j
// that does. Clusters deal slots to masters in equal contiguous ranges, so
// S shards over S masters land one per master instead of where chance puts
// them (three random slots share a master 7 times in 9).
func shardTags(sale int64, shards int) []string {
	tags := make([]string, shards)
	prefix := "fs:" + strconv.FormatInt(sale, 10) + ":"
	for k := range shards {
		lo, hi := k*slotCount/shards, (k+1)*slotCount/shards
		for j := 0; ; j++ {
			t := prefix + strconv.Itoa(k) + "." + strconv.Itoa(j)
			if s := int(crc16(t) % slotCount); s >= lo && s < hi {
				tags[k] = "{" + t + "}"
				break
			}
		}
	}
	return tags
}

// crc16 is CRC-16/XMODEM, the hash Redis Cluster maps keys to slots with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slots lists the tags holding the sale's keys: the base, then each shard's.
func (l layout) slots() []string {
	if l.shards <= 1 {
		return []string{l.base()}
	}
	out := make([]string, 0, l.shards+1)
	out = append(out, l.base())
	for k := range l.shards {
		out = append(out, l.tag(k))
	}
	return out
}

func (l layout) stockKey(k int, item int64) string {
	return l.tag(k) + ":stock:" + strconv.FormatInt(item, 10)
}

// poolKey holds a sharded item's units not yet handed to a shard.
func (l layout) poolKey(item int64) string {
	return l.base() + ":pool:" + strconv.FormatInt(item, 10)
}

// shardOf maps a user to her shard: FNV-1a of the user id, so every gateway
// agrees without asking anyone.
func (l layout) shardOf(user string) int {
	if l.shards <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(user); i++ {
		h ^= uint32(user[i])
		h *= 16777619
	}
	return int(h % uint32(l.shards))
}

// Per-slot keys; tag is one of slots().
func holdersOf(tag string) string { return tag + ":holders" }
func tokensOf(tag string) string  { return tag + ":q:used" }

// spentByOf notes which admission token each order's reservation spent
// (order id -> token id, "-" once given back; see reserve.lua).
func spentByOf(tag string) string { return tag + ":q:used-by" }

// holderItemsOf notes which item each holder's reservation took (see
// reserve.lua); a hint for the holders no order row explains yet.
func holderItemsOf(tag string) string { return tag + ":holder-items" }
func journalOf(tag string) string     { return tag + ":moves" }
func appliedOf(tag string) string     { return tag + ":moves-in" }
func epochOf(tag string) string       { return tag + ":epoch" }

// holdersVersionOf holds a value each release that takes a holder away
// from the slot changes (field "v": release.lua) and the state at which
// the abandoned-reservation pass last found every holder explained (field
// "settled"; holders_state.lua, HolderState, MarkSettled).
func holdersVersionOf(tag string) string { return tag + ":holders-v" }

func tagOfKey(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '}' {
			return key[:i+1]
		}
	}
	return key
}

// itemOfKey reads the item id at the end of a stock or pool key.
func itemOfKey(key string) (int64, bool) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == ':' {
			id, err := strconv.ParseInt(key[i+1:], 10, 64)
			return id, err == nil
		}
	}
	return 0, false
}

// StockKeys lists the keys whose sum is an item's units left: its one stock
// key, or the pool and every shard of a sharded sale (Left sums them; the
// gateway's stock poll batches them for many items in one round trip).
func (s *Store) StockKeys(saleID, itemID int64) ([]string, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return nil, err
	}
	return l.stockKeys(itemID), nil
}

// stockKeys is StockKeys in a layout already known.
func (l layout) stockKeys(itemID int64) []string {
	if l.shards == 1 {
		return []string{l.stockKey(0, itemID)}
	}
	keys := make([]string, 0, l.shards+1)
	keys = append(keys, l.poolKey(itemID))
	for k := range l.shards {
		keys = append(keys, l.stockKey(k, itemID))
	}
	return keys
}
