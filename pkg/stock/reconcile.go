package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// ErrBusy: the sale's keys changed during every attempt to read them
// consistently (or to rewrite them from that read). Nothing was written;
// retry when the traffic on the sale is lower.
var ErrBusy = errors.New("stock: the sale's keys kept changing during reconciliation")

// reconcileAttempts bounds the optimistic read-decide-write rounds.
const reconcileAttempts = 20

// Snapshot is a sale's hot copy as Redis holds it, read at one instant.
type Snapshot struct {
	Left    map[int64]int64   // units left per item; an item whose key is missing is absent
	Holders map[string]string // user -> order id
}

// Copy is a hot copy to write: stock left per item and the active holders.
type Copy struct {
	Items   []ItemStock
	Holders []Holder
}

// Reconcile reads the stock of itemIDs and the holders of a sale as one
// consistent snapshot, passes it to decide, and writes the Copy decide
// returns (nil: write nothing) only if none of those keys changed since the
// read. The read and the write are guarded by WATCH/MULTI/EXEC on a
// dedicated connection, so a reservation or release that lands while decide
// runs (decide may query PostgreSQL) is never overwritten: the round starts
// again, up to a bound, then ErrBusy. The write replaces the holders, sets
// the stock (SET, never INCRBY) and announces "<sale>" on ReturnedChannel
// so gateways drop their sold-out flags, all in one transaction. It returns
// the snapshot decide saw last.
func (s *Store) Reconcile(ctx context.Context, saleID int64, itemIDs []int64,
	decide func(context.Context, Snapshot) (*Copy, error)) (Snapshot, error) {
	l, err := s.layout(saleID)
	if err != nil {
		return Snapshot{}, err
	}
	if l.shards > 1 {
		return s.reconcileSharded(ctx, l, itemIDs, decide)
	}
	for range reconcileAttempts {
		var snap Snapshot
		var aborted bool
		err := s.client.Dedicated(func(c rueidis.DedicatedClient) error {
			var err error
			snap, aborted, err = reconcileRound(ctx, c, saleID, itemIDs, decide)
			return err
		})
		if err != nil {
			return snap, err
		}
		if !aborted {
			return snap, nil
		}
		if ctx.Err() != nil {
			return snap, fmt.Errorf("reconcile sale %d: %w", saleID, ctx.Err())
		}
	}
	return Snapshot{}, fmt.Errorf("reconcile sale %d: %w", saleID, ErrBusy)
}

// unwatchTimeout bounds the UNWATCH after a round that did not EXEC (often
// because Redis was slow or gone): the repair answers past its own
// deadline by at most this much.
const unwatchTimeout = time.Second

// reconcileRound is one WATCH, read, decide, MULTI/EXEC round; aborted
// reports that a watched key changed and nothing was written.
func reconcileRound(ctx context.Context, c rueidis.DedicatedClient, saleID int64, itemIDs []int64,
	decide func(context.Context, Snapshot) (*Copy, error)) (snap Snapshot, aborted bool, err error) {
	keys := make([]string, 0, len(itemIDs)+1)
	keys = append(keys, HoldersKey(saleID))
	for _, id := range itemIDs {
		keys = append(keys, StockKey(saleID, id))
	}
	// Leave no WATCH behind on a pooled connection: set up before the
	// WATCH, since a WATCH whose deadline ran out may still reach Redis
	// (the connection is pipelined and stays open), and undone unless an
	// EXEC's reply came back.
	execed := false
	defer func() {
		if !execed {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unwatchTimeout)
			_ = c.Do(uctx, c.B().Unwatch().Build()).Error()
			cancel()
		}
	}()
	if err := c.Do(ctx, c.B().Watch().Key(keys...).Build()).Error(); err != nil {
		return snap, false, fmt.Errorf("reconcile sale %d: watch: %w", saleID, err)
	}
	if snap, err = readSnapshot(ctx, c, saleID, itemIDs); err != nil {
		return snap, false, err
	}
	cp, err := decide(ctx, snap)
	if err != nil {
		return snap, false, err
	}
	tx, err := writeCopy(c.B(), saleID, cp)
	if err != nil {
		return snap, false, err
	}
	aborted, err = execWrite(c.DoMulti(ctx, tx...))
	execed = err == nil // a deadline that ran out before the EXEC left the WATCH on
	if err != nil {
		return snap, false, fmt.Errorf("reconcile sale %d: %w", saleID, err)
	}
	return snap, aborted, nil
}

// readSnapshot reads the holders and the stock of itemIDs (under the
// caller's WATCH).
func readSnapshot(ctx context.Context, c rueidis.DedicatedClient, saleID int64, itemIDs []int64) (Snapshot, error) {
	reads := make(rueidis.Commands, 0, len(itemIDs)+1)
	reads = append(reads, c.B().Hgetall().Key(HoldersKey(saleID)).Build())
	for _, id := range itemIDs {
		reads = append(reads, c.B().Get().Key(StockKey(saleID, id)).Build())
	}
	res := c.DoMulti(ctx, reads...)
	snap := Snapshot{Left: make(map[int64]int64, len(itemIDs))}
	var err error
	if snap.Holders, err = res[0].AsStrMap(); err != nil {
		return snap, fmt.Errorf("reconcile sale %d: read holders: %w", saleID, err)
	}
	for i, id := range itemIDs {
		n, err := res[i+1].AsInt64()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			return snap, fmt.Errorf("reconcile sale %d: read stock of item %d: %w", saleID, id, err)
		default:
			snap.Left[id] = n
		}
	}
	return snap, nil
}

// writeCopy is the MULTI/EXEC transaction that writes cp: the holders
// replaced, the stock set (SET, never INCRBY), "<sale>" announced on
// ReturnedChannel. For a nil cp it is an empty MULTI/EXEC, which still
// fails when a watched key changed: that is what makes the snapshot
// consistent even when nothing is written.
func writeCopy(b rueidis.Builder, saleID int64, cp *Copy) (rueidis.Commands, error) {
	tx := rueidis.Commands{b.Multi().Build()}
	if cp != nil {
		holdersKey := HoldersKey(saleID)
		tx = append(tx, b.Del().Key(holdersKey).Build())
		for _, it := range cp.Items {
			if it.Left < 0 {
				return nil, fmt.Errorf("reconcile sale %d: item %d has negative stock %d", saleID, it.ItemID, it.Left)
			}
			tx = append(tx, b.Set().Key(StockKey(saleID, it.ItemID)).Value(strconv.FormatInt(it.Left, 10)).Build())
		}
		if len(cp.Holders) > 0 {
			h := b.Hset().Key(holdersKey).FieldValue()
			for _, hd := range cp.Holders {
				h = h.FieldValue(hd.UserID, hd.OrderID)
			}
			tx = append(tx, h.Build())
		}
		// The epoch says the hot copy is loaded (HeldBy), as a load's does,
		// and that its holders are not the ones before (holders_state.lua).
		tx = append(tx, b.Set().Key(epochOf(saleTag(saleID))).Value(strconv.FormatInt(time.Now().UnixMicro(), 10)).Build())
		tx = append(tx, b.Publish().Channel(ReturnedChannel).Message(strconv.FormatInt(saleID, 10)).Build())
	}
	return append(tx, b.Exec().Build()), nil
}

// execWrite reads the replies of writeCopy's transaction: aborted when a
// watched key changed (EXEC answered nil) and nothing was written.
func execWrite(res []rueidis.RedisResult) (aborted bool, err error) {
	for _, r := range res[:len(res)-1] {
		if err := r.Error(); err != nil {
			return false, fmt.Errorf("queue write: %w", err)
		}
	}
	replies, err := res[len(res)-1].ToArray()
	if rueidis.IsRedisNil(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("write: %w", err)
	}
	for _, r := range replies {
		if err := r.Error(); err != nil {
			return false, fmt.Errorf("write: %w", err)
		}
	}
	return false, nil
}
