package sale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/accepted"
	"flashsale/pkg/stock"
)

// Kinds of difference between Redis and PostgreSQL.
const (
	// DiffStockNotLoaded: the item's stock key is missing (Redis restarted or
	// lost it); the gateways answer 503 for it until a repair.
	DiffStockNotLoaded = "STOCK_NOT_LOADED"
	// DiffStockMismatch: Redis has another number of units left than
	// quantity - active orders - units of orders in flight or being released.
	DiffStockMismatch = "STOCK_MISMATCH"
	// DiffHolderMissing: an active order whose user Redis does not hold (or
	// holds under another order): Redis would let the user buy again.
	DiffHolderMissing = "HOLDER_MISSING"
	// DiffHolderLeaked: a Redis holder whose order has no row and no
	// accepted record: a reservation nobody was given (failed publish whose
	// release also failed). Its unit is lost to the sale until a repair.
	DiffHolderLeaked = "HOLDER_LEAKED"
	// DiffHolderStale: a Redis holder whose order ended and whose release is
	// no longer queued (e.g. it found the stock key missing).
	DiffHolderStale = "HOLDER_STALE"
)

// How the units of in-flight orders were assigned to items: Redis holders
// name the user and order, not the item, and an order not yet persisted
// has no row to say. With one item, or when the per-item shortfall in Redis
// allows one reading only, the assignment is exact; otherwise it is an
// estimate, corrected by reconciling again once those orders are persisted.
const (
	AttributionExact     = "exact"
	AttributionEstimated = "estimated"
)

// Difference is one disagreement between Redis and PostgreSQL.
type Difference struct {
	SaleID   int64  `json:"saleId"`
	Kind     string `json:"kind"`
	ItemID   int64  `json:"itemId,omitempty"`
	UserID   string `json:"userId,omitempty"`
	OrderID  string `json:"orderId,omitempty"`
	Status   string `json:"status,omitempty"`   // HOLDER_STALE: the order's status
	Redis    *int64 `json:"redis,omitempty"`    // STOCK_MISMATCH: units left in Redis
	Expected *int64 `json:"expected,omitempty"` // STOCK_*: units left PostgreSQL implies
}

// ItemReconciliation is one item's numbers on both sides.
type ItemReconciliation struct {
	ItemID   int64 `json:"itemId"`
	Quantity int64 `json:"quantity"`
	// Active orders (PENDING and PAID) in PostgreSQL.
	Active int64 `json:"active"`
	// Units held by accepted orders not yet persisted (kept out of stock).
	InFlight int64 `json:"inFlight"`
	// Units of ended orders whose release is queued (still held in Redis).
	Releasing int64 `json:"releasing"`
	// Expected units left in Redis: quantity - active - inFlight - releasing.
	Expected int64  `json:"expected"`
	Redis    *int64 `json:"redis"` // null: key missing
	// Written by a repair: quantity - active - inFlight.
	Written *int64 `json:"written,omitempty"`
}

// Reconciliation is the result of comparing a sale's Redis copy with
// PostgreSQL, and of the repair when one was asked for.
type Reconciliation struct {
	SaleID      int64                `json:"saleId"`
	Clean       bool                 `json:"clean"`
	Differences []Difference         `json:"differences"`
	Items       []ItemReconciliation `json:"items"`
	// Holders in Redis; active orders in PostgreSQL.
	Holders int `json:"holders"`
	Active  int `json:"active"`
	// InFlight holders are kept by a repair; Leaked ones are dropped and
	// their units returned; Releasing ones are left to the relay (a repair
	// drops them and counts their units as returned; the relay's later
	// release then finds nothing to do).
	InFlight    int    `json:"inFlight"`
	Leaked      int    `json:"leaked"`
	Releasing   int    `json:"releasing"`
	Attribution string `json:"attribution,omitempty"`
	Repaired    bool   `json:"repaired"`
	// WrittenOff counts the leaked holders a repair ended as abandoned
	// reservations (a REJECTED row of reason RESERVATION_ABANDONED, the
	// unit and the admission token given back by the relay) instead of
	// dropping them. Leaked counts the others; one whose release the
	// relay has not run yet counts in Releasing too.
	WrittenOff int `json:"writtenOff,omitempty"`
	// Requeued counts the orders the repair's copy kept that had ended
	// after it was read: their releases run again (see requeueEnded).
	Requeued int `json:"requeued,omitempty"`

	unplaced []uuid.UUID // in-flight orders of unknown item
}

// ErrNoAcceptedRecords: the service was built without the accepted-order
// records, and cannot tell an order in flight from a leaked reservation.
var ErrNoAcceptedRecords = errors.New("sale: reconciliation needs the accepted-order records (WithAcceptedRecords)")

// acceptedLookups bounds concurrent accepted-record reads; rueidis
// pipelines them on one connection.
const acceptedLookups = 64

// DefaultSettle is how long a repair waits for in-flight orders to be
// persisted when their items cannot be told otherwise (see Attribution).
const DefaultSettle = 2 * time.Second

// Reconcile compares the sale's Redis copy with PostgreSQL per item: units
// left against quantity minus active orders, and holders against active
// orders. A holder whose order has no row is in flight when the gateway
// recorded it as accepted for that user (its unit stays reserved), and
// leaked otherwise. With repair, and differences found, it rewrites Redis
// from PostgreSQL, keeping in-flight holders and their units, in one
// transaction that is only applied if Redis did not change meanwhile (see
// stock.Store.Reconcile). Before a repair writes, it waits for the
// consumer group to catch up with the orders topic (see awaitConsumer):
// orders still in Kafka may have neither a row nor, after a Redis loss, a
// holder. The verdict is kept for Status (LastVerdict).
func (s *Service) Reconcile(ctx context.Context, saleID int64, repair bool) (Reconciliation, error) {
	rec, err := s.reconcileOnce(ctx, saleID, repair)
	// Right after a Redis Cluster failover the client may still aim at the
	// dead master; it learns the new slot map from that failure, so a short
	// wait and a second try usually succeed.
	for attempt := 1; attempt <= reconcileRetries && transientRedis(err, repair); attempt++ {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("reconcile sale %d: %w (after %v)", saleID, ctx.Err(), err)
		case <-time.After(time.Duration(attempt) * 300 * time.Millisecond):
			rec, err = s.reconcileOnce(ctx, saleID, repair)
		}
	}
	s.record(saleID, rec, err)
	return rec, err
}

// reconcileRetries bounds the retries of a reconcile that failed on Redis'
// connection or cluster state.
const reconcileRetries = 3

// transientRedis tells errors a failover explains: a connection refused
// (dialing the dead master) or the cluster not serving a slot yet, which
// prove nothing was written; and, for a read-only reconcile, a connection
// cut mid-call (the dead master's sockets). A repair is not retried after a
// cut: its write may have landed, and the retry would report the sale clean.
func transientRedis(err error, repair bool) bool {
	if err == nil {
		return false
	}
	var opErr *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &opErr) && opErr.Op == "dial") {
		return true
	}
	if !repair && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		return true
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "LOADING")
	}
	return false
}

func (s *Service) reconcileOnce(ctx context.Context, saleID int64, repair bool) (Reconciliation, error) {
	if s.accepted == nil {
		return Reconciliation{}, ErrNoAcceptedRecords
	}
	if repair {
		unlock, err := s.lockWrites(ctx, saleID)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("repair sale %d: %w", saleID, err)
		}
		defer unlock()
		// A failover that lost the last writes may have lost spent
		// admissions too, even of orders that ended since, which leave the
		// copy looking clean: those orders were placed with go back first.
		if err := s.restoreSpent(ctx, saleID); err != nil {
			return Reconciliation{}, fmt.Errorf("repair sale %d: %w", saleID, err)
		}
		rec, err := s.reconcile(ctx, saleID, false)
		if err != nil {
			return Reconciliation{}, err
		}
		if rec.Clean {
			return rec, nil
		}
		caughtUpAt := time.Now()
		if err := s.awaitConsumer(ctx); err != nil {
			return Reconciliation{}, fmt.Errorf("repair sale %d: %w", saleID, err)
		}
		// The consumer caught up, so only purchases made after the wait
		// started can still be in flight; those normally reach PostgreSQL
		// within milliseconds, and then their items are known: rather than
		// guess, wait a little.
		if rec, err = s.reconcile(ctx, saleID, false); err != nil {
			return Reconciliation{}, err
		}
		if rec.Clean {
			return rec, nil
		}
		off, err := s.writeOffLeaked(ctx, saleID, rec, caughtUpAt)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("repair sale %d: %w", saleID, err)
		}
		if len(off) > 0 {
			if rec, err = s.reconcile(ctx, saleID, false); err != nil {
				return Reconciliation{}, err
			}
		}
		if !rec.Clean && rec.Attribution == AttributionEstimated {
			if err := s.awaitPersisted(ctx, saleID, rec.unplaced); err != nil {
				return Reconciliation{}, err
			}
		}
		final, err := s.reconcile(ctx, saleID, repair)
		return final.withWrittenOff(off), err
	}
	rec, err := s.reconcile(ctx, saleID, false)
	if err != nil {
		return rec, err
	}
	if rec.Requeued, err = s.requeueStale(ctx, saleID, rec.Differences); err != nil {
		return rec, fmt.Errorf("reconcile sale %d: %w", saleID, err)
	}
	return rec, nil
}

// restoreSpent puts back in Redis the admissions the sale's orders were
// placed with (stock.RestoreSpent only adds).
func (s *Service) restoreSpent(ctx context.Context, saleID int64) error {
	spent, err := s.store.SpentAdmissions(ctx, saleID)
	if err != nil {
		return err
	}
	return s.stock.RestoreSpent(ctx, saleID, spent)
}

// requeueStale runs again the releases of the stale holders a read-only
// reconcile found: holders of orders that ended and whose release is
// marked done. A release acknowledged by a Redis master that failed over
// before its replica had it, or one that met a stock key gone and was
// marked done while a repair put the old values back, leaves such a
// holder, its shopper refused and its unit out of the sale, until a
// repair; the periodic reconcile now heals it. The release is keyed by
// order id and checks the holder still names the order, so one that finds
// nothing to do is harmless.
func (s *Service) requeueStale(ctx context.Context, saleID int64, diffs []Difference) (int, error) {
	var ids []uuid.UUID
	for _, d := range diffs {
		if id, err := uuid.Parse(d.OrderID); d.Kind == DiffHolderStale && err == nil {
			ids = append(ids, id)
		}
	}
	n, err := s.requeue(ctx, saleID, ids)
	if err != nil {
		return 0, fmt.Errorf("the releases of stale holders were not requeued: %w", err)
	}
	return n, nil
}

// writeOffLeaked ends a repair's leaked holders the way the
// abandoned-reservation pass does (see ReleaseAbandoned), rather than
// letting the rewrite drop them: a REJECTED row (RESERVATION_ABANDONED)
// takes each order id, so a late copy of its event can never be
// persisted, and the relay returns the unit and the admission token its
// reservation spent. A dropped holder
// kept its token spent (the shopper of a queued sale could not buy again)
// and left its order id free. Holders whose item the reservation did not
// note, or whose id carries no time, are left to the rewrite as before.
// Only holders whose order id was older than the in-flight window when
// the repair's wait for the consumer began (caughtUpAt) are written off:
// any copy of their events reached the topic before that, and the wait saw
// it persisted, so the pass need not wait again. It returns the
// differences of the holders written off.
func (s *Service) writeOffLeaked(ctx context.Context, saleID int64, rec Reconciliation, caughtUpAt time.Time) ([]Difference, error) {
	if rec.Leaked == 0 {
		return nil, nil
	}
	holders, err := s.stock.Holders(ctx, saleID)
	if err != nil {
		return nil, err
	}
	res, err := s.releaseAbandoned(ctx, saleID, holders, caughtUpAt, true)
	if err != nil || len(res.Orders) == 0 {
		return nil, err
	}
	written := make(map[string]bool, len(res.Orders))
	for _, id := range res.Orders {
		written[id.String()] = true
	}
	var off []Difference
	for _, d := range rec.Differences {
		if d.Kind == DiffHolderLeaked && written[d.OrderID] {
			off = append(off, d)
		}
	}
	return off, nil
}

// withWrittenOff adds to a repair's last round the leaked holders
// writeOffLeaked ended before it: they are differences it repaired, though
// that round no longer sees them.
func (r Reconciliation) withWrittenOff(off []Difference) Reconciliation {
	if len(off) == 0 {
		return r
	}
	r.Differences = append(off, r.Differences...)
	r.WrittenOff = len(off)
	r.Clean, r.Repaired = false, true
	return r
}

// awaitPersisted polls PostgreSQL until every order of ids has a row, for
// at most the service's settle time.
func (s *Service) awaitPersisted(ctx context.Context, saleID int64, ids []uuid.UUID) error {
	deadline := time.Now().Add(s.settle)
	for {
		rows, err := s.store.HeldOrders(ctx, saleID, ids)
		if err != nil {
			return err
		}
		if len(rows) == len(ids) || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for in-flight orders: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Service) reconcile(ctx context.Context, saleID int64, repair bool) (Reconciliation, error) {
	// The item list is fixed once a sale exists; the counts are read again
	// in every round, after Redis.
	state, err := s.store.ActiveState(ctx, saleID)
	if err != nil {
		return Reconciliation{}, err
	}
	itemIDs := make([]int64, 0, len(state.Items))
	for _, it := range state.Items {
		itemIDs = append(itemIDs, it.ItemID)
	}
	var rec Reconciliation
	var cp *stock.Copy
	_, err = s.stock.Reconcile(ctx, saleID, itemIDs, func(ctx context.Context, snap stock.Snapshot) (*stock.Copy, error) {
		var err error
		rec, cp, err = s.compare(ctx, saleID, snap, repair)
		if cp != nil && s.beforeWrite != nil {
			s.beforeWrite()
		}
		return cp, err
	})
	if err != nil {
		return Reconciliation{}, err
	}
	rec.Repaired = cp != nil
	if cp != nil {
		if rec.Requeued, err = s.requeueEnded(ctx, saleID, cp.Holders); err != nil {
			return rec, fmt.Errorf("sale %d repaired, but %w; reconcile again", saleID, err)
		}
	}
	return rec, nil
}

// compare builds the reconciliation of one Redis snapshot and, for a
// repair with differences, the copy to write. It gathers the facts
// (PostgreSQL's active state, then what explains the other holders), runs
// the per-holder and per-item decisions (judgeHolder, judgeStock) and
// assembles their verdicts.
func (s *Service) compare(ctx context.Context, saleID int64, snap stock.Snapshot, repair bool) (Reconciliation, *stock.Copy, error) {
	// PostgreSQL is read after Redis: an order persisted in between shows
	// up here as active, and is matched to its holder below.
	state, err := s.store.ActiveState(ctx, saleID)
	if err != nil {
		return Reconciliation{}, nil, err
	}
	rec := newReconciliation(saleID, snap, state)
	facts, err := s.explainHolders(ctx, saleID, snap, state)
	if err != nil {
		return Reconciliation{}, nil, err
	}
	keep := make([]stock.Holder, 0, len(state.Active)+facts.late)
	for _, a := range state.Active {
		keep = append(keep, stock.Holder{UserID: a.UserID, OrderID: a.OrderID.String()})
	}
	keep = rec.judgeHolders(facts, keep, time.Now(), s.window)
	for _, a := range state.Active {
		if snap.Holders[a.UserID] != a.OrderID.String() {
			rec.add(Difference{Kind: DiffHolderMissing, ItemID: a.ItemID, UserID: a.UserID, OrderID: a.OrderID.String()})
		}
	}
	if len(rec.unplaced) > 0 {
		rec.Attribution = attribute(rec.Items, snap.Left, len(rec.unplaced), rec.Leaked)
	}
	writes := rec.judgeItems(snap.Left)
	rec.Clean = len(rec.Differences) == 0
	if !repair || rec.Clean {
		return rec, nil, nil
	}
	cp := &stock.Copy{Holders: keep, Items: make([]stock.ItemStock, 0, len(rec.Items))}
	for i := range rec.Items {
		it := &rec.Items[i]
		w := writes[i]
		it.Written = &w
		cp.Items = append(cp.Items, stock.ItemStock{ItemID: it.ItemID, Left: w})
	}
	return rec, cp, nil
}

// newReconciliation starts a sale's reconciliation with PostgreSQL's items
// and no differences.
func newReconciliation(saleID int64, snap stock.Snapshot, state store.ActiveState) Reconciliation {
	rec := Reconciliation{SaleID: saleID, Differences: []Difference{}, Holders: len(snap.Holders), Active: len(state.Active)}
	rec.Items = make([]ItemReconciliation, len(state.Items))
	for i, it := range state.Items {
		rec.Items[i] = ItemReconciliation{ItemID: it.ItemID, Quantity: it.Quantity, Active: it.Active}
	}
	return rec
}

// add records a difference of the sale.
func (r *Reconciliation) add(d Difference) {
	d.SaleID = r.SaleID
	r.Differences = append(r.Differences, d)
}

// unexplained is what is known of the Redis holders that PostgreSQL's
// active orders do not explain.
type unexplained struct {
	holders []holder                      // sorted by user
	rows    map[uuid.UUID]store.HeldOrder // their order rows, where one exists
	owners  map[string]string             // order id -> user of their accepted records
	late    int                           // accepted ones looked up again in PostgreSQL
	active  map[string]bool               // users with an active order in PostgreSQL
}

// explainHolders finds the holders PostgreSQL's active orders do not
// explain and looks their orders up, then the gateway's accepted records
// for those with no row, then PostgreSQL again for those (one may have been
// persisted meanwhile).
func (s *Service) explainHolders(ctx context.Context, saleID int64, snap stock.Snapshot, state store.ActiveState) (unexplained, error) {
	activeByOrder := make(map[uuid.UUID]store.HeldOrder, len(state.Active))
	f := unexplained{active: make(map[string]bool, len(state.Active))}
	for _, a := range state.Active {
		activeByOrder[a.OrderID] = a
		f.active[a.UserID] = true
	}
	for user, order := range snap.Holders {
		if id, err := uuid.Parse(order); err == nil {
			if a, ok := activeByOrder[id]; ok && a.UserID == user {
				continue
			}
		}
		f.holders = append(f.holders, holder{user, order})
	}
	sort.Slice(f.holders, func(i, j int) bool { return f.holders[i].user < f.holders[j].user })
	ids := make([]uuid.UUID, 0, len(f.holders))
	for _, h := range f.holders {
		if id, err := uuid.Parse(h.order); err == nil {
			ids = append(ids, id)
		}
	}
	rows, err := s.store.HeldOrders(ctx, saleID, ids)
	if err != nil {
		return unexplained{}, err
	}
	var noRow []holder
	for _, h := range f.holders {
		if id, err := uuid.Parse(h.order); err != nil || rows[id].OrderID == uuid.Nil {
			noRow = append(noRow, h)
		}
	}
	owners, err := s.acceptedOwners(ctx, noRow)
	if err != nil {
		return unexplained{}, err
	}
	var late []uuid.UUID
	for _, h := range noRow {
		if id, err := uuid.Parse(h.order); err == nil && owners[h.order] == h.user {
			late = append(late, id)
		}
	}
	lateRows, err := s.store.HeldOrders(ctx, saleID, late)
	if err != nil {
		return unexplained{}, err
	}
	for id, r := range lateRows {
		rows[id] = r
	}
	f.rows, f.owners, f.late = rows, owners, len(late)
	return f, nil
}

// judgeHolders applies judgeHolder to every unexplained holder, counts the
// verdicts into rec, records their differences, and returns keep with the
// holders a repair keeps appended.
func (rec *Reconciliation) judgeHolders(f unexplained, keep []stock.Holder, now time.Time, window time.Duration) []stock.Holder {
	items := make(map[int64]*ItemReconciliation, len(rec.Items))
	for i := range rec.Items {
		items[rec.Items[i].ItemID] = &rec.Items[i]
	}
	for _, h := range f.holders {
		id, _ := uuid.Parse(h.order)
		r, hasRow := f.rows[id]
		v := judgeHolder(holderFacts{
			user:       h.user,
			userActive: f.active[h.user],
			row:        r,
			hasRow:     hasRow,
			accepted:   f.owners[h.order] == h.user,
			id:         id,
			now:        now,
			window:     window,
		})
		switch v {
		case holderPersisted:
			rec.InFlight++
			if it := items[r.ItemID]; it != nil {
				it.InFlight++
			}
		case holderReleasing:
			rec.Releasing++
			if it := items[r.ItemID]; it != nil {
				it.Releasing++
			}
		case holderInFlight:
			rec.InFlight++
			rec.unplaced = append(rec.unplaced, id)
		case holderLeaked:
			rec.Leaked++
		}
		if k := v.diff(); k != "" {
			// A leaked holder has no row: its item and status stay empty.
			rec.add(Difference{Kind: k, ItemID: r.ItemID, UserID: h.user, OrderID: h.order, Status: r.Status})
		}
		if v.keep() {
			keep = append(keep, stock.Holder{UserID: h.user, OrderID: h.order})
		}
	}
	return keep
}

// judgeItems sets each item's expected units left and its Redis reading,
// records the stock differences judgeStock finds, and returns what a
// repair would write per item.
func (rec *Reconciliation) judgeItems(left map[int64]int64) []int64 {
	writes := make([]int64, len(rec.Items))
	for i := range rec.Items {
		it := &rec.Items[i]
		l, ok := left[it.ItemID]
		v := judgeStock(*it, l, ok)
		it.Expected = v.expected
		expected := v.expected
		switch v.diff {
		case DiffStockNotLoaded:
			rec.add(Difference{Kind: DiffStockNotLoaded, ItemID: it.ItemID, Expected: &expected})
		case DiffStockMismatch:
			rec.add(Difference{Kind: DiffStockMismatch, ItemID: it.ItemID, Redis: &l, Expected: &expected})
		}
		if ok {
			it.Redis = &l
		}
		writes[i] = v.write
	}
	return writes
}

// attribute assigns n in-flight units of unknown item to items. A unit Redis
// holds beyond active orders, known in-flight and releasing ones is held by
// an in-flight or a leaked holder; those shortfalls are filled in item
// order, then items whose stock key is missing, then any with room. It
// reports whether the assignment was forced (exact) or a guess.
func attribute(items []ItemReconciliation, left map[int64]int64, n, leaked int) string {
	exact := len(items) == 1
	short := make([]int64, len(items))
	var totalShort int64
	withShort := 0
	for i, it := range items {
		if l, ok := left[it.ItemID]; ok {
			short[i] = max(it.Quantity-it.Active-it.InFlight-it.Releasing-l, 0)
		}
		totalShort += short[i]
		if short[i] > 0 {
			withShort++
		}
	}
	if !exact && (withShort == 1 && totalShort >= int64(n) || leaked == 0 && totalShort == int64(n)) {
		exact = true
	}
	remaining := int64(n)
	take := func(i int, room int64) {
		k := min(room, remaining)
		if k > 0 {
			items[i].InFlight += k
			remaining -= k
		}
	}
	for i := range items {
		take(i, short[i])
	}
	for i, it := range items {
		if _, ok := left[it.ItemID]; !ok {
			take(i, it.Quantity-it.Active-it.InFlight)
		}
	}
	for i, it := range items {
		take(i, it.Quantity-it.Active-it.InFlight)
	}
	if len(items) > 0 {
		items[0].InFlight += remaining // more in flight than units: counted, nowhere to keep them
	}
	if exact {
		return AttributionExact
	}
	return AttributionEstimated
}

// InFlightWindow is the default of how long after its order id was minted
// a holder with neither a row nor an accepted record is still taken for a
// purchase in progress: well beyond the gateway's publish timeout (3 s by
// default), after which librdkafka has given the event up. Past it, a
// repair drops such a holder and ReleaseAbandoned gives its unit back.
// WithInFlightWindow changes it (FLASHSALE_INFLIGHT_WINDOW).
const InFlightWindow = 30 * time.Second

// placedRecently reads the time in a UUIDv7 order id (the gateway mints
// them) and tells whether it is within window of now.
func placedRecently(id uuid.UUID, now time.Time, window time.Duration) bool {
	placed, ok := placedAt(id)
	return ok && now.Sub(placed) < window && placed.Before(now.Add(time.Minute))
}

// placedAt reads the time in a UUIDv7 order id; ok is false for other
// versions, which carry no time.
func placedAt(id uuid.UUID) (time.Time, bool) {
	if id.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := id.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

// holder is a Redis holder entry.
type holder struct{ user, order string }

// acceptedOwners reads the accepted records of hs: order id -> user, for
// the orders that have one.
func (s *Service) acceptedOwners(ctx context.Context, hs []holder) (map[string]string, error) {
	owners := make([]string, len(hs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(acceptedLookups)
	for i, h := range hs {
		if _, err := uuid.Parse(h.order); err != nil {
			continue // no gateway hands out such an id
		}
		g.Go(func() error {
			user, ok, err := accepted.Owner(gctx, s.accepted, h.order)
			if ok {
				owners[i] = user
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("read accepted orders: %w", err)
	}
	out := make(map[string]string, len(hs))
	for i, h := range hs {
		if owners[i] != "" {
			out[h.order] = owners[i]
		}
	}
	return out, nil
}

// Option configures a Service.
type Option func(*Service)

// WithAcceptedRecords lets the service read the gateway's records of
// accepted, not yet persisted orders (reconciliation needs them).
func WithAcceptedRecords(rc rueidis.Client) Option {
	return func(s *Service) { s.accepted = rc }
}

// WithCatchUp makes LoadStock and a repair wait, at most timeout, for the
// consumer group read by r to reach the orders topic's end.
func WithCatchUp(r *lag.Reader, timeout time.Duration) Option {
	return func(s *Service) { s.lag, s.catchUp = r, timeout }
}

// WithLagTracker gives Status the periodic readings of the consumer lag.
func WithLagTracker(t *lag.Tracker) Option {
	return func(s *Service) { s.tracker = t }
}

// WithMetrics exports every reconcile verdict on m.
func WithMetrics(m *metrics.Counters) Option {
	return func(s *Service) { s.metrics = m }
}

// WithInFlightWindow sets how long a holder that no order row or accepted
// record explains is still taken for a purchase in progress
// (InFlightWindow by default). It must exceed the gateways' publish
// timeout by a margin: past it, the holder's unit is given back.
func WithInFlightWindow(d time.Duration) Option {
	return func(s *Service) { s.window = d }
}

// WithHolderReadRate paces the abandoned-reservation pass's reads of
// holders to perSecond a second on average, stock.PaceBurst pages at a
// time (0: as fast as Redis answers). The pass is never urgent, its
// holders being older than the in-flight window, and a fresh order
// service's first pass reads every listed sale's holders: unpaced, beside a
// dozen open 10,000-unit sales, it took Redis, PostgreSQL and the order
// service's share of the cores in the second a sale sold out in.
func WithHolderReadRate(perSecond int) Option {
	return func(s *Service) { s.readRate, s.pace = perSecond, stock.PaceHolders(perSecond) }
}

// WithReleases lets ReleaseAbandoned return the units it frees at once,
// through the relay's outbox drain (without it they wait for the relay's
// next pass).
func WithReleases(drain func(ctx context.Context, orderIDs []uuid.UUID) (int, error)) Option {
	return func(s *Service) { s.drain = drain }
}

// WithSettle sets how long a repair waits for in-flight orders whose item
// it cannot tell (DefaultSettle).
func WithSettle(d time.Duration) Option {
	return func(s *Service) { s.settle = d }
}
