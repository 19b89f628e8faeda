// Package sale is what operators do to a sale, shared by the CLI and the
// admin API: create it from validated input, load its hot copy into Redis
// from PostgreSQL, and describe it with both views side by side.
package sale

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/adminapi"
	"flashsale/pkg/stock"
)

// ErrInvalid marks operator input that cannot become a sale; the message
// lists every problem.
var ErrInvalid = errors.New("invalid sale")

// ErrWriting: another repair or load-stock of the sale is rewriting its
// Redis copy now (in this instance or another); ask again when it is done.
var ErrWriting = errors.New("sale: another repair or load-stock of this sale is running")

// ErrLive refuses a load-stock of a sale that is open and whose stock is
// already in Redis: the load sets the numbers from PostgreSQL, so it would
// drop the reservations still on their way through Kafka (their shoppers
// could buy again, and their units be sold twice over, refused only by
// PostgreSQL after a 202). A repair (Reconcile with repair) keeps them;
// load-stock with force rewrites anyway.
var ErrLive = errors.New("sale: open and its stock already loaded; a load would drop the reservations in flight (repair it with reconcile, which keeps them, or force the load)")

// Limits of the input, matching the table constraints.
const (
	MaxNameLen    = 200
	MaxItems      = 1000
	MaxQuantity   = 1<<31 - 1 // integer column
	MaxPaymentTTL = 24 * time.Hour
	// MaxSaleLength bounds a sale's window: an open sale is reconciled,
	// listed by the retention pass and kept in Redis until it ends.
	MaxSaleLength = 366 * 24 * time.Hour
)

// The instants a sale may start and end between, in UTC. Go's JSON
// encoding refuses years outside 0..9999, and a time zone can carry a
// time written as 9999-12-31 into the year 10000: such a sale was stored,
// then every answer showing it failed with 500 (the create-sale itself,
// the gateway's sale page and its dashboard while it was among the
// newest).
var (
	earliestSaleTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latestSaleTime   = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// numeric(12,2): up to 10 integer digits and 2 decimals, never a float.
var priceRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,9})(\.[0-9]{1,2})?$`)

// Validate reports every problem of ns at once, wrapped in ErrInvalid.
func Validate(ns store.NewSale) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	checkText := func(field, v string, min int) {
		n := utf8.RuneCountInString(v)
		switch {
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			fail("%s: not valid text", field)
		case n < min || n > MaxNameLen:
			fail("%s: want %d..%d characters, got %d", field, min, MaxNameLen, n)
		}
	}
	checkText("name", ns.Name, 1)
	if ns.StartsAt.IsZero() {
		fail("startsAt: required")
	}
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"startsAt", ns.StartsAt}, {"endsAt", ns.EndsAt}} {
		if !t.at.IsZero() && (t.at.Before(earliestSaleTime) || t.at.After(latestSaleTime)) {
			fail("%s: want a time between %s and %s (UTC), got %s", t.field,
				earliestSaleTime.Format(time.DateOnly), latestSaleTime.Format(time.DateOnly), t.at.UTC().Format(time.RFC3339))
		}
	}
	if ns.EndsAt.Sub(ns.StartsAt) > MaxSaleLength {
		fail("endsAt: a sale lasts at most %s, got %s", MaxSaleLength, ns.EndsAt.Sub(ns.StartsAt))
	}
	// PostgreSQL keeps microseconds: a window shorter than that passed
	// here and failed the table's check, answered 503 as if to be retried.
	if !ns.EndsAt.Truncate(time.Microsecond).After(ns.StartsAt.Truncate(time.Microsecond)) {
		fail("endsAt: must be after startsAt (by a microsecond at least)")
	}
	if ns.PaymentTTL < time.Second || ns.PaymentTTL > MaxPaymentTTL {
		fail("paymentTtl: want 1s..%s, got %s", MaxPaymentTTL, ns.PaymentTTL)
	}
	if ns.Queue.AdmissionRate < 0 || ns.Queue.AdmissionRate > 1_000_000 {
		fail("queue.admissionRate: want 0..1000000 per second, got %d", ns.Queue.AdmissionRate)
	}
	if ns.Queue.PowDifficulty < 0 || ns.Queue.PowDifficulty > 32 {
		fail("queue.powDifficulty: want 0..32 bits, got %d", ns.Queue.PowDifficulty)
	}
	if ns.StockShards < 0 || ns.StockShards > stock.MaxShards {
		fail("stockShards: want 1..%d (0 means 1), got %d", stock.MaxShards, ns.StockShards)
	}
	if len(ns.Items) == 0 || len(ns.Items) > MaxItems {
		fail("items: want 1..%d, got %d", MaxItems, len(ns.Items))
	}
	for i, it := range ns.Items {
		checkText(fmt.Sprintf("items[%d].name", i), it.Name, 1)
		checkText(fmt.Sprintf("items[%d].productId", i), it.ProductID, 0)
		if !priceRE.MatchString(it.Price) {
			fail("items[%d].price: want a decimal with at most 2 decimals, got %q", i, it.Price)
		}
		if it.Quantity < 0 || it.Quantity > MaxQuantity {
			fail("items[%d].quantity: want 0..%d, got %d", i, int64(MaxQuantity), it.Quantity)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// Service runs the operator actions.
type Service struct {
	store    *store.Store
	stock    *stock.Store
	accepted rueidis.Client // the gateway's accepted-order records; nil when not needed
	settle   time.Duration
	window   time.Duration // see WithInFlightWindow
	// drain returns released units through the outbox now; nil: the
	// relay's next pass does.
	drain func(ctx context.Context, orderIDs []uuid.UUID) (int, error)

	lag     *lag.Reader // nil: stock is computed without waiting for the consumer
	catchUp time.Duration
	tracker *lag.Tracker      // periodic lag readings for Status; nil: none
	metrics *metrics.Counters // reconcile verdicts exported; nil: none

	// beforeWrite, when set (tests only: export_test.go), runs between a
	// repair's decision and its write.
	beforeWrite func()

	verdicts verdicts
	// readRate and pace: holders a second the abandoned-reservation pass
	// reads (WithHolderReadRate); 0 and nil: no pacing. The pace is not
	// safe for concurrent use: only WatchAbandoned's one loop calls
	// ReleaseAbandoned.
	readRate int
	pace     stock.Pacer

	persisted persisted // holders known to have an order row (abandon.go)
	settled   settled   // sales last found settled, and when (abandon.go)
}

// NewService builds a service.
func NewService(st *store.Store, stk *stock.Store, opts ...Option) *Service {
	s := &Service{store: st, stock: stk, settle: DefaultSettle, window: InFlightWindow}
	for _, o := range opts {
		o(s)
	}
	return s
}

// CatchUpTimeout is how long LoadStock and a repair may wait for the
// consumer group (0 when they do not wait); callers size their own
// deadlines with it.
func (s *Service) CatchUpTimeout() time.Duration {
	if s.lag == nil {
		return 0
	}
	return s.catchUp
}

// awaitConsumer returns once the consumer group has committed every order
// that was in the orders topic when it was called, or a *lag.LaggingError
// past the catch-up bound. Stock computed from PostgreSQL before that would
// put the units of orders still in Kafka on sale again: after a Redis loss
// nothing else remembers them (their holders and accepted records are
// gone). While a stock key is missing the gateways refuse every purchase
// of the sale, so no new order of it enters the topic meanwhile.
func (s *Service) awaitConsumer(ctx context.Context) error {
	if s.lag == nil {
		return nil
	}
	if _, err := s.lag.WaitCaughtUp(ctx, s.catchUp); err != nil {
		return fmt.Errorf("wait for the order consumer: %w", err)
	}
	return nil
}

// Create validates and stores a sale.
func (s *Service) Create(ctx context.Context, ns store.NewSale) (View, error) {
	if err := Validate(ns); err != nil {
		return View{}, err
	}
	sale, err := s.store.CreateSale(ctx, ns)
	if err != nil {
		return View{}, err
	}
	return viewOf(sale), nil
}

// MaxIdempotencyKeyLen bounds an idempotency key (the column's check).
const MaxIdempotencyKeyLen = 255

// ErrKeyReused: the idempotency key already made a sale from another
// request (store.ErrKeyReused).
var ErrKeyReused = store.ErrKeyReused

// CreateOnce is Create under the operator's idempotency key: a retry of a
// request whose answer was lost gets the sale the first one made, with
// replayed true, instead of a second sale. The same key with another
// request gets ErrKeyReused. An empty key is Create.
func (s *Service) CreateOnce(ctx context.Context, key string, ns store.NewSale) (v View, replayed bool, err error) {
	if key == "" {
		v, err = s.Create(ctx, ns)
		return v, false, err
	}
	if err := validKey(key); err != nil {
		return View{}, false, err
	}
	if err := Validate(ns); err != nil {
		return View{}, false, err
	}
	sale, replayed, err := s.store.CreateSaleOnce(ctx, key, ns)
	if err != nil {
		return View{}, false, err
	}
	return viewOf(sale), replayed, nil
}

// validKey accepts 1 to MaxIdempotencyKeyLen visible ASCII characters (a
// UUID, a job name and run number, ...).
func validKey(key string) error {
	if len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("%w: idempotency key: at most %d characters, got %d", ErrInvalid, MaxIdempotencyKeyLen, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: idempotency key: visible ASCII characters only (byte %d is 0x%02x)", ErrInvalid, i, c)
		}
	}
	return nil
}

// LoadResult is what load-stock wrote to Redis (pkg/adminapi).
type LoadResult = adminapi.LoadResult

// LoadedItem is the stock written for one item.
type LoadedItem = adminapi.LoadedItem

// LoadStock writes the sale's hot copy into Redis from one PostgreSQL
// snapshot: per item quantity minus active orders, and the active holders.
// It sets, never adds, so loading twice gives the same numbers. It is the
// warm-up step, and the repair of a copy that is gone (a Redis flushed or
// replaced). Run during a live sale it would also erase reservations not yet
// persisted, so an open sale whose stock is loaded gets ErrLive unless
// force is set; the repair that keeps them is Reconcile. It first waits for
// the consumer group to catch up (see awaitConsumer).
func (s *Service) LoadStock(ctx context.Context, saleID int64, force bool) (LoadResult, error) {
	unlock, err := s.lockWrites(ctx, saleID)
	if err != nil {
		return LoadResult{}, fmt.Errorf("load stock of sale %d: %w", saleID, err)
	}
	defer unlock()
	if err := s.awaitConsumer(ctx); err != nil {
		return LoadResult{}, fmt.Errorf("load stock of sale %d: %w", saleID, err)
	}
	snap, err := s.store.StockSnapshot(ctx, saleID)
	if err != nil {
		return LoadResult{}, err
	}
	// After the wait, which can be long: a sale may have opened meanwhile.
	if !force {
		if err := s.refuseLive(ctx, snap.Sale); err != nil {
			return LoadResult{}, fmt.Errorf("load stock of sale %d: %w", saleID, err)
		}
	}
	// The admissions first: until the stock is loaded no purchase can
	// spend one of them again.
	if err := s.stock.RestoreSpent(ctx, saleID, snap.Spent); err != nil {
		return LoadResult{}, err
	}
	if err := s.stock.Load(ctx, saleID, snap.Items, snap.Holders); err != nil {
		return LoadResult{}, err
	}
	if _, err := s.requeueEnded(ctx, saleID, snap.Holders); err != nil {
		return LoadResult{}, fmt.Errorf("load stock of sale %d: %w", saleID, err)
	}
	res := LoadResult{SaleID: saleID, Items: make([]LoadedItem, 0, len(snap.Items)), Holders: len(snap.Holders), SpentAdmissions: len(snap.Spent)}
	for _, it := range snap.Items {
		res.Items = append(res.Items, LoadedItem{ItemID: it.ItemID, Left: it.Left})
	}
	return res, nil
}

// liveBefore is how long before its opening a sale counts as live for
// refuseLive: the gateways' clocks may run ahead of this one.
const liveBefore = 5 * time.Second

// refuseLive returns ErrLive when the sale may have reservations in flight
// and its stock is in Redis. It may from liveBefore its opening until its
// end plus the in-flight window (purchases accepted just before the end
// still reach the broker and the consumer then). Stock is in Redis when
// any item's stock reads, or any shopper holds a unit: a sharded item
// that lost one shard reads as not loaded while the others still sell.
func (s *Service) refuseLive(ctx context.Context, sale store.Sale) error {
	saleID := sale.ID
	now := time.Now()
	if now.Before(sale.StartsAt.Add(-liveBefore)) || now.After(sale.EndsAt.Add(s.window)) {
		return nil
	}
	for _, it := range sale.Items {
		_, err := s.stock.Left(ctx, saleID, it.ID)
		switch {
		case err == nil:
			return ErrLive
		case !errors.Is(err, stock.ErrNotLoaded):
			return fmt.Errorf("is its stock loaded: %w", err)
		}
	}
	holders, err := s.stock.HolderCount(ctx, saleID)
	if err != nil {
		return fmt.Errorf("is its stock loaded: %w", err)
	}
	if holders > 0 {
		return ErrLive
	}
	return nil
}

// Describe reads the sale from PostgreSQL and the stock left from Redis.
func (s *Service) Describe(ctx context.Context, saleID int64) (View, error) {
	sale, err := s.store.GetSale(ctx, saleID)
	if err != nil {
		return View{}, err
	}
	v := viewOf(sale)
	for i := range v.Items {
		left, err := s.stock.Left(ctx, saleID, v.Items[i].ID)
		loaded := err == nil
		switch {
		case errors.Is(err, stock.ErrNotLoaded):
		case err != nil:
			return View{}, err
		default:
			v.Items[i].Left = &left
		}
		v.Items[i].StockLoaded = &loaded
	}
	// A count, not the holders: reading a big sale's holders for an
	// operator's view would cost Redis a page per thousand of them.
	count, err := s.stock.HolderCount(ctx, saleID)
	if err != nil {
		return View{}, err
	}
	n := int(count)
	v.Holders = &n
	return v, nil
}

// requeueEnded runs again the releases of the orders a copy just written
// into Redis holds a unit for, if any of them ended after the copy was read
// from PostgreSQL: their releases ran before the copy, found no holder (or
// the stock paused), and the copy then brought the holder back, blocking
// its shopper and keeping a unit nobody holds. Only ended orders have
// outbox rows, and a release is keyed by order id, so one that finds
// nothing to do is harmless. It returns how many it requeued.
func (s *Service) requeueEnded(ctx context.Context, saleID int64, kept []stock.Holder) (int, error) {
	ids := make([]uuid.UUID, 0, len(kept))
	for _, h := range kept {
		if id, err := uuid.Parse(h.OrderID); err == nil {
			ids = append(ids, id)
		}
	}
	n, err := s.requeue(ctx, saleID, ids)
	if err != nil {
		return 0, fmt.Errorf("the releases of orders that ended while the copy was written were not requeued: %w", err)
	}
	return n, nil
}

// requeue marks the done releases of orderIDs to run again and drains
// them now when the service has the relay (a failure leaves them queued
// for its next pass); it returns how many it requeued.
func (s *Service) requeue(ctx context.Context, saleID int64, orderIDs []uuid.UUID) (int, error) {
	requeued, err := s.store.RequeueReleases(ctx, saleID, orderIDs)
	if err != nil {
		return 0, err
	}
	if len(requeued) > 0 && s.drain != nil {
		_, _ = s.drain(ctx, requeued)
	}
	return len(requeued), nil
}

// lockWrites takes the sale's write lock (store.LockSaleWrites), or
// ErrWriting while another holds it.
func (s *Service) lockWrites(ctx context.Context, saleID int64) (unlock func(), err error) {
	unlock, ok, err := s.store.LockSaleWrites(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrWriting
	}
	return unlock, nil
}
