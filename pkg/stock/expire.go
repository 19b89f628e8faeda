package stock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// ExpireSale makes every key the stock scripts keep for a sale expire at
// at (PEXPIREAT, one pipeline that rueidis splits by node): each item's
// stock (and a sharded item's pool), and per slot the holders and the
// notes of what they hold, the spent admission tokens and which order
// spent each, the moves' journal, the load's epoch and the holders'
// version. Without it a sale's hot copy stayed in Redis for good: ten
// thousand holders and their notes, a few megabytes, for every sale ever
// run. A key that does not exist is
// passed over, and one made after the call has no expiry until the next
// call, so the order service calls it again every pass (WatchRetention).
// Pause markers expire by themselves, and the waiting room's keys are the
// gateway's (queue.Expire).
func (s *Store) ExpireSale(ctx context.Context, saleID int64, itemIDs []int64, at time.Time) error {
	l, err := s.layout(saleID)
	if err != nil {
		return err
	}
	ms := at.UnixMilli()
	expire := func(key string) rueidis.Completed {
		return s.client.B().Pexpireat().Key(key).MillisecondsTimestamp(ms).Build()
	}
	slots := l.slots()
	cmds := make(rueidis.Commands, 0, 8*len(slots)+len(itemIDs)*(l.shards+1))
	for _, tag := range slots {
		for _, key := range []string{holdersOf(tag), holderItemsOf(tag), tokensOf(tag), spentByOf(tag),
			journalOf(tag), appliedOf(tag), epochOf(tag), holdersVersionOf(tag)} {
			cmds = append(cmds, expire(key))
		}
	}
	for _, item := range itemIDs {
		for _, key := range l.stockKeys(item) {
			cmds = append(cmds, expire(key))
		}
	}
	failed := 0
	var first error
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("expiry of sale %d's hot copy: %d of %d commands failed: %w", saleID, failed, len(cmds), first)
	}
	return nil
}
