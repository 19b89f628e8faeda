package stock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/testenv"
)

func movesStore(t *testing.T, shards int) (rueidis.Client, *Store, layout) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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
