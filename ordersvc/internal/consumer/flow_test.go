package consumer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"flashsale/ordersvc/internal/consumer"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

// The same message delivered twice becomes one order; sold moves once.
func TestDuplicateMessageWritesOneOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sale := testdb.Sale(t, e.store, 5)
	ev := orderEvent(sale, 0, "u1")
	e.publishEvents(ev, ev)
	r := e.start(e.store, 5*time.Second)
	e.waitCommitted(2)

	if st, _ := e.status(ev.OrderID); st != store.StatusPending {
		t.Errorf("status: got %q, want PENDING", st)
	}
	if got := e.sold(sale.ID); got != 1 {
		t.Errorf("sold: got %d, want 1", got)
	}
	var rows int
	if err := e.pool.QueryRow(testenv.Context(t), "SELECT count(*) FROM flash_sale_order WHERE sale_id = $1", sale.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("order rows: got %d, want 1", rows)
	}
	if p, d := testutil.ToFloat64(r.metrics.OrdersPersisted), testutil.ToFloat64(r.metrics.OrdersDuplicate); p != 1 || d != 1 {
		t.Errorf("persisted/duplicates: got %v/%v, want 1/1", p, d)
	}
}

// An event beyond PostgreSQL's stock and a second order of the same user
// become visible REJECTED rows, go to the dead-letter topic with their
// reason, and their shoppers are freed in Redis (the unit goes back only
// when PostgreSQL had it).
func TestRejectionsAreDeadLetteredAndReleased(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		quantity   int64
		users      [2]string
		wantReason string
	}{
		{"beyond the stock in PostgreSQL", 1, [2]string{"u1", "u2"}, store.ReasonSoldOutInDB},
		{"same user twice in one sale", 5, [2]string{"u1", "u1"}, store.ReasonAlreadyActive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := testenv.Context(t)
			sale := testdb.Sale(t, e.store, tt.quantity)
			item := sale.Items[0].ID
			first, second := orderEvent(sale, 0, tt.users[0]), orderEvent(sale, 0, tt.users[1])

			// Give Redis two units more than it should have, as after a bad
			// load, so both reservations succeed and the second has a unit
			// to give back.
			if err := e.stock.Load(ctx, sale.ID, []stock.ItemStock{{ItemID: item, Left: tt.quantity + 1}}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := e.stock.Reserve(ctx, sale.ID, item, first.UserID, first.OrderID.String()); err != nil {
				t.Fatal(err)
			}
			if tt.users[0] == tt.users[1] {
				// Redis would refuse the second reservation of the same user;
				// hand the user's hold to the second order instead, which is
				// what an expired and re-bought reservation looks like.
				if err := e.stock.Load(ctx, sale.ID, []stock.ItemStock{{ItemID: item, Left: tt.quantity}},
					[]stock.Holder{{UserID: second.UserID, OrderID: second.OrderID.String()}}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := e.stock.Reserve(ctx, sale.ID, item, second.UserID, second.OrderID.String()); err != nil {
				t.Fatal(err)
			}
			leftBefore, err := e.stock.Left(ctx, sale.ID, item)
			if err != nil {
				t.Fatal(err)
			}

			e.publishEvents(first, second) // same key: same partition, this order
			r := e.start(e.store, 5*time.Second)
			e.waitCommitted(2)

			if st, _ := e.status(first.OrderID); st != store.StatusPending {
				t.Errorf("first order: got %q, want PENDING", st)
			}
			if st, reason := e.status(second.OrderID); st != store.StatusRejected || reason != tt.wantReason {
				t.Errorf("second order: got %q %q, want REJECTED %q", st, reason, tt.wantReason)
			}
			dead := e.readDLQ(1)
			if got := header(dead[0], consumer.HeaderOrderID); got != second.OrderID.String() {
				t.Errorf("dead letter order-id: got %q, want %q", got, second.OrderID)
			}
			if got := header(dead[0], consumer.HeaderReason); got != tt.wantReason {
				t.Errorf("dead letter reason: got %q, want %q", got, tt.wantReason)
			}
			// The consumer drains the batch's outbox rows itself; a relay of
			// another test sharing the database may have taken them first,
			// so wait for the row rather than assume who released it.
			var outcome string
			eventually(t, 10*time.Second, "outbox row released", func() (bool, string) {
				err := e.pool.QueryRow(ctx, "SELECT coalesce(outcome, '') FROM stock_release WHERE order_id = $1", second.OrderID).Scan(&outcome)
				return err == nil && outcome != "", fmt.Sprintf("%q %v", outcome, err)
			})
			if outcome != store.OutcomeReleased {
				t.Errorf("outbox outcome: got %q, want %q", outcome, store.OutcomeReleased)
			}
			left, err := e.stock.Left(ctx, sale.ID, item)
			if err != nil {
				t.Fatal(err)
			}
			// A unit PostgreSQL never had is not put back; a second order
			// of the same user gives its unit back.
			wantLeft := leftBefore + 1
			if tt.wantReason == store.ReasonSoldOutInDB {
				wantLeft = leftBefore
			}
			if left != wantLeft {
				t.Errorf("stock left: got %d, want %d", left, wantLeft)
			}
			holders, err := e.stock.Holders(ctx, sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{first.UserID: first.OrderID.String()}
			if tt.users[0] == tt.users[1] {
				want = map[string]string{} // the second order held the user's unit; it went back
			}
			if diff := cmp.Diff(want, holders); diff != "" {
				t.Errorf("holders (-want +got):\n%s", diff)
			}
			if got := r.metrics.Rejected(tt.wantReason); got != 1 {
				t.Errorf("rejected{%s}: got %v, want 1", tt.wantReason, got)
			}
		})
	}
}

// Payloads that are not an OrderPlaced, and events for an item of no sale,
// go to the dead-letter topic and the offsets move past them.
func TestInvalidPayloadDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sale := testdb.Sale(t, e.store, 5)
	good := orderEvent(sale, 0, "u1")
	unknown := orderEvent(sale, 0, "u2")
	unknown.ItemID = 1 << 60
	// A user id PostgreSQL cannot store (NUL byte) whose unit Redis reserved:
	// dead-lettered, and the unit goes back.
	ctx := testenv.Context(t)
	nul := orderEvent(sale, 0, "a\x00b")
	if err := e.stock.Load(ctx, sale.ID, []stock.ItemStock{{ItemID: nul.ItemID, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.stock.Reserve(ctx, sale.ID, nul.ItemID, nul.UserID, nul.OrderID.String()); err != nil {
		t.Fatal(err)
	}
	nulJSON, err := json.Marshal(nul) // Marshal, not ev.Marshal: that would validate
	if err != nil {
		t.Fatal(err)
	}
	// An event of a schema newer than the service knows (a gateway upgraded
	// first) may be an order answered 202: set aside, its unit kept.
	newer := orderEvent(sale, 0, "u3")
	if _, err := e.stock.Reserve(ctx, sale.ID, newer.ItemID, newer.UserID, newer.OrderID.String()); err != nil {
		t.Fatal(err)
	}
	newerJSON, err := json.Marshal(newer)
	if err != nil {
		t.Fatal(err)
	}
	newerJSON = bytes.Replace(newerJSON, []byte(`"v":1`), []byte(`"v":2`), 1)
	e.publish("garbage", []byte("not json"), []byte(`{"v":1,"orderId":"00000000-0000-0000-0000-000000000000"}`), nulJSON, newerJSON)
	e.publishEvents(good, unknown)
	r := e.start(e.store, 5*time.Second)
	e.waitCommitted(6)
	if left, err := e.stock.Left(ctx, sale.ID, nul.ItemID); err != nil || left != 4 {
		t.Errorf("stock after the unstorable and the newer event: got %d, %v; want 4 (the unstorable one's unit back, the newer one's kept)", left, err)
	}

	dead := e.readDLQ(5)
	reasons := map[string]int{}
	for _, m := range dead {
		reasons[header(m, consumer.HeaderReason)]++
	}
	want := map[string]int{consumer.ReasonInvalidPayload: 3, consumer.ReasonNewerVersion: 1, store.ReasonUnknownItem: 1}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("dead-letter reasons (-want +got):\n%s", diff)
	}
	for _, m := range dead {
		if header(m, consumer.HeaderReason) == consumer.ReasonInvalidPayload && (header(m, consumer.HeaderError) == "" || header(m, consumer.HeaderSourceTopic) != e.topic) {
			t.Errorf("invalid payload dead letter lacks error or source headers: %v", m.Headers)
		}
	}
	if st, _ := e.status(good.OrderID); st != store.StatusPending {
		t.Errorf("valid event beside the garbage: got %q, want PENDING", st)
	}
	if got := testutil.ToFloat64(r.metrics.DLQ); got != 5 {
		t.Errorf("dlq_messages_total: got %v, want 5", got)
	}
}

// An unpersistable event's unit (no row holds it, so nothing else would
// ever release it) is released before its offset is stored: retried while
// a repair has paused the item's stock, where it was tried once, logged,
// and forgotten, the shopper's holder and unit kept for good. The order
// never exists, so the admission its reservation spent comes back too.
func TestUnpersistableReleaseWaitsOutAPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testenv.Context(t)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	sale := testdb.Sale(t, e.store, 5)
	nul := orderEvent(sale, 0, "a\x00b")
	if err := e.stock.Load(ctx, sale.ID, []stock.ItemStock{{ItemID: nul.ItemID, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.stock.ReserveAdmitted(ctx, sale.ID, nul.ItemID, nul.UserID, nul.OrderID.String(), "tok-nul"); err != nil {
		t.Fatal(err)
	}
	// A repair of a sharded sale takes the stock away for a moment and
	// marks it paused.
	key := stock.StockKey(sale.ID, nul.ItemID)
	if err := rc.Do(ctx, rc.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Set().Key(stock.PauseMarker(key)).Value("1").Px(time.Minute).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	nulJSON, err := json.Marshal(nul)
	if err != nil {
		t.Fatal(err)
	}
	e.publish("garbage", nulJSON)
	r := e.start(e.store, 5*time.Second)
	eventually(t, 20*time.Second, "release retried", func() (bool, string) {
		n := testutil.ToFloat64(r.metrics.BatchRetries)
		return n >= 2, fmt.Sprintf("%v retries", n)
	})
	if got := e.committed(); got != 0 {
		t.Fatalf("%d offsets committed while the unit could not go back, want 0", got)
	}
	// The repair puts the stock back.
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("4").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Del().Key(stock.PauseMarker(key)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.waitCommitted(1)
	holders, err := e.stock.Holders(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left, err := e.stock.Left(ctx, sale.ID, nul.ItemID); err != nil || left != 5 || holders[nul.UserID] != "" {
		t.Errorf("after the pause: %d left (%v), holder %q; want 5 and no holder", left, err, holders[nul.UserID])
	}
	if spent, _, err := e.stock.AdmissionSpent(ctx, sale.ID, nul.UserID, "tok-nul"); err != nil || spent {
		t.Errorf("the unpersistable order's admission: spent %v (%v), want given back", spent, err)
	}
}

// A message near the topic's size limit is dead-lettered with its value cut
// to a bound: whole, with the dead letter's headers, it exceeded the
// producer's limit, and its batch was retried for ever.
func TestHugePayloadDeadLetteredCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	huge := bytes.Repeat([]byte{'x'}, 999_900) // under the producer's 1,000,000 alone
	e.publish("huge", huge)
	e.start(e.store, 5*time.Second)
	e.waitCommitted(1)
	dead := e.readDLQ(1)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	if got := header(dead[0], consumer.HeaderTruncatedFrom); got != "999900" || len(dead[0].Value) >= len(huge) {
		t.Errorf("dead letter of %d bytes, truncated-from %q; want it cut, from 999900", len(dead[0].Value), got)
	}
}

// A message whose bulk is its key is as large as one whose bulk is its
// value: its dead letter, carrying the key whole, was refused by the
// producer for ever, and the batch (every partition the member reads) was
// retried without end. The dead letter now drops a key and headers over
// 16 KiB together, and says so.
func TestHugeKeyDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish(strings.Repeat("k", 999_900), []byte("garbage")) // under the producer's 1,000,000 alone, not with the dead letter's headers
	e.start(e.store, 5*time.Second)
	e.waitCommitted(1)
	dead := e.readDLQ(1)
	if got := header(dead[0], consumer.HeaderDropped); !strings.HasPrefix(got, "key-and-headers: key 999900 bytes") || len(dead[0].Key) != 0 {
		t.Errorf("dead letter with a %d-byte key, dropped %q; want the key dropped and said so", len(dead[0].Key), got)
	}
	if string(dead[0].Value) != "garbage" || header(dead[0], consumer.HeaderReason) != consumer.ReasonInvalidPayload {
		t.Errorf("dead letter %q, reason %q; want the value whole, INVALID_PAYLOAD", dead[0].Value, header(dead[0], consumer.HeaderReason))
	}
}

// A dead-letter topic that takes smaller messages than the orders topic
// refuses a dead letter as too large: it is sent again bare (the dead
// letter's own headers, which say where the message is) instead of being
// retried for ever with the batch.
func TestDeadLetterTooLargeForItsTopicIsSentBare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.limitDLQ(4096)
	e.publish("1", bytes.Repeat([]byte{'x'}, 20_000))
	e.start(e.store, 5*time.Second)
	e.waitCommitted(1)
	dead := e.readDLQ(1)
	if got := header(dead[0], consumer.HeaderDropped); !strings.HasPrefix(got, "all: ") || len(dead[0].Value) != 0 {
		t.Errorf("dead letter of %d bytes, dropped %q; want it bare, saying so", len(dead[0].Value), got)
	}
	if header(dead[0], consumer.HeaderSourceTopic) != e.topic || header(dead[0], consumer.HeaderSourceOffset) == "" {
		t.Errorf("bare dead letter does not say where the message is: %v", dead[0].Headers)
	}
}

// A message's offset is stored only once its dead letter is in the
// dead-letter topic: one the topic refuses even bare is retried, and the
// message is not committed past.
func TestNoCommitBeforeTheDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.limitDLQ(100) // below a bare dead letter's headers
	e.publish("1", []byte("garbage"))
	r := e.start(e.store, 5*time.Second)
	eventually(t, 20*time.Second, "dead letter retried", func() (bool, string) {
		n := testutil.ToFloat64(r.metrics.BatchRetries)
		return n >= 3, fmt.Sprintf("%v retries", n)
	})
	if got := e.committed(); got != 0 {
		t.Fatalf("%d offsets committed while the dead letter was refused, want 0", got)
	}
}

// A dead-letter producer whose deliveries time out (fault 6b caught one
// that never delivered again after the broker's fencing) is replaced, and
// the batch, which waits for its dead letters, goes on with the new one.
// Here the first producer reaches a black hole.
func TestDeadLetterProducerReplacedWhenItTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c *consumer.Consumer
	e.startWith(e.store, 5*time.Second, nil, func(cc *consumer.Consumer) {
		c = cc
		if err := consumer.SetDeadLetterProducer(cc, testenv.BlackHole(t), time.Second); err != nil {
			t.Fatal(err)
		}
	})
	e.publish("garbage", []byte("not json"))
	e.waitCommitted(1)
	if n := consumer.DeadLetterProducersReplaced(c); n != 1 {
		t.Errorf("dead-letter producer replaced %d times, want 1", n)
	}
	if dead := e.readDLQ(1); header(dead[0], consumer.HeaderReason) != consumer.ReasonInvalidPayload {
		t.Errorf("dead letter %v, want the garbage's", dead[0].Headers)
	}
}

// limitDLQ sets the dead-letter topic's max.message.bytes.
func (e *env) limitDLQ(bytes int) {
	e.t.Helper()
	adm, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "log_level": 3})
	if err != nil {
		e.t.Fatal(err)
	}
	defer adm.Close()
	res, err := adm.IncrementalAlterConfigs(testenv.Context(e.t), []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: e.dlq,
		Config: []kafka.ConfigEntry{{Name: "max.message.bytes", Value: fmt.Sprint(bytes), IncrementalOperation: kafka.AlterConfigOpTypeSet}}}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		e.t.Fatalf("limit the dead-letter topic: %v %v", err, res)
	}
}

// Offsets are committed only after the batch is in PostgreSQL: a batch that
// cannot be persisted is retried, never committed, and is processed by the
// next member of the group; a member joining after the commit does not read
// the committed messages again.
func TestOffsetsFollowTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sale := testdb.Sale(t, e.store, 5)
	a, b := orderEvent(sale, 0, "u1"), orderEvent(sale, 0, "u2")
	e.publishEvents(a, b)

	// PostgreSQL "down": a pool that is already closed.
	down, err := pgxpool.New(testenv.Context(t), testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	r1 := e.start(store.New(down), 200*time.Millisecond)
	eventually(t, 20*time.Second, "persistence retried", func() (bool, string) {
		n := testutil.ToFloat64(r1.metrics.BatchRetries)
		return n >= 2, fmt.Sprintf("%v retries", n)
	})
	if err := r1.stop(); err == nil {
		t.Error("consumer stopped with the batch unpersisted but reported no error")
	}
	if got := e.committed(); got != 0 {
		t.Fatalf("committed offsets with the database down: got %d, want 0", got)
	}
	if st, _ := e.status(a.OrderID); st != "" {
		t.Fatalf("order written with the database down: %q", st)
	}
	if got := testutil.ToFloat64(r1.metrics.DLQ); got != 0 {
		t.Errorf("dead-lettered while the database was down: %v", got)
	}

	r2 := e.start(e.store, 5*time.Second)
	e.waitCommitted(2)
	if sa, _ := e.status(a.OrderID); sa != store.StatusPending {
		t.Errorf("order a after recovery: %q", sa)
	}
	if sb, _ := e.status(b.OrderID); sb != store.StatusPending {
		t.Errorf("order b after recovery: %q", sb)
	}
	if err := r2.stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}

	r3 := e.start(e.store, 5*time.Second)
	eventually(t, 20*time.Second, "third member assigned", func() (bool, string) {
		return r3.c.Assigned(), "no assignment"
	})
	time.Sleep(500 * time.Millisecond) // time to fetch anything uncommitted
	if got := batches(t, r3.metrics); got != 0 {
		t.Errorf("a member joining after the commit processed %v batches, want 0", got)
	}
}

// A batch whose COMMIT PostgreSQL refuses is retried, not lost: no offset
// is stored, nothing is dead-lettered and no reservation is given up while
// the refusal lasts, though every statement of the batch succeeded. Once
// commits go through, every event becomes one row, the refused order's
// holder goes (after the commit that wrote its outbox row) and the offsets
// move past them.
func TestBatchWhoseCommitFails(t *testing.T) {
	t.Parallel()
	e := ownEnv(t)
	ctx := testenv.Context(t)
	sale := testdb.Sale(t, e.store, 2)
	item := sale.Items[0].ID
	// Redis holds a unit more than PostgreSQL, as after a bad load, so the
	// third order is refused there (SOLD_OUT_IN_DB) and its holder dropped.
	if err := e.stock.Load(ctx, sale.ID, []stock.ItemStock{{ItemID: item, Left: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	evs := []event.OrderPlaced{orderEvent(sale, 0, "u1"), orderEvent(sale, 0, "u2"), orderEvent(sale, 0, "u3")}
	held := map[string]string{}
	for _, ev := range evs {
		if _, err := e.stock.Reserve(ctx, sale.ID, item, ev.UserID, ev.OrderID.String()); err != nil {
			t.Fatal(err)
		}
		held[ev.UserID] = ev.OrderID.String()
	}
	holders := func(want map[string]string, when string) {
		t.Helper()
		got, err := e.stock.Holders(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("holders %s (-want +got):\n%s", when, diff)
		}
	}

	lift := testdb.FailCommits(t, e.pool, "INSERT", "flash_sale_order")
	e.publishEvents(evs...)
	r := e.start(e.store, 5*time.Second)
	eventually(t, 20*time.Second, "the refused batch retried", func() (bool, string) {
		n := testutil.ToFloat64(r.metrics.BatchRetries)
		return n >= 2, fmt.Sprintf("%v retries", n)
	})
	for _, ev := range evs {
		if st, _ := e.status(ev.OrderID); st != "" {
			t.Errorf("order of %s written though its commit was refused: %s", ev.UserID, st)
		}
	}
	if got := e.committed(); got != 0 {
		t.Errorf("offsets committed with the batch's commit refused: %d, want 0", got)
	}
	if got := testutil.ToFloat64(r.metrics.DLQ); got != 0 {
		t.Errorf("dead-lettered before the commit: %v", got)
	}
	holders(held, "while commits are refused")
	lift()

	e.waitCommitted(int64(len(evs)))
	want := []string{store.StatusPending, store.StatusPending, store.StatusRejected}
	for i, ev := range evs {
		if st, reason := e.status(ev.OrderID); st != want[i] {
			t.Errorf("order of %s: %s %s, want %s", ev.UserID, st, reason, want[i])
		}
	}
	delete(held, "u3")
	eventually(t, 10*time.Second, "the refused order's holder dropped", func() (bool, string) {
		got, err := e.stock.Holders(ctx, sale.ID)
		return err == nil && len(got) == len(held), fmt.Sprintf("%v %v", got, err)
	})
	holders(held, "after the commit")
	if got := e.sold(sale.ID); got != 2 {
		t.Errorf("sold: %d, want 2", got)
	}
	if dead := e.readDLQ(1); header(dead[0], consumer.HeaderOrderID) != evs[2].OrderID.String() {
		t.Errorf("dead letter of order %s, want %s", header(dead[0], consumer.HeaderOrderID), evs[2].OrderID)
	}
}

// Members joining and leaving the group move partitions around; every
// event still becomes exactly one row and every offset gets committed.
func TestRebalanceKeepsExactlyOneRowPerEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testenv.Context(t)
	sale := testdb.Sale(t, e.store, 100, 100, 100)
	var evs []event.OrderPlaced
	mk := func(n int) []event.OrderPlaced {
		out := make([]event.OrderPlaced, n)
		for i := range out {
			out[i] = orderEvent(sale, len(evs)%3, fmt.Sprintf("u%d", len(evs)))
			evs = append(evs, out[i])
		}
		return out
	}
	r1 := e.start(e.store, 5*time.Second)
	e.publishEvents(mk(20)...)
	r2 := e.start(e.store, 5*time.Second) // joins: partitions move
	e.publishEvents(mk(20)...)
	e.waitCommitted(40)
	if err := r1.stop(); err != nil { // leaves: partitions move back
		t.Fatal(err)
	}
	e.publishEvents(mk(20)...)
	e.waitCommitted(60)
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
	var rows, pending int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDING') FROM flash_sale_order WHERE sale_id = $1`, sale.ID).Scan(&rows, &pending); err != nil {
		t.Fatal(err)
	}
	if rows != len(evs) || pending != len(evs) {
		t.Errorf("rows %d (PENDING %d), want %d of each", rows, pending, len(evs))
	}
	if got := e.sold(sale.ID); got != int64(len(evs)) {
		t.Errorf("sold: got %d, want %d", got, len(evs))
	}
}

// One item's orders spread over every partition (the gateway's default)
// and two members persisting them at once, from the start: each of an
// item's events is one row, a copy of an event on another partition (a
// gateway's retried publish) read by the other member is not a second, and
// the item's sold count is exactly its PENDING rows, never past its
// quantity. (TestRebalanceKeepsExactlyOneRowPerEvent keys events by item,
// so there one item never reached two members at once.)
func TestTwoMembersShareOneItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testenv.Context(t)
	const quantity, orders, copies = 150, 200, 30
	sale := testdb.Sale(t, e.store, quantity)
	r1 := e.start(e.store, 5*time.Second)
	r2 := e.start(e.store, 5*time.Second)
	// The second member's first assignment ends the rebalance that split
	// the partitions between the two (librdkafka's eager assignors give
	// each of two members some of three).
	eventually(t, 20*time.Second, "both members assigned", func() (bool, string) {
		return r1.c.Assigned() && r2.c.Assigned(), fmt.Sprintf("assigned: %v and %v", r1.c.Assigned(), r2.c.Assigned())
	})
	var values [][]byte
	for i := range orders {
		b, err := orderEvent(sale, 0, fmt.Sprintf("u%d", i)).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
	}
	for i := range copies {
		values = append(values, values[i*orders/copies])
	}
	e.publishSpread(values...)
	e.waitCommitted(orders + copies)
	for _, r := range []*running{r1, r2} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	var rows, pending, distinct int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDING'), count(DISTINCT user_id) FROM flash_sale_order WHERE sale_id = $1`,
		sale.ID).Scan(&rows, &pending, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != orders || distinct != orders || pending != quantity {
		t.Errorf("%d rows of %d shoppers, %d PENDING; want %d rows of as many shoppers, %d PENDING", rows, distinct, pending, orders, quantity)
	}
	if got := e.sold(sale.ID); got != quantity {
		t.Errorf("sold %d, want %d (the PENDING rows)", got, quantity)
	}
}

// batches is how many batches m's histogram timed.
func batches(t *testing.T, m *metrics.Counters) float64 {
	t.Helper()
	fams, err := scrape.Gather(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := fams.Value("flashsale_ordersvc_batch_duration_seconds")
	return n
}
