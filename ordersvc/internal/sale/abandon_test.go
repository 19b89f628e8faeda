package sale_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/accepted"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/kafkatopic"
	"flashsale/tools/testenv"
)

// v7At mints a UUIDv7 order id whose time is at, as a gateway would have
// then.
func v7At(t *testing.T, at time.Time) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(id[:6], ms[2:])
	return id
}

// Reservations no order backs come back once older than the in-flight
// window, and only those: the fresh, the accepted, the persisted and the
// ones whose item is unknown stay held. The unit is announced on the
// stock-returned channel like any return, and the order id is taken by a
// REJECTED row so the order can never appear later.
func TestReleaseAbandoned(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st := store.New(pool)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	stk := stock.New(rc)
	sl := testdb.Sale(t, st, 5, 5)
	testdb.Load(t, st, stk, sl.ID)
	itemA, itemB := sl.Items[0].ID, sl.Items[1].ID
	const window = 2 * time.Second
	old := time.Now().Add(-window - time.Second)

	reserve := func(item int64, user string, id uuid.UUID) string {
		t.Helper()
		if _, err := stk.Reserve(ctx, sl.ID, item, user, id.String()); err != nil {
			t.Fatal(err)
		}
		return id.String()
	}
	holders := map[string]string{
		// The gateway died between reserve and publish, long enough ago.
		"abandoned-a": reserve(itemA, "abandoned-a", v7At(t, old)),
		"abandoned-b": reserve(itemB, "abandoned-b", v7At(t, old)),
		// Maybe still waiting for the broker: kept.
		"fresh": reserve(itemA, "fresh", v7At(t, time.Now())),
		// Acknowledged and recorded, not persisted yet: kept.
		"accepted": reserve(itemA, "accepted", v7At(t, old)),
		// Persisted: kept.
		"persisted": reserve(itemB, "persisted", v7At(t, old)),
		// A v4 id carries no time, so its age is unknown: kept.
		"v4": reserve(itemB, "v4", uuid.New()),
	}
	if err := accepted.Record(ctx, rc, holders["accepted"], "accepted"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: uuid.MustParse(holders["persisted"]),
		SaleID: sl.ID, ItemID: itemB, UserID: "persisted", PlacedAt: old}}); err != nil {
		t.Fatal(err)
	}
	// A holder whose item no reservation noted (written by hand, as a
	// reservation of an older gateway would be): kept, counted.
	noNote := v7At(t, old).String()
	if err := rc.Do(ctx, rc.B().Hset().Key(stock.HoldersKey(sl.ID)).FieldValue().FieldValue("no-note", noNote).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	holders["no-note"] = noNote
	leftA, leftB := left(t, stk, sl.ID, itemA), left(t, stk, sl.ID, itemB)

	announced := make(chan string, 16)
	sub, cancelSub := rc.Dedicate()
	defer cancelSub()
	wait := sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { announced <- m.Message }})
	if err := sub.Do(ctx, sub.B().Subscribe().Channel(stock.ReturnedChannel).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_ = wait

	rl := relay.New(st, stk, quietLog, metrics.New())
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithInFlightWindow(window), sale.WithReleases(rl.Drain))
	var pages countingPacer
	sale.SetHolderPacer(svc, &pages)
	got, err := svc.ReleaseAbandoned(ctx, sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pages.waits == 0 {
		t.Error("the pass read holders without waiting for its pacer")
	}
	if got.Released != 2 || got.Unattributed != 1 {
		t.Fatalf("released %d, unattributed %d; want 2 and 1", got.Released, got.Unattributed)
	}
	// Its drain skips a row another test's relay holds; that relay
	// releases it.
	testdb.WaitSaleReleased(t, pool, sl.ID)
	after, err := stk.Holders(ctx, sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	for user, order := range holders {
		_, kept := after[user]
		if want := user != "abandoned-a" && user != "abandoned-b"; kept != want {
			t.Errorf("holder %s (order %s) kept %v, want %v", user, order, kept, want)
		}
	}
	if a, b := left(t, stk, sl.ID, itemA), left(t, stk, sl.ID, itemB); a != leftA+1 || b != leftB+1 {
		t.Errorf("stock after release: %d and %d, want %d and %d (one unit back each)", a, b, leftA+1, leftB+1)
	}
	want := map[string]bool{fmt.Sprintf("%d:%d", sl.ID, itemA): true, fmt.Sprintf("%d:%d", sl.ID, itemB): true}
	for len(want) > 0 {
		select {
		case m := <-announced:
			delete(want, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("returns not announced on %s: %v", stock.ReturnedChannel, want)
		}
	}
	for _, user := range []string{"abandoned-a", "abandoned-b"} {
		var status, reason string
		err := pool.QueryRow(ctx, `SELECT status, reject_reason FROM flash_sale_order WHERE id = $1`, holders[user]).Scan(&status, &reason)
		if err != nil || status != "REJECTED" || reason != event.RejectAbandoned {
			t.Errorf("order of %s: %q %q %v, want REJECTED %s (the id taken for good)", user, status, reason, err, event.RejectAbandoned)
		}
	}
	// The order can never appear after its unit was sold again: a late
	// copy of its event is a duplicate.
	out, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: uuid.MustParse(holders["abandoned-a"]),
		SaleID: sl.ID, ItemID: itemA, UserID: "abandoned-a", PlacedAt: old}})
	if err != nil || len(out) != 1 || out[0].Kind == store.Accepted {
		t.Errorf("late event of an abandoned order persisted as %+v (%v), want a duplicate", out, err)
	}
	// Once is once: a second pass finds nothing.
	if again, err := svc.ReleaseAbandoned(ctx, sl.ID); err != nil || again.Released != 0 {
		t.Errorf("second pass: %+v %v, want nothing released", again, err)
	}
	if a := left(t, stk, sl.ID, itemA); a != leftA+1 {
		t.Errorf("stock after the second pass: %d, want %d", a, leftA+1)
	}
}

// loadedSale is a sale of items of these quantities, its stock loaded into
// Redis, with the stores and the Redis client an abandon pass needs.
func loadedSale(t *testing.T, quantities ...int64) (context.Context, *store.Store, rueidis.Client, *stock.Store, store.Sale) {
	t.Helper()
	st, rc := storeAndRedis(t)
	stk := stock.New(rc)
	sl := testdb.Sale(t, st, quantities...)
	testdb.Load(t, st, stk, sl.ID)
	return testenv.Context(t), st, rc, stk, sl
}

func left(t *testing.T, stk *stock.Store, sale, item int64) int64 {
	t.Helper()
	n, err := stk.Left(context.Background(), sale, item)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// laggingReader is a lag reader over a fresh topic holding n messages its
// group never consumed: a consumer that has not caught up.
func laggingReader(t *testing.T, n int) *lag.Reader {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	name := "test-abandon-lag-" + uuid.NewString()[:8]
	kafkatopic.DeleteAtCleanup(t, testenv.KafkaBrokers(), name)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "acks": "all", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reports := make(chan kafka.Event, n)
	for i := range n {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: kafka.PartitionAny},
			Key: []byte(fmt.Sprint(i)), Value: []byte("x")}, reports); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatal(m.TopicPartition.Error)
		}
	}
	r, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: name, Group: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// While the consumer group has not caught up with the orders topic, a
// holder that looks abandoned may be an order the broker acknowledged
// whose gateway died before recording it: nothing is released.
func TestReleaseAbandonedWaitsForTheConsumer(t *testing.T) {
	t.Parallel()
	ctx, st, rc, stk, sl := loadedSale(t, 3)
	const window = time.Second
	id := v7At(t, time.Now().Add(-window-time.Second))
	if _, err := stk.Reserve(ctx, sl.ID, sl.Items[0].ID, "maybe-acked", id.String()); err != nil {
		t.Fatal(err)
	}
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithInFlightWindow(window),
		sale.WithCatchUp(laggingReader(t, 3), 300*time.Millisecond))
	res, err := svc.ReleaseAbandoned(ctx, sl.ID)
	var lagging *lag.LaggingError
	if !errors.As(err, &lagging) || res.Released != 0 {
		t.Fatalf("ReleaseAbandoned with the consumer behind: %+v, %v; want nothing released and a LaggingError", res, err)
	}
	h, err := stk.Holders(ctx, sl.ID)
	if err != nil || h["maybe-acked"] != id.String() {
		t.Fatalf("holders %v (%v), want the holder kept", h, err)
	}
	if n := left(t, stk, sl.ID, sl.Items[0].ID); n != 2 {
		t.Fatalf("%d left, want 2 (the unit still held)", n)
	}
}

// A sale whose last pass found every holder with a row is not read again
// until a holder is added or taken away, by this order service or a fresh
// one: the state it found settled is kept in Redis. A reservation is seen
// at once by a service that asks, even one that keeps the holder count by
// taking a released holder's place; a service that found the sale settled
// asks again one in-flight window later. The abandoned holders here are older than the window
// when they appear, which no live reservation is, so that a pass that
// read them would release them.
func TestReleaseAbandonedSkipsSettledSales(t *testing.T) {
	t.Parallel()
	ctx, st, rc, stk, sl := loadedSale(t, 5)
	item := sl.Items[0].ID
	const window = 3 * time.Second // the steps between svc's look and its pass within it take milliseconds
	old := func() uuid.UUID { return v7At(t, time.Now().Add(-window-time.Second)) }
	reserve := func(user string, id uuid.UUID) {
		t.Helper()
		if _, err := stk.Reserve(ctx, sl.ID, item, user, id.String()); err != nil {
			t.Fatal(err)
		}
	}
	paid := map[string]string{}
	for _, user := range []string{"paid-1", "paid-2"} {
		id := old()
		reserve(user, id)
		if _, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: id,
			SaleID: sl.ID, ItemID: item, UserID: user, PlacedAt: time.Now().Add(-window)}}); err != nil {
			t.Fatal(err)
		}
		paid[user] = id.String()
	}
	rl := relay.New(st, stk, quietLog, metrics.New())
	service := func() *sale.Service {
		return sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithInFlightWindow(window), sale.WithReleases(rl.Drain))
	}
	svc := service()
	pass := func(svc *sale.Service, what string, want int) {
		t.Helper()
		res, err := svc.ReleaseAbandoned(ctx, sl.ID)
		if err != nil || res.Released != want {
			t.Fatalf("%s: released %d (%v), want %d", what, res.Released, err, want)
		}
	}
	pass(svc, "first pass: every holder has a row", 0)

	// paid-2's holder rewritten behind the scripts' back, to an order id
	// that nothing explains: a pass that read the holders would report it.
	holder := func(order string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Hset().Key(stock.HoldersKey(sl.ID)).FieldValue().FieldValue("paid-2", order).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	holder(old().String())
	for what, svc := range map[string]*sale.Service{"settled": svc, "settled, a fresh order service": service()} {
		if res, err := svc.ReleaseAbandoned(ctx, sl.ID); err != nil || res.Released+res.Unattributed != 0 {
			t.Fatalf("%s: %+v (%v), want the holders not read", what, res, err)
		}
	}
	looked := time.Now() // svc found the sale settled
	holder(paid["paid-2"])

	// paid-1's order ends and an abandoned reservation takes its place: the
	// same count. Asked, Redis tells at once; svc asks again one window
	// after it last did, before a reservation made since is overdue.
	if ok, err := stk.Release(ctx, sl.ID, item, "paid-1", paid["paid-1"]); err != nil || !ok {
		t.Fatalf("release paid-1: %v, %v", ok, err)
	}
	reserve("swapped-in", old())
	pass(svc, "a reservation that kept the count, within a window of svc's last look", 0)
	pass(service(), "a reservation that kept the count, a fresh order service", 1)
	pass(service(), "after the release", 0) // settles it again
	reserve("added", old())
	time.Sleep(time.Until(looked.Add(window)))
	pass(svc, "a reservation, one window after svc's last look", 1)
}

// A write-off whose COMMIT PostgreSQL refuses gives nothing back: no
// REJECTED row took the order id, so the order may still arrive from the
// broker and be persisted, and its unit must still be held when it does.
// Once commits go through, the next pass writes the reservation off and
// its unit comes back once.
func TestWriteOffWhoseCommitFails(t *testing.T) {
	t.Parallel()
	pool, rc := testdb.Own(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	sl := testdb.Sale(t, st, 2)
	testdb.Load(t, st, stk, sl.ID)
	item := sl.Items[0].ID
	const window = 2 * time.Second
	id := v7At(t, time.Now().Add(-window-time.Second))
	if _, err := stk.Reserve(ctx, sl.ID, item, "abandoned", id.String()); err != nil {
		t.Fatal(err)
	}
	rl := relay.New(st, stk, quietLog, metrics.New())
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithInFlightWindow(window), sale.WithReleases(rl.Drain))

	lift := testdb.FailCommits(t, pool, "INSERT", "stock_release")
	if got, err := svc.ReleaseAbandoned(ctx, sl.ID); err == nil || got.Released != 0 {
		t.Errorf("write-off with its commit refused: %+v, err %v; want nothing released and the error", got, err)
	}
	if holders, err := stk.Holders(ctx, sl.ID); err != nil || holders["abandoned"] != id.String() {
		t.Errorf("holders after the refused write-off: %v (%v), want the reservation held", holders, err)
	}
	if n := left(t, stk, sl.ID, item); n != 1 {
		t.Errorf("Redis left after the refused write-off: %d, want 1", n)
	}
	if _, err := st.GetOrder(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("order %s after the refused write-off: %v, want no row", id, err)
	}
	lift()

	if got, err := svc.ReleaseAbandoned(ctx, sl.ID); err != nil || got.Released != 1 {
		t.Fatalf("write-off: %+v, err %v; want one released", got, err)
	}
	testdb.WaitReleased(t, pool, id)
	if n := left(t, stk, sl.ID, item); n != 2 {
		t.Errorf("Redis left after the write-off: %d, want 2: the unit back once", n)
	}
	if holders, err := stk.Holders(ctx, sl.ID); err != nil || len(holders) != 0 {
		t.Errorf("holders after the write-off: %v (%v), want none", holders, err)
	}
}

// countingPacer lets every read through at once and counts the waits.
type countingPacer struct{ waits int }

func (p *countingPacer) WaitN(context.Context, int) error {
	p.waits++
	return nil
}

// The pass's bound grows by the time its pace allows for reading a sale's
// holders, a page spare for each shard a sale may have; unpaced, nothing.
func TestReadTimeFollowsThePace(t *testing.T) {
	paced := sale.NewService(nil, nil, sale.WithHolderReadRate(20_000))
	// (10,000 / 1,000 + 64 pages) at 20 pages a second.
	if got, want := sale.ReadTime(paced, 10_000), 3700*time.Millisecond; got != want {
		t.Errorf("read time of 10,000 holders at 20,000/s = %s, want %s", got, want)
	}
	if got := sale.ReadTime(sale.NewService(nil, nil), 1_000_000); got != 0 {
		t.Errorf("read time unpaced = %s, want 0", got)
	}
}

// blockingPacer never lets a page through: it waits for its context.
type blockingPacer struct{}

func (blockingPacer) WaitN(ctx context.Context, _ int) error {
	<-ctx.Done()
	return ctx.Err()
}

// A pace that lets nothing through holds a pass only as long as the
// caller's context: the pass ends with that context's error and writes
// nothing off, rather than hang the loop every listed sale waits on.
func TestReleaseAbandonedEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, st, rc, stk, sl := loadedSale(t, 5)
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithHolderReadRate(20_000))
	sale.SetHolderPacer(svc, blockingPacer{})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		res, err := svc.ReleaseAbandoned(short, sl.ID)
		if err == nil && res.Released != 0 {
			err = fmt.Errorf("released %d", res.Released)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("pass with a pace that lets nothing through: %v, want the context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pass outlived its context by 10 s")
	}
}

// The watch reads a sale's holders from one in-flight window after its
// opening to the end of its payment window and one in-flight window after
// its end, the time its copy in Redis keeps no expiry. Before: no gateway
// reserves before the opening, so no holder can be overdue earlier, and a
// pass reading holders while the sale sells out holds Redis's one thread
// from its reservations. After: a reservation of the sale's last moments
// is overdue a window after its end, and a pass may come late. A holder
// whose order id is overdue shows which sales a pass read: in a sale open
// for a minute, or one that ended 40 s ago (eight windows, inside its
// minute of payment window) a second after its holder reserved, it is
// released at once; in a sale that has just opened only once the sale is
// older than the window; in one whose payment window closed a minute ago,
// never.
func TestWatchAbandonedReadsSalesInPlay(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	// A database and a Redis of its own: the watch acts on every sale in
	// play, and the shared ones hold other tests' sales.
	pool, rc := testdb.Own(t)
	st := store.New(pool)
	stk := stock.New(rc)
	const window = 5 * time.Second

	old := testdb.Sale(t, st, 5) // opened a minute ago
	opened := time.Now()
	young := testdb.SaleAt(t, st, opened, opened.Add(time.Hour), time.Minute, 5)
	ended := testdb.SaleAt(t, st, opened.Add(-time.Hour), opened.Add(-40*time.Second), time.Minute, 5)
	over := testdb.SaleAt(t, st, opened.Add(-time.Hour), opened.Add(-2*time.Minute), time.Minute, 5)
	for _, sl := range []store.Sale{old, young, ended, over} {
		testdb.Load(t, st, stk, sl.ID)
		placed := opened.Add(-time.Minute)
		if last := sl.EndsAt.Add(-time.Second); last.Before(placed) {
			placed = last
		}
		if _, err := stk.Reserve(ctx, sl.ID, sl.Items[0].ID, "gone", v7At(t, placed).String()); err != nil {
			t.Fatal(err)
		}
	}
	held := func(sl store.Sale) bool {
		t.Helper()
		ok, err := rc.Do(ctx, rc.B().Hexists().Key(stock.HoldersKey(sl.ID)).Field("gone").Build()).AsBool()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	rl := relay.New(st, stk, quietLog, metrics.New())
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithInFlightWindow(window), sale.WithReleases(rl.Drain))
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.WatchAbandoned(wctx, 50*time.Millisecond, quietLog) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	if setup := time.Since(opened); setup > window/2 {
		t.Fatalf("the setup took %v of the young sale's %v window: too little is left to tell whether a pass read it", setup, window)
	}
	deadline := opened.Add(window)
	for (held(old) || held(ended)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if held(old) {
		t.Fatalf("sale %d, open for a minute: its overdue holder still held %v after the young sale opened", old.ID, time.Since(opened))
	}
	if held(ended) {
		t.Fatalf("sale %d, ended 40 s before the young sale opened, its payment window open: its overdue holder still held %v after", ended.ID, time.Since(opened))
	}
	youngHeld := held(young)
	if since := time.Since(opened); since >= window {
		t.Fatalf("the old sale's holder went only %v after the young sale opened, past its %v window: cannot tell whether a pass read the young one early", since, window)
	}
	if !youngHeld {
		t.Fatalf("sale %d: its holder was read and released before the sale was open for the window (%v)", young.ID, window)
	}
	deadline = opened.Add(window + 3*time.Second)
	for held(young) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if held(young) {
		t.Errorf("sale %d, open for %v: its overdue holder still held", young.ID, time.Since(opened))
	}
	if !held(over) {
		t.Errorf("sale %d, its payment window closed a minute ago: its holder was read and released", over.ID)
	}
}
