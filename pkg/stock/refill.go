package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// refill moves units of itemID into shard k of a sharded sale, which just
// read empty: from the item's pool first (a 1/(2·shards) share of what is
// left there, so refills stay rare while the pool is large and small near
// the end), then half of another shard's units, then any move that stopped
// halfway. A source that is not loaded (a shard lost in a failover, a
// repair under way) is skipped, not fatal: the others may still have
// units. It returns the units moved; 0 means every loaded source was empty.
// Concurrent refills of one shard in this process share one round.
func (s *Store) refill(ctx context.Context, l layout, itemID int64, k int) (int64, error) {
	key := strconv.FormatInt(l.sale, 10) + ":" + strconv.FormatInt(itemID, 10) + ":" + strconv.Itoa(k)
	v, err, _ := s.refills.Do(key, func() (any, error) {
		dst := l.stockKey(k, itemID)
		n, err := s.move(ctx, l, l.base(), l.poolKey(itemID), dst, itemID, 2*l.shards)
		if n > 0 || (err != nil && !errors.Is(err, errSourceNotLoaded)) {
			return n, err
		}
		for i := 1; i < l.shards; i++ {
			j := (k + i) % l.shards
			n, err := s.move(ctx, l, l.tag(j), l.stockKey(j, itemID), dst, itemID, 2)
			if n > 0 || (err != nil && !errors.Is(err, errSourceNotLoaded)) {
				return n, err
			}
		}
		return s.finishMoves(ctx, l)
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// errSourceNotLoaded: the key a move would take from is missing.
var errSourceNotLoaded = fmt.Errorf("move source: %w", ErrNotLoaded)

// move takes units from src (in slot srcTag) and gives them to dst. When
// the give fails or must wait, the move stays in srcTag's journal and
// finishMoves applies it later; the units are never counted twice
// (move_give is once per move id) and never lost (the journal keeps them
// until applied, or voided by a load that counted them).
func (s *Store) move(ctx context.Context, l layout, srcTag, src, dst string, itemID int64, divisor int) (int64, error) {
	id := uuid.NewString()
	res, err := s.take.Exec(ctx, s.client, []string{src, journalOf(srcTag), epochOf(srcTag)},
		[]string{id, dst, strconv.Itoa(divisor)}).ToArray()
	if err != nil {
		return 0, fmt.Errorf("refill sale %d item %d: take from %s: %w", l.sale, itemID, src, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("refill sale %d item %d: take from %s: %d replies, want 2", l.sale, itemID, src, len(res))
	}
	n, err := res[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("refill sale %d item %d: take from %s: %w", l.sale, itemID, src, err)
	}
	switch {
	case n == -3:
		return 0, errSourceNotLoaded
	case n == 0:
		return 0, nil
	}
	epoch, _ := res[1].ToString()
	r, err := s.apply(ctx, l, srcTag, id, dst, n, epoch)
	switch {
	case err != nil:
		return 0, err
	case r == giveNotLoaded:
		return 0, ErrNotLoaded
	case r >= 0:
		return n, nil
	}
	return 0, nil // void, or waiting for a load to reach dst
}

// move_give's answers (see pkg/lua/move_give.lua).
const (
	giveApplied   = 1
	giveDone      = 0
	giveVoid      = -1
	giveNotYet    = -2
	giveNotLoaded = -3
)

// apply runs the give half of a journaled move and, once the move is
// settled (applied now or before, or void), clears its journal entry. It
// returns move_give's answer.
func (s *Store) apply(ctx context.Context, l layout, srcTag, id, dst string, n int64, epoch string) (int64, error) {
	dstTag := tagOfKey(dst)
	r, err := s.give.Exec(ctx, s.client, []string{dst, appliedOf(dstTag), epochOf(dstTag)},
		[]string{id, strconv.FormatInt(n, 10), epoch}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("move %s of sale %d to %s: %w", id, l.sale, dst, err)
	}
	if r == giveApplied || r == giveDone || r == giveVoid {
		// If this HDEL fails the entry is applied again later, which
		// move_give makes a no-op.
		_ = s.client.Do(ctx, s.client.B().Hdel().Key(journalOf(srcTag)).Field(id).Build()).Error()
	}
	return r, nil
}

// journalEntry is a move taken from its source and maybe not yet given.
type journalEntry struct {
	srcTag, id, dst string
	units           int64
	epoch           string
}

func parseJournal(srcTag string, m map[string]string) []journalEntry {
	out := make([]journalEntry, 0, len(m))
	for id, v := range m {
		f := strings.Fields(v)
		if len(f) != 3 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, journalEntry{srcTag: srcTag, id: id, dst: f[0], units: n, epoch: f[2]})
	}
	return out
}

// FinishMoves applies the moves of a sharded sale left halfway (a gateway
// timed out or died between a refill's take and its give) and returns the
// units that landed. A refill does it when every source is dry; the
// gateways' stock poll does it for an item that reads sold out, since then
// nobody buys, no refill runs, and the last units would stay in a journal
// while the sale showed SOLD_OUT and the queue stopped admitting.
func (s *Store) FinishMoves(ctx context.Context, saleID int64) (int64, error) {
	l, err := s.layout(saleID)
	if err != nil || l.shards == 1 {
		return 0, err
	}
	return s.finishMoves(ctx, l)
}

// finishMoves applies every move of the sale left halfway (its gateway
// timed out or died between the take and the give) and returns the units
// that landed because of it.
func (s *Store) finishMoves(ctx context.Context, l layout) (int64, error) {
	var landed int64
	for _, tag := range l.slots() {
		m, err := s.client.Do(ctx, s.client.B().Hgetall().Key(journalOf(tag)).Build()).AsStrMap()
		if err != nil && !rueidis.IsRedisNil(err) {
			return landed, fmt.Errorf("read moves of sale %d (%s): %w", l.sale, tag, err)
		}
		for _, e := range parseJournal(tag, m) {
			applied, err := s.apply(ctx, l, tag, e.id, e.dst, e.units, e.epoch)
			if err != nil {
				return landed, err
			}
			if applied == giveApplied {
				landed += e.units
			}
		}
	}
	return landed, nil
}
