package catalog

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// A PostgreSQL that stops answering (paused, or its packets dropped) fails
// the catalog's refreshes and nothing else: the stock poll goes on, so a
// sold-out flag still clears within the poll's interval when a unit comes
// back without its announcement. The refresh had no bound and ran on the
// poll's goroutine: the first refresh against the hung database stopped
// the poll for good.
func TestStockPollSurvivesAHungDatabase(t *testing.T) {
	c, pool, ctx := testCatalog(t)
	saleID, itemID := createSale(t, ctx, pool)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sale, ok := c.Sale(saleID)
	if !ok {
		t.Fatalf("sale %d not in the catalog", saleID)
	}
	it, _ := sale.Item(itemID)

	hung, err := pgxpool.New(ctx, "postgres://nobody@"+testenv.BlackHole(t)+"/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hung.Close)
	c.pool = hung

	rc := testenv.RedisClient(t, testenv.RedisAddr())
	st := stock.New(rc)
	if err := st.Load(ctx, saleID, []stock.ItemStock{{ItemID: itemID, Left: 0}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testenv.DeleteKeys(ctx, rc, "{fs:"+strconv.FormatInt(saleID, 10)+"}*") })
	keys, err := st.StockKeys(saleID, itemID)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(c, rc, st, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx, 20*time.Millisecond, 20*time.Millisecond) }()
	t.Cleanup(func() { stop(); <-done })

	it.MarkSoldOut()
	// Let refreshes start and hang first.
	time.Sleep(300 * time.Millisecond)
	// A unit comes back; its announcement is lost.
	if err := rc.Do(ctx, rc.B().Set().Key(keys[0]).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for it.SoldOut() {
		if time.Now().After(deadline) {
			t.Fatal("the sold-out flag still set 1 s after the unit came back, with the stock polled every 20 ms: the hung catalog refresh stopped the poll")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A returned unit's announcement clears the item's sold-out flag on its
// own: with the stock poll an hour away, only the channel can. ("<sale>"
// clears every item of the sale, after a reload or a repair.)
func TestReturnedStockClearsTheFlag(t *testing.T) {
	c, pool, ctx := testCatalog(t)
	saleID, itemID := createSale(t, ctx, pool)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sale, _ := c.Sale(saleID)
	it, _ := sale.Item(itemID)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	w := NewWatcher(c, rc, stock.New(rc), slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx, time.Hour, time.Hour) }()
	t.Cleanup(func() { stop(); <-done })

	for _, msg := range []string{strconv.FormatInt(saleID, 10) + ":" + strconv.FormatInt(itemID, 10), strconv.FormatInt(saleID, 10)} {
		it.MarkSoldOut()
		// Announced until heard: the subscription may not be up yet.
		deadline := time.Now().Add(5 * time.Second)
		for it.SoldOut() {
			if time.Now().After(deadline) {
				t.Fatalf("sold-out flag still set 5 s after announcing %q on %s", msg, stock.ReturnedChannel)
			}
			if err := rc.Do(ctx, rc.B().Publish().Channel(stock.ReturnedChannel).Message(msg).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Another sale's or item's announcement, or garbage, clears nothing
	// (the handler itself, synchronously).
	it.MarkSoldOut()
	for _, msg := range []string{strconv.FormatInt(saleID+1000000, 10) + ":" + strconv.FormatInt(itemID, 10),
		strconv.FormatInt(saleID, 10) + ":" + strconv.FormatInt(itemID+1000000, 10), "garbage", strconv.FormatInt(saleID, 10) + ":x", ""} {
		w.returned(msg)
		if !it.SoldOut() {
			t.Fatalf("announcing %q cleared the flag of item %d of sale %d", msg, itemID, saleID)
		}
	}
}

// A sharded item's last units left in a move journal (a gateway died
// between a refill's take and its give) land when the poll reads the item
// sold out: no purchase, hence no refill, would ever land them, and the
// sale showed SOLD_OUT (its queue no longer admitting) with units left.
func TestPollLandsMovesLeftHalfway(t *testing.T) {
	c, pool, ctx := testCatalog(t)
	saleID, itemID := createSale(t, ctx, pool)
	if _, err := pool.Exec(ctx, `UPDATE flash_sale SET stock_shards = 2 WHERE id = $1`, saleID); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sale, _ := c.Sale(saleID)
	it, _ := sale.Item(itemID)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	st := stock.New(rc, stock.WithShards(c.Shards))
	keys, err := st.StockKeys(saleID, itemID) // the pool, then the shards
	if err != nil || len(keys) != 3 {
		t.Fatalf("stock keys %v (%v), want a pool and 2 shards", keys, err)
	}
	tagOf := func(k string) string { return k[:strings.IndexByte(k, '}')+1] }
	for _, k := range keys {
		t.Cleanup(func() { _, _ = testenv.DeleteKeys(context.Background(), rc, tagOf(k)+"*") })
	}
	if err := st.Load(ctx, saleID, []stock.ItemStock{{ItemID: itemID, Left: 2}}, nil); err != nil {
		t.Fatal(err)
	}
	base := tagOf(keys[0])
	// Both units taken out of the pool towards shard 0, never given: what
	// move_take.lua leaves when its gateway dies before move_give.lua.
	epoch, err := rc.Do(ctx, rc.B().Get().Key(base+":epoch").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := rc.Do(ctx, rc.B().Set().Key(k).Value("0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.Do(ctx, rc.B().Hset().Key(base+":moves").FieldValue().FieldValue("m-test", keys[1]+" 2 "+epoch).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(c, rc, st, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx, time.Hour, 20*time.Millisecond) }()
	t.Cleanup(func() { stop(); <-done })
	deadline := time.Now().Add(2 * time.Second)
	for it.Left() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the item reads %d left 2 s into polling every 20 ms, sold out %v; want the 2 units of the move left halfway landed", it.Left(), it.SoldOut())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
