package purchase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/gateway/internal/publish"
	"flashsale/pkg/accepted"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

var (
	errTimedOut = fmt.Errorf("%w: Local: Message timed out", publish.ErrUnconfirmed)
	errRefused  = fmt.Errorf("%w: enqueue: Local: Queue full", publish.ErrNotPublished)
	errNoDB     = errors.New("settle order: dial tcp 127.0.0.1:1: connect: connection refused")
)

// The decision after a publish, on its own: which publish errors need the
// order settled, and what each settlement means.
func TestDecide(t *testing.T) {
	tests := []struct {
		name       string
		pubErr     error
		settled    Settlement
		settleErr  error
		want       verdict
		wantSettle bool // settle must be asked
		wantErr    error
	}{
		// The broker acknowledged: nothing to settle.
		{name: "acknowledged", want: accept},
		// The producer never took the event: no copy can exist, give the unit back.
		{name: "refused by the producer", pubErr: errRefused, want: giveBack, wantErr: publish.ErrNotPublished},
		// Timed out in flight, and the gateway's REJECTED row took the id first.
		{name: "unconfirmed, tombstone written", pubErr: errTimedOut, settled: Abandoned, want: giveBack, wantSettle: true, wantErr: publish.ErrUnconfirmed},
		// Timed out, but the consumer had stored the order: it is real.
		{name: "unconfirmed, order already stored", pubErr: errTimedOut, settled: Placed, want: accept, wantSettle: true},
		// Timed out and PostgreSQL does not answer: keep the unit, fate unknown.
		{name: "unconfirmed, PostgreSQL unreachable", pubErr: errTimedOut, settleErr: errNoDB, want: hold, wantSettle: true, wantErr: ErrUnresolved},
		// An error of no known kind is treated as maybe written.
		{name: "unknown publish error, tombstone written", pubErr: errors.New("boom"), settled: Abandoned, want: giveBack, wantSettle: true},
		{name: "unknown publish error, order already stored", pubErr: errors.New("boom"), settled: Placed, want: accept, wantSettle: true},
		// An error that says both is maybe written: the unit is given back
		// only after the settlement.
		{name: "not published and unconfirmed at once", pubErr: fmt.Errorf("%w, %w", publish.ErrNotPublished, publish.ErrUnconfirmed), settled: Placed, want: accept, wantSettle: true},
		// A settler answering nothing meaningful is not taken as either fate.
		{name: "unconfirmed, no settlement", pubErr: errTimedOut, want: hold, wantSettle: true, wantErr: ErrUnresolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := 0
			got, err := decide(tt.pubErr, func() (Settlement, error) {
				asked++
				return tt.settled, tt.settleErr
			})
			if got != tt.want {
				t.Errorf("verdict = %d, want %d", got, tt.want)
			}
			if want := map[bool]int{true: 1}[tt.wantSettle]; asked != want {
				t.Errorf("settle asked %d times, want %d", asked, want)
			}
			switch {
			case tt.want == accept && err != nil:
				t.Errorf("accepted with error %v", err)
			case tt.want != accept && err == nil:
				t.Errorf("refused without an error")
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want one matching %v", err, tt.wantErr)
			}
			if tt.want != hold && errors.Is(err, ErrUnresolved) {
				t.Errorf("error %v says unresolved for verdict %d", err, tt.want)
			}
		})
	}
}

// fakePublisher answers every Publish with err; the broker's own behaviour is
// tested in publish and in faults/.
type fakePublisher struct{ err error }

func (p fakePublisher) Publish(int64, []byte) error { return p.err }

// fakeSettler records what it was asked and answers as told.
type fakeSettler struct {
	settled Settlement
	err     error
	asked   []event.OrderPlaced
}

func (s *fakeSettler) Settle(_ context.Context, o event.OrderPlaced) (Settlement, error) {
	s.asked = append(s.asked, o)
	return s.settled, s.err
}

var saleSeq atomic.Int64

// The whole purchase against the real Redis: what each verdict does to the
// reservation, the accepted record and the answer.
func TestBuyAfterPublish(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	st := stock.New(rc)
	const item, units = 1, 5

	tests := []struct {
		name      string
		pubErr    error
		settler   fakeSettler
		want202   bool
		wantHeld  bool // the unit stays reserved for the returned order id
		wantAsked bool
		wantErr   error
	}{
		{name: "acknowledged", want202: true, wantHeld: true},
		{name: "refused by the producer: released", pubErr: errRefused, wantErr: ErrUnavailable},
		{name: "unconfirmed, tombstone written: released", pubErr: errTimedOut, settler: fakeSettler{settled: Abandoned},
			wantAsked: true, wantErr: ErrUnavailable},
		{name: "unconfirmed, order already stored: accepted", pubErr: errTimedOut, settler: fakeSettler{settled: Placed},
			want202: true, wantHeld: true, wantAsked: true},
		{name: "unconfirmed, PostgreSQL unreachable: kept, id returned", pubErr: errTimedOut, settler: fakeSettler{err: errNoDB},
			wantHeld: true, wantAsked: true, wantErr: ErrUnresolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sale := 8_000_000_000 + time.Now().UnixNano()%1_000_000_000*10 + saleSeq.Add(1)
			t.Cleanup(func() {
				rc.Do(context.Background(), rc.B().Del().Key(stock.StockKey(sale, item), stock.HoldersKey(sale)).Build())
			})
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: units}}, nil); err != nil {
				t.Fatal(err)
			}
			settler := tt.settler
			b := NewBuyer(rc, st, fakePublisher{tt.pubErr}, &settler, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))

			r, err := b.Buy(ctx, sale, item, "alice", "")
			id := r.OrderID
			if tt.want202 != (err == nil) {
				t.Fatalf("Buy error %v, want accepted %v", err, tt.want202)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Buy error %v, want one matching %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrUnavailable) {
				t.Errorf("Buy error %v does not match ErrUnavailable (the 503 answer)", err)
			}
			if tt.wantHeld != (id != uuid.Nil) {
				t.Errorf("Buy returned order id %v, want one: %v", id, tt.wantHeld)
			}

			holders, err := st.Holders(ctx, sale)
			if err != nil {
				t.Fatal(err)
			}
			left, err := st.Left(ctx, sale, item)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantHeld {
				if holders["alice"] != id.String() || left != units-1 {
					t.Errorf("holders %v, %d left; want alice holding %s, %d left", holders, left, id, units-1)
				}
			} else if len(holders) != 0 || left != units {
				t.Errorf("holders %v, %d left; want none and %d left (unit given back)", holders, left, units)
			}

			_, recorded, err := accepted.Owner(ctx, rc, id.String())
			if err != nil {
				t.Fatal(err)
			}
			if recorded != tt.want202 {
				t.Errorf("accepted record written %v, want %v (only for a 202)", recorded, tt.want202)
			}

			if asked := len(settler.asked) > 0; asked != tt.wantAsked {
				t.Fatalf("settler asked %d times, want asked %v", len(settler.asked), tt.wantAsked)
			}
			if tt.wantAsked {
				o := settler.asked[0]
				if len(settler.asked) != 1 || o.SaleID != sale || o.ItemID != item || o.UserID != "alice" || o.OrderID == uuid.Nil {
					t.Errorf("settler asked %+v, want once for alice's order in sale %d item %d", settler.asked, sale, item)
				}
				if id != uuid.Nil && o.OrderID != id {
					t.Errorf("settled order %s, returned %s", o.OrderID, id)
				}
			}
		})
	}
}

// A purchase whose publish was refused while its stock key was missing (a
// repair pausing a sharded sale takes the keys away for a moment) is not
// forgotten: the release is retried, and lands once the key is back.
func TestReleaseRetriedWhileStockNotLoaded(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := redisSale(t)
	const item = 1
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	b := NewBuyer(rc, st, fakePublisher{}, &fakeSettler{}, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunRetries(rctx)

	if _, err := st.Reserve(ctx, sale, item, "alice", "o-1"); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(sale, item)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	b.release(ctx, sale, item, "alice", "o-1", "") // answered "not loaded": queued
	time.Sleep(300 * time.Millisecond)
	if err := rc.Do(ctx, rc.B().Set().Key(stock.StockKey(sale, item)).Value("4").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := st.Left(ctx, sale, item)
		if err == nil && left == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left = %d (%v) 10 s after the key came back, want the unit returned (5)", left, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h, _ := st.Holders(ctx, sale); len(h) != 0 {
		t.Fatalf("holders %v, want alice released", h)
	}
}

// flakySettler fails its first fails calls (PostgreSQL down), then answers
// then.
type flakySettler struct {
	mu    sync.Mutex
	fails int
	then  Settlement
	calls int
}

func (s *flakySettler) called() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *flakySettler) Settle(context.Context, event.OrderPlaced) (Settlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fails > 0 {
		s.fails--
		return 0, errNoDB
	}
	return s.then, nil
}

// An order held because neither the broker nor PostgreSQL could settle it
// is settled again in the background: once PostgreSQL answers "abandoned",
// its unit goes back on sale without an operator.
func TestHeldOrderSettledLater(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := redisSale(t)
	const item = 1
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	settler := &flakySettler{fails: 4, then: Abandoned} // Buy's own try, then three retries fail
	b := NewBuyer(rc, st, fakePublisher{errTimedOut}, settler, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := b.Buy(ctx, sale, item, "alice", ""); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("Buy: %v, want ErrUnresolved", err)
	}
	if left, _ := st.Left(ctx, sale, item); left != 2 {
		t.Fatalf("left = %d right after the unresolved purchase, want 2 (the unit held)", left)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunRetries(rctx)
	go b.RunSettles(rctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := st.Left(ctx, sale, item)
		if err == nil && left == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left = %d (%v) 10 s later, want the held unit given back (3)", left, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A held order bought with an admission token and later settled as placed
// spends the token, as an acknowledged purchase does: otherwise the token
// could buy again once that order ended.
func TestHeldOrderSettledAsPlacedSpendsItsToken(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	settler := &flakySettler{fails: 2, then: Placed} // Buy's own try and one retry fail
	b := NewBuyer(rc, st, fakePublisher{errTimedOut}, settler, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := b.Buy(ctx, sale, item, "alice", "ticket-1"); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("Buy: %v, want ErrUnresolved", err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunSettles(rctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		spent, err := rc.Do(ctx, rc.B().Sismember().Key(stock.SpentTokensKey(sale)).Member("ticket-1").Build()).AsBool()
		if err == nil && spent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token not spent (%v) 10 s after its held order could be settled as placed", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A held order settled as placed keeps everything an accepted purchase
// has: the unit, the holder, the token spent, and now the accepted record.
// (TestHeldOrderSettledAsPlacedSpendsItsToken passes before RunSettles
// runs at all: the reserve script spent the token.)
func TestHeldOrderSettledAsPlacedKeepsItsUnit(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	settler := &flakySettler{fails: 2, then: Placed} // Buy's own try and one retry fail
	b := NewBuyer(rc, st, fakePublisher{errTimedOut}, settler, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r, err := b.Buy(ctx, sale, item, "alice", "ticket-1")
	if !errors.Is(err, ErrUnresolved) {
		t.Fatalf("Buy: %v, want ErrUnresolved", err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunRetries(rctx)
	go b.RunSettles(rctx)
	deadline := time.Now().Add(10 * time.Second)
	for settler.called() < 3 { // Buy's, the failed retry, the one that says placed
		if time.Now().After(deadline) {
			t.Fatalf("settled %d times in 10 s, want 3", settler.called())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var owner string
	for owner == "" && time.Now().Before(deadline) { // the record follows the settlement
		owner, _, _ = accepted.Owner(ctx, rc, r.OrderID.String())
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a release, had one been queued, would have run
	holders, err := st.Holders(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := st.Left(ctx, sale, item)
	spent, _ := rc.Do(ctx, rc.B().Sismember().Key(stock.SpentTokensKey(sale)).Member("ticket-1").Build()).AsBool()
	if holders["alice"] != r.OrderID.String() || left != 2 || !spent || owner != "alice" {
		t.Errorf("after settling as placed: holder %q, %d left, token spent %v, accepted record's owner %q; want %s, 2, true, alice",
			holders["alice"], left, spent, owner, r.OrderID)
	}
}

// Idle, what a shutdown waits for before it stops RunSettles and
// RunRetries, is false while a held order waits for its settlement, and
// true once its unit is back.
func TestIdleWaitsForHeldOrders(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	settler := &flakySettler{fails: 3, then: Abandoned}
	b := NewBuyer(rc, st, fakePublisher{errTimedOut}, settler, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if !b.Idle() {
		t.Fatal("a new buyer is not idle")
	}
	if _, err := b.Buy(ctx, sale, item, "alice", "ticket-1"); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("Buy: %v, want ErrUnresolved", err)
	}
	if b.Idle() {
		t.Fatal("idle with a held order queued")
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunRetries(rctx)
	go b.RunSettles(rctx)
	deadline := time.Now().Add(10 * time.Second)
	for !b.Idle() {
		if left, _ := st.Left(ctx, sale, item); left == 3 {
			break // back, and idle at the next look
		}
		if time.Now().After(deadline) {
			t.Fatal("not idle 10 s after a held order could be settled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for !b.Idle() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if left, _ := st.Left(ctx, sale, item); !b.Idle() || left != 3 {
		t.Errorf("idle %v with %d left, want idle once the unit is back (3)", b.Idle(), left)
	}
}

// relayFirstSettler plays the order service writing a held order off
// (abandoned) and its relay releasing the unit, without the token, before
// the gateway's own release.
type relayFirstSettler struct{ st *stock.Store }

func (s relayFirstSettler) Settle(ctx context.Context, o event.OrderPlaced) (Settlement, error) {
	if _, err := s.st.Release(ctx, o.SaleID, o.ItemID, o.UserID, o.OrderID.String()); err != nil {
		return 0, err
	}
	return Abandoned, nil
}

// A failed purchase's admission token goes back even when the order
// service's relay released the unit first (it knows no token): the
// release script gives a token back only with a unit it still holds, and
// the shopper was left with ADMISSION_USED and no order.
func TestTokenBackWhenTheRelayReleasedFirst(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	failing := NewBuyer(rc, st, fakePublisher{errTimedOut}, relayFirstSettler{st}, nil, time.Second, quiet)
	if _, err := failing.Buy(ctx, sale, item, "alice", "ticket-1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Buy whose order was written off: %v, want ErrUnavailable", err)
	}
	working := NewBuyer(rc, st, fakePublisher{}, &fakeSettler{}, nil, time.Second, quiet)
	if _, err := working.Buy(ctx, sale, item, "alice", "ticket-1"); err != nil {
		t.Fatalf("retry with the same token: %v, want it accepted", err)
	}
	if left, _ := st.Left(ctx, sale, item); left != 2 {
		t.Errorf("left %d, want 2 (one unit back from the failed purchase, one sold)", left)
	}
}

// redisSale connects to the local Redis and gives a sale id no other test
// uses, its item 1's keys deleted at the end.
// admittedSale is redisSale with item 1 loaded with left units; the
// admission tokens its purchases spend are deleted when the test ends.
func admittedSale(t *testing.T, left int64) (rueidis.Client, *stock.Store, int64) {
	t.Helper()
	rc, st, sale := redisSale(t)
	t.Cleanup(func() { rc.Do(context.Background(), rc.B().Del().Key(stock.SpentTokensKey(sale)).Build()) })
	if err := st.Load(testenv.Context(t), sale, []stock.ItemStock{{ItemID: 1, Left: left}}, nil); err != nil {
		t.Fatal(err)
	}
	return rc, st, sale
}

func redisSale(t *testing.T) (rueidis.Client, *stock.Store, int64) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	sale := 8_000_000_000 + time.Now().UnixNano()%1_000_000_000*10 + saleSeq.Add(1)
	t.Cleanup(func() {
		rc.Do(context.Background(), rc.B().Del().Key(stock.StockKey(sale, 1), stock.HoldersKey(sale)).Build())
	})
	return rc, stock.New(rc), sale
}

// A reservation that fails for a reason other than the shopper's (here
// Redis refusing the script: the stock key holds a hash) answers 503, and
// its cause reaches the log, once for a run of such failures rather than
// once per purchase; the counter has every one.
func TestReserveFailureLoggedOnce(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := redisSale(t)
	const item = 1
	if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	key := stock.StockKey(sale, item)
	if err := rc.Do(ctx, rc.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, rc.B().Hset().Key(key).FieldValue().FieldValue("left", "5").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	b := NewBuyer(rc, st, fakePublisher{}, &fakeSettler{}, nil, time.Second, slog.New(slog.NewTextHandler(&logged, nil)))
	for i := range 5 {
		if _, err := b.Buy(ctx, sale, item, fmt.Sprintf("shopper-%d", i), ""); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("purchase %d: %v, want ErrUnavailable (503)", i, err)
		}
	}
	if n := strings.Count(logged.String(), "reservation failed"); n != 1 || !strings.Contains(logged.String(), "WRONGTYPE") {
		t.Fatalf("want the cause (WRONGTYPE) logged once for 5 failures, got %d lines:\n%s", n, logged.String())
	}
	if n := b.reserveFailures.Load(); n != 5 {
		t.Fatalf("flashsale_gateway_reserve_failures_total counted %d, want 5", n)
	}
}

// A purchase the producer refused gives back its unit and the admission
// token its reservation spent: the shopper's retry with the same token buys.
func TestRefusedPurchaseGivesItsTokenBack(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	refusing := NewBuyer(rc, st, fakePublisher{errRefused}, &fakeSettler{}, nil, time.Second, quiet)
	if _, err := refusing.Buy(ctx, sale, item, "alice", "ticket-1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Buy with the producer refusing: %v, want ErrUnavailable", err)
	}
	working := NewBuyer(rc, st, fakePublisher{}, &fakeSettler{}, nil, time.Second, quiet)
	if _, err := working.Buy(ctx, sale, item, "alice", "ticket-1"); err != nil {
		t.Fatalf("retry with the same token: %v, want it accepted", err)
	}
	if _, err := working.Buy(ctx, sale, item, "bob", "ticket-1"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Errorf("the token of an accepted purchase: %v, want ErrTokenSpent", err)
	}
}

// recordingPublisher acknowledges every event and keeps its payload.
type recordingPublisher struct{ payloads *[][]byte }

func (p recordingPublisher) Publish(_ int64, payload []byte) error {
	*p.payloads = append(*p.payloads, append([]byte(nil), payload...))
	return nil
}

// The event of a queued sale's purchase names the admission its
// reservation spent, which the order service keeps with the order: a hot
// copy rebuilt from PostgreSQL after a Redis loss knows it spent. An
// unqueued sale's names none.
func TestEventNamesTheAdmissionSpent(t *testing.T) {
	ctx := testenv.Context(t)
	rc, st, sale := admittedSale(t, 3)
	const item = 1
	var payloads [][]byte
	b := NewBuyer(rc, st, recordingPublisher{&payloads}, &fakeSettler{}, nil, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for user, token := range map[string]string{"alice": "ticket-7", "bob": ""} {
		payloads = nil
		if _, err := b.Buy(ctx, sale, item, user, token); err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if len(payloads) != 1 {
			t.Fatalf("%s: %d events published, want 1", user, len(payloads))
		}
		e, err := event.Unmarshal(payloads[0])
		if err != nil {
			t.Fatal(err)
		}
		if e.UserID != user || e.AdmissionID != token {
			t.Errorf("event %s: user %q, admission %q; want %q, %q", payloads[0], e.UserID, e.AdmissionID, user, token)
		}
	}
}

// pausingPublisher acknowledges every event after moving the buyer's clock
// on by pause: a gateway frozen between its reservation and the ack.
type pausingPublisher struct {
	clock *time.Time
	pause time.Duration
}

func (p pausingPublisher) Publish(int64, []byte) error {
	*p.clock = p.clock.Add(p.pause)
	return nil
}

// An acknowledgement that comes more than half the order service's
// in-flight window after the purchase began is settled, not trusted: the
// reservation may have been written off as abandoned meanwhile (its unit
// sold again), and the 202 would name an order that never exists. One in
// time is trusted without asking PostgreSQL.
func TestLateAcknowledgementIsSettled(t *testing.T) {
	ctx := testenv.Context(t)
	const item, units = 1, 5 // redisSale's item
	for _, tt := range []struct {
		name      string
		pause     time.Duration
		settled   Settlement
		want202   bool
		wantAsked bool
	}{
		{name: "acknowledged in time: trusted", pause: time.Second, want202: true},
		{name: "acknowledged late, the reservation written off: 503, unit back", pause: time.Minute, settled: Abandoned, wantAsked: true},
		{name: "acknowledged late, the order stored: 202", pause: time.Minute, settled: Placed, want202: true, wantAsked: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc, st, sale := redisSale(t)
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: item, Left: units}}, nil); err != nil {
				t.Fatal(err)
			}
			clock := time.Now()
			settler := &fakeSettler{settled: tt.settled}
			b := NewBuyer(rc, st, pausingPublisher{clock: &clock, pause: tt.pause}, settler, nil, time.Second, slog.New(slog.DiscardHandler))
			b.SetInFlightWindow(30 * time.Second)
			b.now = func() time.Time { return clock }

			_, err := b.Buy(ctx, sale, item, "alice", "")
			if tt.want202 != (err == nil) {
				t.Fatalf("Buy error %v, want accepted %v", err, tt.want202)
			}
			if asked := len(settler.asked) > 0; asked != tt.wantAsked {
				t.Errorf("settler asked %d times, want asked %v", len(settler.asked), tt.wantAsked)
			}
			left, err := st.Left(ctx, sale, item)
			if err != nil {
				t.Fatal(err)
			}
			if want := units - map[bool]int64{true: 1}[tt.want202]; left != want {
				t.Errorf("%d left, want %d", left, want)
			}
		})
	}
}
