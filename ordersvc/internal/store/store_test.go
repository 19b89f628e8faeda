package store_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

func TestMigrateTwice(t *testing.T) {
	pool := testdb.Pool(t) // migrates once
	ctx := testenv.Context(t)
	for i := range 2 {
		from, to, err := store.Migrate(ctx, pool)
		if err != nil {
			t.Fatalf("migration run %d: %v", i+2, err)
		}
		if from != to || to < 1 {
			t.Errorf("run %d: version %d -> %d, want unchanged and >= 1", i+2, from, to)
		}
	}
}

// ev names an event symbolically: order and user names, item index in the sale.
type ev struct {
	order string
	item  int // index into the sale's items; -1 an unknown item id; -2 an item of another sale
	user  string
}

// orderEvents turns evs into events of sale, placed at placed: each order
// key gets an id the first time it is seen (in ids), and item -2 names
// other's first item.
func orderEvents(sale, other store.Sale, ids map[string]uuid.UUID, placed time.Time, evs []ev) []event.OrderPlaced {
	out := make([]event.OrderPlaced, 0, len(evs))
	for _, e := range evs {
		if _, ok := ids[e.order]; !ok {
			ids[e.order] = uuid.New()
		}
		item := int64(1 << 60)
		switch e.item {
		case -1:
		case -2:
			item = other.Items[0].ID
		default:
			item = sale.Items[e.item].ID
		}
		out = append(out, event.OrderPlaced{Version: 1, OrderID: ids[e.order], SaleID: sale.ID, ItemID: item, UserID: e.user, PlacedAt: placed})
	}
	return out
}

func TestPersistBatch(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	st := store.New(pool)
	accepted := store.Outcome{Kind: store.Accepted}
	dup := store.Outcome{Kind: store.Duplicate}
	soldOut := store.Outcome{Kind: store.Rejected, Reason: store.ReasonSoldOutInDB}
	already := store.Outcome{Kind: store.Rejected, Reason: store.ReasonAlreadyActive}
	unknown := store.Outcome{Kind: store.Unpersistable, Reason: store.ReasonUnknownItem}

	tests := []struct {
		name       string
		quantities []int64
		before     [][]ev // batches persisted first
		batch      []ev
		want       []store.Outcome
		wantSold   []int64
		wantOutbox int // stock_release rows of the sale
	}{
		{
			name: "all fit", quantities: []int64{3},
			batch:    []ev{{"a", 0, "u1"}, {"b", 0, "u2"}},
			want:     []store.Outcome{accepted, accepted},
			wantSold: []int64{2},
		},
		{
			name: "same message twice in one batch writes one row", quantities: []int64{3},
			batch:    []ev{{"a", 0, "u1"}, {"a", 0, "u1"}},
			want:     []store.Outcome{accepted, dup},
			wantSold: []int64{1},
		},
		{
			name: "redelivery in a later batch is a duplicate", quantities: []int64{3},
			before:   [][]ev{{{"a", 0, "u1"}}},
			batch:    []ev{{"a", 0, "u1"}},
			want:     []store.Outcome{{Kind: store.Duplicate, Status: store.StatusPending}},
			wantSold: []int64{1},
		},
		{
			name: "beyond the stock in PostgreSQL", quantities: []int64{1},
			batch:    []ev{{"a", 0, "u1"}, {"b", 0, "u2"}},
			want:     []store.Outcome{accepted, soldOut},
			wantSold: []int64{1}, wantOutbox: 1,
		},
		{
			name: "same user twice in one batch", quantities: []int64{5},
			batch:    []ev{{"a", 0, "u1"}, {"b", 0, "u1"}},
			want:     []store.Outcome{accepted, already},
			wantSold: []int64{1}, wantOutbox: 1,
		},
		{
			name: "user active from an earlier batch", quantities: []int64{5},
			before:   [][]ev{{{"a", 0, "u1"}}},
			batch:    []ev{{"b", 0, "u1"}},
			want:     []store.Outcome{already},
			wantSold: []int64{1}, wantOutbox: 1,
		},
		{
			name: "a rejected order does not make the user active", quantities: []int64{0, 5},
			batch:    []ev{{"a", 0, "u1"}, {"b", 1, "u1"}},
			want:     []store.Outcome{soldOut, accepted},
			wantSold: []int64{0, 1}, wantOutbox: 1,
		},
		{
			name: "stock counted per item, sold bumped once per item", quantities: []int64{2, 2},
			batch:    []ev{{"a", 0, "u1"}, {"b", 1, "u2"}, {"c", 0, "u3"}, {"d", 0, "u4"}},
			want:     []store.Outcome{accepted, accepted, accepted, soldOut},
			wantSold: []int64{2, 1}, wantOutbox: 1,
		},
		{
			name: "unknown item and item of another sale", quantities: []int64{5},
			batch:    []ev{{"a", -1, "u1"}, {"b", -2, "u2"}, {"c", 0, "u3"}},
			want:     []store.Outcome{unknown, unknown, accepted},
			wantSold: []int64{1},
		},
		{
			name: "redelivered rejection reports the stored reason", quantities: []int64{1},
			before:   [][]ev{{{"a", 0, "u1"}, {"b", 0, "u2"}}},
			batch:    []ev{{"b", 0, "u2"}},
			want:     []store.Outcome{{Kind: store.Duplicate, Status: store.StatusRejected, Reason: store.ReasonSoldOutInDB}},
			wantSold: []int64{1}, wantOutbox: 1,
		},
		{
			name: "empty stock", quantities: []int64{0},
			batch:    []ev{{"a", 0, "u1"}},
			want:     []store.Outcome{soldOut},
			wantSold: []int64{0}, wantOutbox: 1,
		},
	}
	other := testdb.Sale(t, st, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			sale := testdb.Sale(t, st, tt.quantities...)
			ids := map[string]uuid.UUID{}
			placed := time.Now().UTC().Truncate(time.Microsecond)
			mk := func(evs []ev) []event.OrderPlaced { return orderEvents(sale, other, ids, placed, evs) }
			for _, b := range tt.before {
				if _, err := st.PersistBatch(ctx, mk(b)); err != nil {
					t.Fatalf("persist earlier batch: %v", err)
				}
			}
			events := mk(tt.batch)
			got, err := st.PersistBatch(ctx, events)
			if err != nil {
				t.Fatalf("PersistBatch: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			after, err := st.GetSale(ctx, sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			var sold []int64
			for _, it := range after.Items {
				sold = append(sold, it.Sold)
			}
			if diff := cmp.Diff(tt.wantSold, sold); diff != "" {
				t.Errorf("sold per item (-want +got):\n%s", diff)
			}
			var outbox int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM stock_release WHERE sale_id = $1", sale.ID).Scan(&outbox); err != nil {
				t.Fatal(err)
			}
			if outbox != tt.wantOutbox {
				t.Errorf("stock_release rows: got %d, want %d", outbox, tt.wantOutbox)
			}
			// Every Accepted or Rejected event is a row with that status.
			for i, o := range got {
				if o.Kind != store.Accepted && o.Kind != store.Rejected {
					continue
				}
				row, err := st.GetOrder(ctx, events[i].OrderID)
				if err != nil {
					t.Fatalf("event %d (%v): %v", i, o.Kind, err)
				}
				wantStatus, wantExpires := store.StatusPending, placed.Add(after.PaymentTTL)
				if o.Kind == store.Rejected {
					wantStatus, wantExpires = store.StatusRejected, placed
					if row.ClosedAt == nil || row.RejectReason != o.Reason {
						t.Errorf("rejected row %d: closedAt %v reason %q, want set and %q", i, row.ClosedAt, row.RejectReason, o.Reason)
					}
				}
				if row.Status != wantStatus || !row.ExpiresAt.Equal(wantExpires) || !row.CreatedAt.Equal(placed) {
					t.Errorf("row %d: status %s expires %v created %v, want %s %v %v", i, row.Status, row.ExpiresAt, row.CreatedAt, wantStatus, wantExpires, placed)
				}
			}
		})
	}
}

// Consumers racing on the same sale never oversell and never give a user
// two active orders. Batches sharing an item queue on its lock, so the one
// race left is between batches of different items for the same user. A
// fresh write that meets her active order is written again checked; the
// race is then between two checked writes, or a checked write and a fresh
// one that commits after its lookup: both find her inactive, both insert,
// and the partial unique index flash_sale_order_one_active refuses the
// later checked insert, which PersistBatch reports as ErrActiveConflict;
// its caller retries the whole batch, which then finds her active and
// rejects that event as ALREADY_ACTIVE. Here
// worker w writes only item w%2 (two workers per item) for the same users
// u0..u49, so the two items' workers race on every user. Whether a round
// hits the race is timing, so the scenario runs on a fresh sale until one
// does, and fails if none did in 20 rounds: without the race it would pass
// on the item locks alone and prove nothing about the index or the retry.
// Every round checks the end state (persistRace).
func TestPersistBatchConcurrent(t *testing.T) {
	t.Parallel()
	raceUntil(t, 30, "no ErrActiveConflict: the one-active race", func(_ *store.Store, losers []string) bool { return len(losers) > 0 })
}

// The same race with stock for every event, so that each batch is first
// written fresh: a fresh insert that meets another batch's uncommitted
// order of the same shopper waits for it, and is written checked when it
// commits (or after freshLockTimeout). The end state is checked as above,
// in every round, until one has had a fresh write refused.
func TestPersistBatchConcurrentFresh(t *testing.T) {
	t.Parallel()
	raceUntil(t, 50, "no fresh write refused: the fresh race", func(st *store.Store, _ []string) bool {
		return st.CheckedBatches(store.CheckedConflict) > 0
	})
}

// raceUntil runs rounds of persistRace, each on a fresh sale of quantity
// units per item, until reached says the race a test is after happened,
// and fails (naming it: missing) if it did not in 20 rounds.
func raceUntil(t *testing.T, quantity int64, missing string, reached func(st *store.Store, losers []string) bool) {
	t.Helper()
	pool := testdb.Pool(t)
	st := store.New(pool)
	const rounds = 20
	for round := 1; round <= rounds; round++ {
		losers, alreadyActive := persistRace(t, pool, st, quantity)
		t.Logf("round %d: %d ErrActiveConflict retries %v, %d fresh writes refused so far, %d ALREADY_ACTIVE rejections",
			round, len(losers), losers, st.CheckedBatches(store.CheckedConflict), alreadyActive)
		if t.Failed() || reached(st, losers) {
			return
		}
	}
	t.Fatalf("%s was never reached in %d rounds", missing, rounds)
}

// persistRace runs one round of TestPersistBatchConcurrent on a fresh sale
// of two items of quantity units each (at least 25, so that every shopper
// gets one): four workers persist their batch of 50 events at once, each
// retrying on ErrActiveConflict as the consumer does. It
// checks the end state and returns the conflicts the workers retried (as
// "w<worker>:<user it lost>") and how many events ended ALREADY_ACTIVE.
func persistRace(t *testing.T, pool *pgxpool.Pool, st *store.Store, quantity int64) (losers []string, alreadyActive int) {
	t.Helper()
	ctx := testenv.Context(t)
	sale := testdb.Sale(t, st, quantity, quantity)
	const workers, perWorker = 4, 50
	batches := make([][]event.OrderPlaced, workers)
	for w := range workers {
		for i := range perWorker {
			// The same users, in the same order, in every batch: two batches
			// inserting them meet on the index in one order, never a deadlock.
			batches[w] = append(batches[w], event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: sale.ID,
				ItemID: sale.Items[w%2].ID, UserID: fmt.Sprintf("u%d", i), PlacedAt: time.Now()})
		}
	}
	outs := make([][]store.Outcome, workers)
	lost := make([][]string, workers) // per worker, the user each of its conflicts named
	errs := make(chan error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for attempt := 1; ; attempt++ {
				out, err := st.PersistBatch(ctx, batches[w])
				if errors.Is(err, store.ErrActiveConflict) && attempt < 10 {
					lost[w] = append(lost[w], conflictUser(err))
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d, attempt %d: %w", w, attempt, err)
					return
				}
				outs[w] = out
				return
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every event is exactly one row, by its order id, with the outcome
	// PersistBatch reported: no attempt that failed left a row behind (its
	// retry would have found it and answered Duplicate) and none is lost.
	type row struct {
		user, status, reason, outbox string
		item                         int64
		closed                       bool
	}
	rows := map[uuid.UUID]row{}
	dbRows, err := pool.Query(ctx, `
		SELECT o.id, o.user_id, o.item_id, o.status, coalesce(o.reject_reason, ''), o.closed_at IS NOT NULL, coalesce(r.reason, '')
		FROM flash_sale_order o LEFT JOIN stock_release r ON r.order_id = o.id
		WHERE o.sale_id = $1`, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for dbRows.Next() {
		var id uuid.UUID
		var r row
		if err := dbRows.Scan(&id, &r.user, &r.item, &r.status, &r.reason, &r.closed, &r.outbox); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if err := dbRows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != workers*perWorker {
		t.Errorf("order rows of the sale: %d, want %d (one per event)", len(rows), workers*perWorker)
	}
	var outbox int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1`, sale.ID).Scan(&outbox); err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for w, batch := range batches {
		for i, e := range batch {
			o, r := outs[w][i], rows[e.OrderID]
			if r.user != e.UserID || r.item != e.ItemID {
				t.Errorf("worker %d event %d (%s): row %+v, want one of user %s, item %d", w, i, e.OrderID, r, e.UserID, e.ItemID)
				continue
			}
			switch o.Kind {
			case store.Accepted:
				if r.status != store.StatusPending || r.outbox != "" {
					t.Errorf("worker %d event %d accepted: row %s with outbox row %q, want PENDING and none", w, i, r.status, r.outbox)
				}
			case store.Rejected:
				// A refused order's reservation is undone through the
				// outbox: an ALREADY_ACTIVE one queued as REJECTED (the relay
				// gives its unit back), a SOLD_OUT_IN_DB one as
				// REJECTED_SOLD_OUT (the relay frees the shopper, no unit).
				rejected++
				want := store.ReasonRejected
				if o.Reason == store.ReasonSoldOutInDB {
					want = store.ReasonRejectedSoldOut
				}
				if o.Reason == store.ReasonAlreadyActive {
					alreadyActive++
				}
				if r.status != store.StatusRejected || r.reason != o.Reason || !r.closed || r.outbox != want {
					t.Errorf("worker %d event %d rejected %s: row %s, reason %q, closed %v, outbox row %q; want REJECTED, %q, closed, %q",
						w, i, o.Reason, r.status, r.reason, r.closed, r.outbox, o.Reason, want)
				}
			default:
				t.Errorf("worker %d event %d: %v %s, want accepted or rejected (a failed attempt wrote nothing)", w, i, o.Kind, o.Reason)
			}
		}
	}
	if outbox != rejected {
		t.Errorf("stock_release rows of the sale: %d, want %d (one per rejected event)", outbox, rejected)
	}
	// The loser of each race: the winner had committed her active order
	// before the index refused the loser's, so the retry found it and
	// rejected the loser's event as ALREADY_ACTIVE, a REJECTED row whose
	// unit the relay gives back.
	for w, users := range lost {
		for _, u := range users {
			losers = append(losers, fmt.Sprintf("w%d:%s", w, u))
			var i int
			if _, err := fmt.Sscanf(u, "u%d", &i); err != nil || i >= perWorker {
				t.Errorf("worker %d: ErrActiveConflict names user %q, want one of u0..u%d", w, u, perWorker-1)
				continue
			}
			r := rows[batches[w][i].OrderID]
			if o := outs[w][i]; o.Kind != store.Rejected || o.Reason != store.ReasonAlreadyActive ||
				r.status != store.StatusRejected || r.reason != store.ReasonAlreadyActive {
				t.Errorf("worker %d lost the race for %s: outcome %v %s, row %s %q; want rejected ALREADY_ACTIVE",
					w, u, o.Kind, o.Reason, r.status, r.reason)
			}
		}
	}

	var active, users int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT user_id) FROM flash_sale_order
		WHERE sale_id = $1 AND status IN ('PENDING','PAID')`, sale.ID).Scan(&active, &users); err != nil {
		t.Fatal(err)
	}
	// At least 50 units for 50 users: a user left without an order would
	// mean both items sold out to the 49 others.
	if active != users || active != perWorker {
		t.Errorf("active orders %d for %d users, want one each for all %d users", active, users, perWorker)
	}
	after, err := st.GetSale(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := after.Items[0].Sold + after.Items[1].Sold; s != int64(active) {
		t.Errorf("sold %d, want %d (active orders)", s, active)
	}
	return losers, alreadyActive
}

// conflictUser reads the user an ErrActiveConflict is about from
// PostgreSQL's detail of the unique violation,
// "Key (sale_id, user_id)=(<sale>, <user>) already exists."; "" when
// there is none to read.
func conflictUser(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	_, key, _ := strings.Cut(pgErr.Detail, ")=(")
	key, _, _ = strings.Cut(key, ") already exists")
	_, user, _ := strings.Cut(key, ", ")
	return user
}

// A batch against an unreachable database fails as a whole and writes nothing.
func TestPersistBatchDatabaseDown(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	sale := testdb.Sale(t, store.New(pool), 1)
	ctx := testenv.Context(t)
	closed, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	id := uuid.New()
	_, err = store.New(closed).PersistBatch(ctx, []event.OrderPlaced{{Version: 1, OrderID: id, SaleID: sale.ID, ItemID: sale.Items[0].ID, UserID: "u1", PlacedAt: time.Now()}})
	if err == nil {
		t.Fatal("PersistBatch on a closed pool succeeded")
	}
	if _, err := store.New(pool).GetOrder(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetOrder after failed batch: got %v, want ErrNotFound", err)
	}
}

func TestGetSaleNotFound(t *testing.T) {
	t.Parallel()
	st := store.New(testdb.Pool(t))
	if _, err := st.GetSale(testenv.Context(t), 1<<62); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("got %v, want ErrNotFound", err)
	}
	if _, err := st.GetOrder(testenv.Context(t), uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("got %v, want ErrNotFound", err)
	}
}

// OrdersAmong answers the same whether it reads the sale's order ids or
// probes each id: every status counts as a row, and neither an order of
// another sale nor an id with no row is in the answer.
func TestOrdersAmong(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	st := store.New(pool)
	sale, other := testdb.Sale(t, st, 5), testdb.Sale(t, st, 5)
	placed := func(s store.Sale, user string) uuid.UUID {
		t.Helper()
		id := uuid.Must(uuid.NewV7())
		if _, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: id, SaleID: s.ID,
			ItemID: s.Items[0].ID, UserID: user, PlacedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	pending, paid := placed(sale, "pending"), placed(sale, "paid")
	if _, err := st.Pay(ctx, paid, "paid", "payment-"+paid.String()); err != nil { // references are unique across runs
		t.Fatal(err)
	}
	expired := placed(sale, "expired")
	if _, err := pool.Exec(ctx, `UPDATE flash_sale_order SET status = 'EXPIRED', closed_at = now() WHERE id = $1`, expired); err != nil {
		t.Fatal(err)
	}
	unasked := placed(sale, "unasked")
	elsewhere := placed(other, "elsewhere")
	nowhere := uuid.Must(uuid.NewV7())
	asked := []uuid.UUID{pending, paid, expired, elsewhere, nowhere}
	want := map[uuid.UUID]struct{}{pending: {}, paid: {}, expired: {}}
	for _, scan := range []bool{false, true} {
		got, err := st.OrdersAmong(ctx, sale.ID, asked, scan)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("sale scan %v: %v, want %v (pending %s, paid %s; not %s of another sale, %s never placed, %s not asked)",
				scan, got, want, pending, paid, elsewhere, nowhere, unasked)
		}
	}
}
