package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/tools/testenv"
)

func movesStore(t *testing.T, shards int) (rueidis.Client, *Store, layout) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	c := testenv.RedisClient(t, testenv.RedisAddr())
	sale := 8_000_000_000 + time.Now().UnixNano()%1_000_000_000
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Do(ctx, c.B().Keys().Pattern(fmt.Sprintf("{fs:%d*", sale)).Build()).AsStrSlice()
		for _, k := range keys {
			c.Do(ctx, c.B().Del().Key(k).Build())
		}
	})
	return c, New(c, WithShards(func(int64) (int, error) { return shards, nil })), layout{sale: sale, shards: shards, tags: shardTags(sale, shards)}
}

// A move that stopped halfway (taken from the pool, never given: the
// gateway died in between) keeps its units: reconciliation counts them in
// transit and the next refill lands them, exactly once.
func TestMoveStoppedHalfwayIsFinished(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	// 40 units: 10 per shard, 20 in the pool. Take half the pool, no give.
	res, err := s.take.Exec(ctx, s.client, []string{l.poolKey(1), journalOf(l.base()), epochOf(l.base())},
		[]string{"m-1", l.stockKey(0, 1), "2"}).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res[0].AsInt64(); n != 10 {
		t.Fatalf("took %d, want 10", n)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 30 {
		t.Fatalf("left in keys = %d, want 30 (10 in transit)", left)
	}
	snap, err := s.Reconcile(ctx, l.sale, []int64{1}, func(context.Context, Snapshot) (*Copy, error) { return nil, nil })
	if err != nil || snap.Left[1] != 40 {
		t.Fatalf("reconcile counted %d (%v), want 40 with the move in transit", snap.Left[1], err)
	}
	landed, err := s.finishMoves(ctx, l)
	if err != nil || landed != 10 {
		t.Fatalf("finished %d (%v), want 10", landed, err)
	}
	if landed, err := s.finishMoves(ctx, l); err != nil || landed != 0 {
		t.Fatalf("second finish landed %d (%v), want 0", landed, err)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 40 {
		t.Fatalf("left = %d after finishing the move, want 40", left)
	}
}

// A move taken before a load is void after it: the load wrote PostgreSQL's
// numbers, which already count those units.
func TestMoveTakenBeforeALoadIsVoid(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.take.Exec(ctx, s.client, []string{l.poolKey(1), journalOf(l.base()), epochOf(l.base())},
		[]string{"m-2", l.stockKey(1, 1), "2"}).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	epoch, _ := res[1].ToString()
	time.Sleep(time.Millisecond) // a new epoch
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := s.apply(ctx, l, l.base(), "m-2", l.stockKey(1, 1), 10, epoch)
	if err != nil || r >= 0 {
		t.Fatalf("give after a load = %d (%v), want void", r, err)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 40 {
		t.Fatalf("left = %d, want the loaded 40", left)
	}
}

// Shard tags land in equal slot ranges, one per master of an evenly dealt
// cluster, and CRC-16 matches Redis' own (the example in the cluster spec).
func TestShardTagsSpreadOverSlotRanges(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 = %#x, want 0x31c3", got)
	}
	for _, shards := range []int{2, 3, 6, 16} {
		tags := shardTags(42, shards)
		for k, tag := range tags {
			slot := int(crc16(tag[1:len(tag)-1]) % slotCount)
			if lo, hi := k*slotCount/shards, (k+1)*slotCount/shards; slot < lo || slot >= hi {
				t.Errorf("shards=%d: %s in slot %d, want %d..%d", shards, tag, slot, lo, hi-1)
			}
		}
	}
}

// A load reaches the pool before the shards. A refill taking from the
// freshly loaded pool for a shard still on the old load waits in the
// journal (move_give answers "not yet") and lands once the shard is loaded:
// the units the new load wrote are all there in the end.
func TestMoveDuringALoadWaitsForIt(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // a later epoch
	// The second load, cut after the pool: 40 units, 10 per shard, 20 in the pool.
	epoch := strconv.FormatInt(time.Now().UnixMicro(), 10)
	pool := func(it ItemStock) (string, int64) { return l.poolKey(it.ItemID), 20 }
	if err := s.loadSlot(ctx, l, l.base(), epoch, "x", []ItemStock{{ItemID: 1}}, pool, nil); err != nil {
		t.Fatal(err)
	}
	n, err := s.move(ctx, l, l.base(), l.poolKey(1), l.stockKey(0, 1), 1, 2)
	if err != nil || n != 0 {
		t.Fatalf("move to a shard the load has not reached: %d, %v; want 0 moved, no error", n, err)
	}
	for k := range 2 {
		shard := func(it ItemStock) (string, int64) { return l.stockKey(k, it.ItemID), 10 }
		if err := s.loadSlot(ctx, l, l.tag(k), epoch, "x", []ItemStock{{ItemID: 1}}, shard, nil); err != nil {
			t.Fatal(err)
		}
	}
	if landed, err := s.finishMoves(ctx, l); err != nil || landed != 10 {
		t.Fatalf("finished %d (%v), want the 10 units taken from the new pool", landed, err)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 40 {
		t.Fatalf("left = %d, want the 40 the load wrote", left)
	}
}

// A give that finds its destination paused (a repair took the keys away)
// stays in the journal; if the repair puts the keys back instead of
// reloading, the move lands then.
func TestMoveIntoAPausedShardLandsAfterTheRestore(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	dst := l.stockKey(1, 1)
	vals, err := s.pause.Exec(ctx, s.client, []string{dst, PauseMarker(dst)}, []string{pauseMarkerLife}).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	was, _ := vals[0].AsInt64()
	if _, err := s.move(ctx, l, l.base(), l.poolKey(1), dst, 1, 2); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("move into a paused shard: %v, want ErrNotLoaded", err)
	}
	if err := s.restore(ctx, map[string]*int64{dst: &was}); err != nil {
		t.Fatal(err)
	}
	if landed, err := s.finishMoves(ctx, l); err != nil || landed != 10 {
		t.Fatalf("finished %d (%v), want 10", landed, err)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 40 {
		t.Fatalf("left = %d, want 40", left)
	}
}

// A shard whose key is lost (a failover, a repair) does not stop the others
// refilling: a dry shard skips it and takes from the one that has units.
func TestRefillSkipsAShardThatIsNotLoaded(t *testing.T) {
	c, s, l := movesStore(t, 3)
	ctx := testenv.Context(t)
	// 6 units: 1 per shard, 3 in the pool; empty the pool and shard 0.
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 6}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{l.poolKey(1), l.stockKey(0, 1)} {
		if err := c.Do(ctx, c.B().Set().Key(k).Value("0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().Del().Key(l.stockKey(1, 1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	n, err := s.refill(ctx, l, 1, 0)
	if err != nil || n != 1 {
		t.Fatalf("refill with shard 1 lost: %d, %v; want shard 2's unit", n, err)
	}
}

// A pause run twice on a slot (a retry, or one whose reply was lost)
// returns the values the first took, and the markers keep them: the keys
// go back from the markers alone. Before, the second pause returned
// "missing" and the slot's units were lost once the repair gave up.
func TestPauseTwiceKeepsTheValues(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	keys := l.slotKeys(l.base(), []int64{1}) // the pool
	pairs := []string{keys[0], PauseMarker(keys[0])}
	for round := 1; round <= 2; round++ {
		vals, err := s.pause.Exec(ctx, s.client, pairs, []string{pauseMarkerLife}).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		if n, err := vals[0].AsInt64(); err != nil || n != 20 {
			t.Fatalf("pause %d returned %d (%v), want the pool's 20", round, n, err)
		}
	}
	if _, err := s.Left(ctx, l.sale, 1); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("left while paused: %v, want ErrNotLoaded", err)
	}
	if err := s.restoreFromMarkers(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if left, err := s.Left(ctx, l.sale, 1); err != nil || left != 40 {
		t.Fatalf("left after restoring from the markers: %d (%v), want 40", left, err)
	}
}

// A repair whose second look, on the paused sale, wants nothing after all
// puts the paused stock back: the sale sells and releases as before.
func TestRepairThatChangesItsMindPutsTheStockBack(t *testing.T) {
	_, s, l := movesStore(t, 2)
	ctx := testenv.Context(t)
	if err := s.Load(ctx, l.sale, []ItemStock{{ItemID: 1, Left: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, l.sale, 1, "u1", "o1"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := s.Reconcile(ctx, l.sale, []int64{1}, func(context.Context, Snapshot) (*Copy, error) {
		if calls++; calls == 1 {
			return &Copy{Items: []ItemStock{{ItemID: 1, Left: 39}}, Holders: []Holder{{UserID: "u1", OrderID: "o1"}}}, nil
		}
		return nil, nil // paused, it looks again and wants nothing
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("decide called %d times, want 2 (live, then paused)", calls)
	}
	if left, err := s.Left(ctx, l.sale, 1); err != nil || left != 39 {
		t.Fatalf("left after the repair changed its mind: %d (%v), want 39", left, err)
	}
	if ok, err := s.Release(ctx, l.sale, 1, "u1", "o1"); err != nil || !ok {
		t.Fatalf("release after it: %v %v, want the unit back", ok, err)
	}
	if left, _ := s.Left(ctx, l.sale, 1); left != 40 {
		t.Fatalf("left = %d, want 40", left)
	}
}
