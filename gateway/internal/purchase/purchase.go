// Package purchase is the gateway's buying step: reserve a unit in Redis,
// publish OrderPlaced, and only then call it accepted. If the producer
// refused the event the unit is given back before the shopper hears
// anything, so no shopper holds an order id that never appears. If the
// event was taken but not acknowledged it may still reach the topic, so the
// order id is settled through PostgreSQL's primary key first (see Settler):
// the unit is given back only once the order provably never will exist.
package purchase

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"golang.org/x/time/rate"

	"flashsale/gateway/internal/holding"
	"flashsale/gateway/internal/publish"
	"flashsale/pkg/accepted"
	"flashsale/pkg/deadline"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
)

// Outcomes callers branch on (besides stock.ErrSoldOut,
// stock.ErrAlreadyPurchased and stock.ErrNotLoaded, passed through).
var (
	// ErrUnavailable: Redis or the broker failed; nothing was taken.
	ErrUnavailable = errors.New("purchase: temporarily unavailable")
	// ErrUnresolved (always with ErrUnavailable): the broker did not
	// confirm the event and PostgreSQL could not say whether the order
	// exists. The unit stays reserved for it and Buy returns its id: the
	// order may still appear (the shopper can poll it); if no row ever
	// does, the order service frees the holder once the id is older than
	// its in-flight window (FLASHSALE_INFLIGHT_WINDOW).
	ErrUnresolved = errors.New("purchase: order fate unknown")
	// ErrReleasing: the shopper's reservation belongs to an order that has
	// just ended; its release is on its way, and a retry can buy again.
	ErrReleasing = errors.New("purchase: the shopper's previous order is being released")
)

// Receipt is what an accepted purchase answers.
type Receipt struct {
	OrderID uuid.UUID
	// Status is PENDING for a new order. A replay (the shopper already
	// holds an order for this item: her earlier answer was lost) gives the
	// order's own status: PROCESSING, PENDING or PAID.
	Status   string
	Replayed bool
}

// Publisher is the part of the Kafka producer the buyer needs.
type Publisher interface {
	Publish(itemID int64, value []byte) error
}

// Buyer runs purchases.
type Buyer struct {
	retries   chan release   // releases that failed, retried by RunRetries
	unsettled chan heldOrder // held orders settled again by RunSettles
	// releasesBackingOff and settlesBackingOff count the releases and the
	// held orders waiting out a backoff (off their queues meanwhile).
	releasesBackingOff atomic.Int64
	settlesBackingOff  atomic.Int64
	// working counts the releases and held orders RunRetries and
	// RunSettles have taken off their queues and not finished yet.
	working atomic.Int64
	// stranded counts reservations given up on (a queue full, the attempts
	// spent): their units stay reserved until a reconcile repair or the
	// order service's abandoned-reservation pass.
	stranded atomic.Uint64
	// reserveFailures counts the reservations that failed for a reason
	// other than the shopper's (Redis unreachable, a timeout, a script
	// error); reserveFailed logs them at most once a second, since during
	// an outage every purchase fails the same way.
	reserveFailures atomic.Uint64
	reserveFailed   rate.Sometimes
	stock           *stock.Store
	redis           rueidis.Client
	pub             Publisher
	settler         Settler
	holding         *holding.Finder // nil: a shopper who already holds gets a bare ALREADY_PURCHASED
	redisTimeout    time.Duration
	// redisCalls bounds the two Redis calls of every purchase (the
	// reservation and the accepted record) by redisTimeout, with one
	// context shared by the calls that begin within a hundredth of it.
	redisCalls *deadline.Shared
	// trustAcksWithin: an acknowledgement that comes later than this after
	// the purchase began is not trusted (SetInFlightWindow).
	trustAcksWithin time.Duration
	log             *slog.Logger
	now             func() time.Time
}

// DefaultInFlightWindow is the order service's default in-flight window
// (FLASHSALE_INFLIGHT_WINDOW): past it, a reservation with no order row
// and no accepted record is written off as abandoned.
const DefaultInFlightWindow = 30 * time.Second

// errLateAck: the broker acknowledged a purchase that began longer ago
// than the buyer trusts (see SetInFlightWindow).
var errLateAck = errors.New("purchase: acknowledged too late to be trusted")

// SetInFlightWindow tells the buyer the order service's in-flight window
// (FLASHSALE_INFLIGHT_WINDOW). An acknowledgement that comes more than
// half of it after the purchase began is settled through PostgreSQL
// instead of trusted: a gateway paused that long (a frozen VM, a stopped
// process) between its reservation and the broker's ack may find the
// reservation written off as abandoned meanwhile (its unit sold again,
// its order id taken by a REJECTED row, so the event it then published is
// refused), and would have answered 202 for an order that never exists.
// Settling finds the order's row (202), or the write-off or its own
// tombstone (503, the unit given back).
func (b *Buyer) SetInFlightWindow(w time.Duration) { b.trustAcksWithin = w / 2 }

// NewBuyer wires a buyer. st runs the stock scripts on redis (it knows how
// each sale's stock is sharded); settler decides the orders whose publish
// pub could not confirm; finder tells a shopper who already holds a unit
// which order holds it (nil: she is only told ALREADY_PURCHASED).
func NewBuyer(redis rueidis.Client, st *stock.Store, pub Publisher, settler Settler, finder *holding.Finder,
	redisTimeout time.Duration, log *slog.Logger) *Buyer {
	return &Buyer{
		stock: st, redis: redis, pub: pub, settler: settler, holding: finder,
		redisTimeout: redisTimeout, redisCalls: deadline.New(redisTimeout, redisTimeout/100),
		trustAcksWithin: DefaultInFlightWindow / 2, log: log, now: time.Now,
		retries: make(chan release, retryQueue), unsettled: make(chan heldOrder, settleQueue),
		reserveFailed: rate.Sometimes{Interval: time.Second},
	}
}

// verdict is what a purchase comes to after its publish.
type verdict int

const (
	accept   verdict = iota + 1 // 202: the order exists or will
	giveBack                    // 503: the order never will exist; release the unit
	hold                        // 503 with the order id: fate unknown, keep the unit
)

// decide turns a publish result into a verdict, asking settle only when the
// event may have reached the topic without an acknowledgement. It returns
// the error that explains a 503.
func decide(pubErr error, settle func() (Settlement, error)) (verdict, error) {
	switch {
	case pubErr == nil:
		return accept, nil
	case errors.Is(pubErr, publish.ErrNotPublished) && !errors.Is(pubErr, publish.ErrUnconfirmed):
		// Only an error that says nothing but "not published": one that
		// also says "maybe written" is settled like any unconfirmed one.
		return giveBack, pubErr
	}
	// Anything else, ErrUnconfirmed and errors of unknown kind alike, may
	// have been written: only the order id's row can tell.
	s, err := settle()
	switch {
	case err != nil:
		return hold, fmt.Errorf("%w (%v), then %w", ErrUnresolved, pubErr, err)
	case s == Abandoned:
		return giveBack, pubErr
	case s == Placed:
		return accept, nil
	}
	return hold, fmt.Errorf("%w (%v), then settlement %v", ErrUnresolved, pubErr, s)
}

// Buy reserves one unit of itemID for userID and publishes the order. It
// returns the order id without error only once the order is certain: the
// broker acknowledged the event, or PostgreSQL already holds the order.
// With ErrUnresolved it returns the id too (see there).
//
// A shopper who already holds an active order in the sale is told which
// (see replay): a receipt for it when it is of this item, or
// stock.ErrAlreadyPurchased with its id when it is of another; with
// holding.ErrUnconfirmed (and ErrUnavailable) and its id while that order
// is not confirmed yet. With any other error the receipt is empty.
// ctx must not be a fasthttp RequestCtx's lifetime-bound value past return.
// tokenID is the admission token's id when the sale is queued ("" if not);
// a token that already bought a unit gives stock.ErrTokenSpent.
func (b *Buyer) Buy(ctx context.Context, saleID, itemID int64, userID, tokenID string) (Receipt, error) {
	began := b.now()
	orderID, err := uuid.NewV7()
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: order id: %v", ErrUnavailable, err)
	}
	oid := orderID.String()
	_, err = b.stock.ReserveAdmitted(b.redisCalls.At(ctx, began), saleID, itemID, userID, oid, tokenID)
	switch {
	case err == nil:
	case errors.Is(err, stock.ErrAlreadyPurchased):
		return b.replay(ctx, saleID, itemID, userID)
	case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrNotLoaded), errors.Is(err, stock.ErrTokenSpent):
		return Receipt{}, err
	default:
		// The script may or may not have run: give back whatever this
		// order id holds (a no-op when it holds nothing).
		b.reserveFailures.Add(1)
		b.reserveFailed.Do(func() {
			b.log.Warn("purchase unavailable: reservation failed", "sale", saleID, "item", itemID, "err", err)
		})
		b.release(ctx, saleID, itemID, userID, oid, tokenID)
		return Receipt{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}

	placed := event.OrderPlaced{
		Version: event.Version, OrderID: orderID, SaleID: saleID, ItemID: itemID,
		UserID: userID, PlacedAt: b.now().UTC(),
	}
	if event.ValidAdmissionID(tokenID) { // always, with today's tickets
		placed.AdmissionID = tokenID
	}
	payload, err := placed.Marshal()
	if err != nil {
		b.releaseReserved(ctx, saleID, itemID, userID, oid, tokenID)
		return Receipt{}, fmt.Errorf("%w: encode order: %v", ErrUnavailable, err)
	}
	pubErr := b.pub.Publish(itemID, payload)
	if age := b.now().Sub(began); pubErr == nil && age > b.trustAcksWithin {
		pubErr = fmt.Errorf("%w: %s after the purchase began", errLateAck, age.Round(time.Millisecond))
	}
	v, err := decide(pubErr, func() (Settlement, error) {
		return b.settler.Settle(ctx, placed)
	})
	switch v {
	case accept:
	case giveBack:
		b.releaseReserved(ctx, saleID, itemID, userID, oid, tokenID)
		return Receipt{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	default:
		// Releasing now could sell the unit twice if the event was written;
		// keeping it costs at most one unit until a settlement, or the
		// order service's abandoned-reservation pass after its window.
		b.log.Error("publish unconfirmed and order not settled; unit kept reserved until a later settlement, "+untilAbandoned,
			"sale", saleID, "item", itemID, "order", oid, "err", err)
		select {
		case b.unsettled <- heldOrder{o: placed, tokenID: tokenID}:
		default:
			b.stranded.Add(1)
			b.log.Error("settle queue full; unit kept reserved until "+untilAbandoned, "sale", saleID, "order", oid)
		}
		return Receipt{OrderID: orderID}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// The order is accepted now, whatever follows. (A settlement may have
	// taken seconds since the acknowledgement: the record's bound starts
	// now.)
	b.recordAccepted(b.redisCalls.At(ctx, b.now()), oid, userID)
	return Receipt{OrderID: orderID, Status: holding.Pending}, nil
}

// recordAccepted writes what follows the broker's acknowledgement: the
// accepted record, which lets polling say PROCESSING before the order's row
// exists (without it polling says 404 for that short while). It cannot
// move into the reserve script's call: the order service takes a holder
// with no row and no accepted record for a purchase that never reached the
// broker (abandoned, its unit given back after FLASHSALE_INFLIGHT_WINDOW),
// so the record must not exist before the acknowledgement. (The admission
// token is spent by the reserve script itself, and given back with the
// unit when the purchase fails.) A failure is logged, not returned: the
// order is accepted whatever follows. ctx bounds the call.
func (b *Buyer) recordAccepted(ctx context.Context, orderID, userID string) {
	if err := b.redis.Do(ctx, accepted.RecordCommand(b.redis, orderID, userID)).Error(); err != nil {
		b.log.Warn("accepted order not recorded for polling", "order", orderID, "err", err)
	}
}

// replay answers a shopper whose reservation the script refused because
// she already holds a unit in the sale, which happens above all when she
// retries a purchase whose answer she never got. The one-order-per-sale
// rule makes (sale, user) the purchase's idempotency key, so no header is
// needed: the same item gives her the order she already has (the answer
// she missed), another item ALREADY_PURCHASED with the id of the order she
// holds. Nothing is reserved or published. When the lookup fails she still
// gets the bare ALREADY_PURCHASED, which is true.
func (b *Buyer) replay(ctx context.Context, saleID, itemID int64, userID string) (Receipt, error) {
	if b.holding == nil {
		return Receipt{}, stock.ErrAlreadyPurchased
	}
	// One Redis round trip and one primary-key read in PostgreSQL, each
	// about as cheap as the reservation: twice the Redis bound covers both.
	fctx, cancel := context.WithTimeout(ctx, 2*b.redisTimeout)
	o, err := b.holding.Find(fctx, saleID, userID)
	cancel()
	return replayed(o, err, itemID)
}

// replayed decides a replay's answer from the lookup of the shopper's order.
func replayed(o holding.Order, err error, itemID int64) (Receipt, error) {
	switch {
	case errors.Is(err, holding.ErrUnconfirmed):
		// Her other request may still be waiting for the broker: ask again.
		return Receipt{OrderID: o.ID}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, holding.ErrNone):
		return Receipt{}, fmt.Errorf("%w: %w", ErrUnavailable, ErrReleasing)
	case err != nil:
		return Receipt{}, fmt.Errorf("%w (order lookup: %v)", stock.ErrAlreadyPurchased, err)
	case o.ItemID == itemID:
		return Receipt{OrderID: o.ID, Status: o.Status, Replayed: true}, nil
	}
	return Receipt{OrderID: o.ID}, stock.ErrAlreadyPurchased
}

// release is a unit to give back, with the admission token its
// reservation spent ("" for none).
type release struct {
	saleID, itemID           int64
	userID, orderID, tokenID string
	// reserved: the reservation certainly happened (and spent the token),
	// and its order will never exist; the token goes back even when
	// someone else released the unit first.
	reserved bool
	attempts int
}

// retryQueue bounds the releases waiting for Redis to answer again.
const retryQueue = 65536

// release gives a unit back after a failed purchase, and the admission
// token its reservation spent (tokenID; "" for none). When Redis does not
// answer, the release is queued and retried (it is keyed by order id, so a
// retry never returns a unit twice); only when the queue is full does the
// unit stay reserved until a reconcile.
func (b *Buyer) release(ctx context.Context, saleID, itemID int64, userID, orderID, tokenID string) {
	b.enqueueRelease(ctx, release{saleID: saleID, itemID: itemID, userID: userID, orderID: orderID, tokenID: tokenID})
}

// releaseReserved is release for a purchase whose reservation certainly
// happened and whose order will never exist (its publish refused, or its
// settlement abandoned): its admission token goes back even when the order
// service's relay, writing the order off, released the unit first (the
// relay knows no token).
func (b *Buyer) releaseReserved(ctx context.Context, saleID, itemID int64, userID, orderID, tokenID string) {
	b.enqueueRelease(ctx, release{saleID: saleID, itemID: itemID, userID: userID, orderID: orderID, tokenID: tokenID, reserved: true})
}

// untilAbandoned is what happens to a unit the gateway could not give
// back, as its log says it: nothing needs doing unless the operator wants
// the unit on sale sooner.
const untilAbandoned = "the order service's abandoned-reservation pass gives it back, FLASHSALE_INFLIGHT_WINDOW after the purchase (sooner: ordersvc reconcile --sale ID --repair)"

func (b *Buyer) enqueueRelease(ctx context.Context, r release) {
	if b.tryRelease(ctx, r) {
		return
	}
	select {
	case b.retries <- r:
	default:
		b.stranded.Add(1)
		b.log.Error("reservation not released and the retry queue is full; unit kept reserved until "+untilAbandoned,
			"sale", r.saleID, "item", r.itemID, "order", r.orderID)
	}
}

// notLoadedAttempts bounds the retries of a release whose stock key is
// missing (~20 s of backoff). A repair that pauses a sharded sale puts the
// keys back within seconds, and then the release must still happen; a sale
// whose keys stay gone is reloaded from PostgreSQL, which decides its
// holders without this release.
const notLoadedAttempts = 20

func (b *Buyer) tryRelease(ctx context.Context, r release) bool {
	rctx, cancel := context.WithTimeout(ctx, b.redisTimeout)
	defer cancel()
	gave, err := b.stock.GiveBack(rctx, r.saleID, r.itemID, r.userID, r.orderID, r.tokenID)
	if errors.Is(err, stock.ErrNotLoaded) && r.attempts >= notLoadedAttempts {
		b.log.Warn("release dropped: the stock stayed unloaded; the reload decides", "sale", r.saleID, "order", r.orderID)
		return true
	}
	if err == nil && !gave && r.reserved && r.tokenID != "" {
		// Someone else released the unit first: the token this
		// reservation spent goes back alone, unless it went back with
		// that release (the relay writes an order off with its token).
		_, err = b.stock.ReturnToken(rctx, r.saleID, r.userID, r.orderID, r.tokenID)
	}
	return err == nil
}

// RunRetries retries failed releases with backoff until ctx ends; what is
// still queued then is logged for reconcile. A release waiting out its
// backoff is off the queue (a timer puts it back), so one release that
// keeps failing (its sale's stock not loaded) does not hold up the others.
func (b *Buyer) RunRetries(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if n := b.pendingReleases(); n > 0 {
				b.log.Error("reservations not released at shutdown; units kept reserved until "+untilAbandoned, "count", n)
			}
			return
		case r := <-b.retries:
			b.working.Add(1)
			b.retryRelease(ctx, r)
			b.working.Add(-1)
		}
	}
}

// retryRelease is one of RunRetries' attempts at r; a failed one goes back
// on the queue after its backoff.
func (b *Buyer) retryRelease(ctx context.Context, r release) {
	if b.tryRelease(ctx, r) {
		return
	}
	r.attempts++
	later(&b.releasesBackingOff, min(time.Duration(r.attempts)*100*time.Millisecond, 2*time.Second), func() {
		select {
		case b.retries <- r:
		default:
			b.stranded.Add(1)
			b.log.Error("reservation not released and the retry queue is full; unit kept reserved until "+untilAbandoned,
				"sale", r.saleID, "item", r.itemID, "order", r.orderID)
		}
	})
}

// later runs f after d, counting it in n meanwhile.
func later(n *atomic.Int64, d time.Duration, f func()) {
	n.Add(1)
	time.AfterFunc(d, func() {
		n.Add(-1)
		f()
	})
}

// settleQueue bounds the held orders waiting for PostgreSQL to settle them.
const settleQueue = 4096

// settleAttempts bounds the settlements of one held order (~8 minutes of
// backoff); past it the order is left to reconcile's UUIDv7 age rule.
const settleAttempts = 100

// heldOrder is an order Buy kept reserved, waiting to be settled.
type heldOrder struct {
	o        event.OrderPlaced
	tokenID  string // the admission token its reservation spent ("" if none), given back if abandoned
	attempts int
}

// RunSettles settles again, with backoff, the orders Buy kept reserved
// because neither the broker nor PostgreSQL could say whether they exist:
// once PostgreSQL answers, an abandoned order's unit is given back (its
// REJECTED row now takes the id, so a late copy of the event is ignored)
// and a placed one is left to the order service. Like RunRetries, an order
// waiting out its backoff is off the queue. It runs until ctx ends.
func (b *Buyer) RunSettles(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if n := b.held(); n > 0 {
				b.log.Error("held orders pending at shutdown; units kept reserved until their orders are persisted or "+untilAbandoned, "count", n)
			}
			return
		case h := <-b.unsettled:
			b.working.Add(1)
			b.settleHeld(ctx, h)
			b.working.Add(-1)
		}
	}
}

// settleHeld is one of RunSettles' attempts at h; an unanswered one goes
// back on the queue after its backoff, up to settleAttempts.
func (b *Buyer) settleHeld(ctx context.Context, h heldOrder) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	s, err := b.settler.Settle(sctx, h.o)
	cancel()
	switch {
	case err == nil && s == Abandoned:
		b.releaseReserved(ctx, h.o.SaleID, h.o.ItemID, h.o.UserID, h.o.OrderID.String(), h.tokenID)
		b.log.Info("held order settled as abandoned; unit given back", "order", h.o.OrderID)
		return
	case err == nil && s == Placed:
		// Accepted after all; its admission token stays spent.
		rctx, cancel := context.WithTimeout(ctx, b.redisTimeout)
		b.recordAccepted(rctx, h.o.OrderID.String(), h.o.UserID)
		cancel()
		b.log.Info("held order settled as placed", "order", h.o.OrderID)
		return
	}
	h.attempts++
	if h.attempts >= settleAttempts {
		b.stranded.Add(1)
		b.log.Error("held order still not settled; unit kept reserved until its order is persisted or "+untilAbandoned,
			"sale", h.o.SaleID, "order", h.o.OrderID, "err", err)
		return
	}
	later(&b.settlesBackingOff, min(time.Duration(h.attempts)*200*time.Millisecond, 5*time.Second), func() {
		select {
		case b.unsettled <- h:
		default:
			b.stranded.Add(1)
			b.log.Error("settle queue full; unit kept reserved until its order is persisted or "+untilAbandoned,
				"sale", h.o.SaleID, "order", h.o.OrderID)
		}
	})
}

// Idle reports whether no failed purchase's release or settlement is
// queued, backing off or running: what a shutdown waits for once the HTTP
// drain is over, before it stops RunRetries and RunSettles.
func (b *Buyer) Idle() bool {
	return b.held() == 0 && b.pendingReleases() == 0 && b.working.Load() == 0
}
