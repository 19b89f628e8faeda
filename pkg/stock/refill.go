package stock

import (
	"context"
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
// halfway. It returns the units moved; 0 means the item is empty
// everywhere. Concurrent refills of one shard in this process share one
// round of moves.
func (s *Store) refill(ctx context.Context, l layout, itemID int64, k int) (int64, error) {
	key := strconv.FormatInt(l.sale, 10) + ":" + strconv.FormatInt(itemID, 10) + ":" + strconv.Itoa(k)
	v, err, _ := s.refills.Do(key, func() (any, error) {
		dst := l.stockKey(k, itemID)
		n, err := s.move(ctx, l, l.base(), l.poolKey(itemID), dst, itemID, 2*l.shards)
		if err != nil || n > 0 {
			return n, err
		}
		for i := 1; i < l.shards; i++ {
			j := (k + i) % l.shards
			n, err := s.move(ctx, l, l.tag(j), l.stockKey(j, itemID), dst, itemID, 2)
			if err != nil || n > 0 {
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

// move takes units from src (in slot srcTag) and gives them to dst. When
// the give fails the move stays in srcTag's journal and finishMoves applies
// it later; the units are never counted twice (move_give is once per move
// id) and never lost (the journal keeps them until applied or voided by a
// load).
func (s *Store) move(ctx context.Context, l layout, srcTag, src, dst string, itemID int64, divisor int) (int64, error) {
	id := uuid.NewString()
	res, err := s.take.Exec(ctx, s.client, []string{src, journalOf(srcTag), epochOf(srcTag)},
		[]string{id, dst, strconv.Itoa(divisor)}).ToArray()
	if err != nil || len(res) != 2 {
		return 0, fmt.Errorf("refill sale %d item %d: take from %s: %v", l.sale, itemID, src, err)
	}
	n, err := res[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("refill sale %d item %d: take from %s: %w", l.sale, itemID, src, err)
	}
	switch {
	case n == -3:
		return 0, ErrNotLoaded
	case n == 0:
		return 0, nil
	}
	epoch, _ := res[1].ToString()
	applied, err := s.apply(ctx, l, srcTag, id, dst, n, epoch)
	if err != nil {
		return 0, err
	}
	if applied < 0 {
		return 0, ErrNotLoaded
	}
	return n, nil
}

// apply runs the give half of a journaled move and clears the journal
// entry. It returns move_give's answer: 1 the units landed now, 0 they had
// landed before, negative the move is void (the destination was reloaded or
// is missing).
func (s *Store) apply(ctx context.Context, l layout, srcTag, id, dst string, n int64, epoch string) (int64, error) {
	itemID, _ := itemOfKey(dst)
	dstTag := tagOfKey(dst)
	r, err := s.give.Exec(ctx, s.client, []string{dst, appliedOf(dstTag), epochOf(dstTag)},
		[]string{id, strconv.FormatInt(n, 10), epoch, ReturnedChannel,
			strconv.FormatInt(l.sale, 10) + ":" + strconv.FormatInt(itemID, 10)}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("move %s of sale %d to %s: %w", id, l.sale, dst, err)
	}
	// Applied, or void: either way the entry is done. If this HDEL fails the
	// entry is applied again later, which move_give makes a no-op.
	_ = s.client.Do(ctx, s.client.B().Hdel().Key(journalOf(srcTag)).Field(id).Build()).Error()
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
			if applied == 1 {
				landed += e.units
			}
		}
	}
	return landed, nil
}
