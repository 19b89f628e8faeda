package sale

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
)

// Abandonment is what one pass of ReleaseAbandoned did in a sale.
type Abandonment struct {
	SaleID int64
	// Released: reservations written off as REJECTED (abandoned) whose
	// units went to the outbox.
	Released int
	// Unattributed: abandoned reservations whose item the reserve did not
	// note (made before that note existed); left to a reconcile repair.
	Unattributed int
	// Orders are the order ids written off (Released of them).
	Orders []uuid.UUID
}

// ReleaseAbandoned gives back the units of reservations no order will ever
// back: a gateway reserved them in Redis and died before publishing (or
// before settling a publish it could not confirm). Such a holder has no
// order row and no accepted record; it is taken for abandoned only once
// its order id (UUIDv7) is older than the in-flight window, and only after
// the consumer group has caught up with the orders topic, so that an
// order the broker holds is persisted first and its holder kept. Each one
// is then written REJECTED (event.RejectAbandoned) with an outbox row in
// one statement: the row takes the order id, so the order can never appear
// after its unit was sold again, and the relay returns the unit after the
// commit, announcing it on the stock-returned channel like any return, so
// every gateway's sold-out flag clears. The item comes from the note the
// reserve script keeps beside the holder.
//
// A sale whose last pass found every holder with an order row is not read
// again until a holder is added or taken away: a reservation raises its
// slot's holder count, a release gives the slot's holders' version a new
// value (so a reservation in a released holder's place is seen too), and
// a load or a repair sets a new epoch. The pass records in Redis the state it found
// settled (stock.HolderState, MarkSettled), and the record outlives the
// order service: a fresh one does not read every listed sale's holders
// again. A sale this service found settled is asked about again only once
// per in-flight window (one small script per shard): a reservation made
// since is younger than the window, so it is read no later than the first
// pass at which it is overdue, and a dead gateway's unit comes back no
// later than if every pass asked (give or take the clocks of the gateways,
// which mint the order ids).
//
// The holders are read at the pace WithHolderReadRate sets, so a pass over
// many sales' holders takes that long, and the next sale's waits for
// it: at 20,000 holders a second, 190,000 holders took 9.5 s. The pass's
// bound (abandonTimeout) is lengthened by the time that pace allows for
// the sale's holders.
func (s *Service) ReleaseAbandoned(ctx context.Context, saleID int64) (Abandonment, error) {
	now := time.Now()
	if s.settled.within(saleID, now, s.window) {
		return Abandonment{SaleID: saleID}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, abandonCountTimeout)
	st, err := s.stock.HolderState(cctx, saleID)
	cancel()
	if err != nil {
		return Abandonment{SaleID: saleID}, err
	}
	if st.Settled {
		s.settled.mark(saleID, now)
		return Abandonment{SaleID: saleID}, nil
	}
	s.settled.forget(saleID)
	ctx, cancel = context.WithTimeout(ctx, s.readTime(st.Count)+s.abandonTimeout())
	defer cancel()
	holders, err := s.stock.HoldersPaced(ctx, saleID, s.pace)
	if err != nil {
		return Abandonment{SaleID: saleID}, err
	}
	res, err := s.releaseAbandoned(ctx, saleID, holders, now, false)
	if err == nil && s.persisted.hasAll(saleID, holders) {
		// A mark that fails, or finds the sale changed, costs the next
		// pass a read, nothing more.
		_ = s.stock.MarkSettled(ctx, saleID, st)
	}
	return res, err
}

// releaseAbandoned is one pass of ReleaseAbandoned over the holders read,
// taking those whose order id is older than the in-flight window at now.
// caughtUp says the caller saw the consumer group catch up with the topic
// as it was at now (a repair, under the sale's write lock): the pass's own
// wait would add nothing but a second bound.
func (s *Service) releaseAbandoned(ctx context.Context, saleID int64, holders map[string]string, now time.Time, caughtUp bool) (Abandonment, error) {
	res := Abandonment{SaleID: saleID}
	cands := s.overdue(saleID, holders, now)
	if len(cands) == 0 {
		return res, nil
	}
	cands, err := s.unexplained(ctx, saleID, cands, len(holders))
	if err != nil || len(cands) == 0 {
		return res, err
	}
	// An order whose gateway died after the broker's acknowledgement but
	// before its accepted record has only its event to show: once the
	// consumer has caught up it has a row, and the check below keeps it.
	if !caughtUp {
		if err := s.awaitConsumer(ctx); err != nil {
			return res, fmt.Errorf("release abandoned reservations of sale %d: %w", saleID, err)
		}
		if cands, err = s.unexplained(ctx, saleID, cands, len(holders)); err != nil || len(cands) == 0 {
			return res, err
		}
	}
	byUser := make(map[string]string, len(cands))
	for _, c := range cands {
		byUser[c.user] = c.order
	}
	items, err := s.stock.ItemsOf(ctx, saleID, byUser)
	if err != nil {
		return res, err
	}
	plan := make([]store.Abandoned, 0, len(cands))
	for _, c := range cands {
		item, ok := items[c.user]
		if !ok || !event.ValidUserID(c.user) {
			// No item to return the unit to, or a user id the orders table
			// would refuse (and with it the whole statement): a repair's.
			res.Unattributed++
			continue
		}
		plan = append(plan, store.Abandoned{OrderID: c.id, SaleID: saleID, ItemID: item, UserID: c.user, PlacedAt: c.placed})
	}
	written, err := s.store.Abandon(ctx, plan)
	if err != nil {
		return res, err
	}
	res.Released, res.Orders = len(written), written
	if s.drain != nil && len(written) > 0 {
		// A failure leaves the rows queued for the relay's next pass.
		_, _ = s.drain(ctx, written)
	}
	return res, nil
}

// overdueHolder is a holder whose order id is older than the window.
type overdueHolder struct {
	holder
	id     uuid.UUID
	placed time.Time
}

// overdue lists the holders whose order id is older than the in-flight
// window, leaving out those an earlier pass found with a row.
func (s *Service) overdue(saleID int64, holders map[string]string, now time.Time) []overdueHolder {
	var out []overdueHolder
	for user, order := range holders {
		if s.persisted.has(saleID, order) {
			continue
		}
		id, err := uuid.Parse(order)
		if err != nil {
			continue // no gateway mints such an id; reconcile reports it
		}
		placed, ok := placedAt(id)
		if !ok || now.Sub(placed) < s.window {
			continue
		}
		out = append(out, overdueHolder{holder{user, order}, id, placed})
	}
	return out
}

// unexplained keeps the holders that neither an order row nor an accepted
// record explains. When they are at least half of the sale's holders (the
// first pass of a fresh order service, which knows no row yet), the sale's
// order ids are read once instead of looked up one by one: a demo's order
// service, started beside a dozen earlier demos' open sales, spent a
// second of PostgreSQL on the lookups while its own sale sold.
func (s *Service) unexplained(ctx context.Context, saleID int64, hs []overdueHolder, holders int) ([]overdueHolder, error) {
	ids := make([]uuid.UUID, 0, len(hs))
	for _, h := range hs {
		ids = append(ids, h.id)
	}
	rows, err := s.store.OrdersAmong(ctx, saleID, ids, 2*len(ids) >= holders)
	if err != nil {
		return nil, err
	}
	var noRow []overdueHolder
	var plain []holder
	withRow := make([]string, 0, len(rows))
	for _, h := range hs {
		if _, ok := rows[h.id]; ok {
			withRow = append(withRow, h.order)
		} else {
			noRow = append(noRow, h)
			plain = append(plain, h.holder)
		}
	}
	s.persisted.add(saleID, withRow)
	owners, err := s.acceptedOwners(ctx, plain)
	if err != nil {
		return nil, err
	}
	var out []overdueHolder
	for _, h := range noRow {
		if _, ok := owners[h.order]; !ok {
			out = append(out, h)
		}
	}
	return out, nil
}

// abandonTimeout bounds one sale's pass beyond the time its holders' read
// may take (readTime); the consumer catch-up wait is inside it.
func (s *Service) abandonTimeout() time.Duration { return 30*time.Second + s.CatchUpTimeout() }

// abandonCountTimeout bounds the read of the holders' state that starts a
// sale's pass.
const abandonCountTimeout = 5 * time.Second

// readTime is how long reading n holders may take at the pace set by
// WithHolderReadRate, with a page to spare for each shard a sale may have.
func (s *Service) readTime(n int64) time.Duration {
	if s.readRate <= 0 {
		return 0
	}
	pages := n/stock.HoldersPage + stock.MaxShards
	return time.Duration(pages) * time.Duration(stock.HoldersPage) * time.Second / time.Duration(s.readRate)
}

// WatchAbandoned runs ReleaseAbandoned, every interval until ctx ends,
// over every sale in play (store.SalesInPlay) that has been open for at
// least the in-flight window, logging one line per sale where it released
// something. Several order service instances may run it at once: the
// REJECTED row is written once per order id, and the relay drains each
// outbox row once.
func (s *Service) WatchAbandoned(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	if s.accepted == nil {
		return ErrNoAcceptedRecords
	}
	stuck := map[int64]int{} // sale -> abandoned reservations of unknown item, at the last pass
	// A sale open for less than the window has no overdue holder: a
	// gateway reserves only once the sale has opened by its clock, and the
	// order id carries the same clock's time. Its holders are not read
	// until then, so a pass never reads a flash sale's holders while it
	// sells out in its first seconds (a page of holders holds Redis's one
	// thread for about a millisecond, and every reservation behind it
	// waits). A starts_at moved later by hand, with gateways still on the
	// old catalog, delays such a release by at most the window.
	//
	// A sale stays listed after its end for its payment window and the
	// in-flight window, as long as its copy in Redis keeps no expiry
	// (ExpireHotCopies): a reservation made in its last moments is overdue
	// a window after the end, and a pass may run late or fail meanwhile
	// (the consumer lagging, PostgreSQL down). Once settled, an ended sale
	// costs a pass one small script per shard per window. Its unit back in
	// stock sells nothing once the sale has ended, but the holder is
	// released and its order written off, as in an open sale, rather than
	// left to an operator's repair.
	list := func(ctx context.Context, now time.Time) ([]int64, error) {
		return s.store.SalesInPlay(ctx, now, s.window, s.window)
	}
	s.everyListedSale(ctx, interval, list, log, "abandoned reservations: list sales in play", func(ids []int64) {
		s.persisted.keep(ids)
		s.settled.keep(ids)
		var unattributed int
		for _, id := range ids {
			res, err := s.ReleaseAbandoned(ctx, id)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				log.Warn("abandoned reservations not released", "sale", id, "err", err)
				continue
			}
			if s.metrics != nil {
				s.metrics.AbandonedReleased.Add(float64(res.Released))
			}
			unattributed += res.Unattributed
			if res.Released > 0 {
				log.Info("abandoned reservations released", "sale", id, "released", res.Released, "window", s.window)
			}
			// The same holders come back every pass until a repair: say so
			// when their number changes, not every interval.
			if res.Unattributed != stuck[id] {
				if res.Unattributed > 0 {
					log.Warn("abandoned reservations of unknown item; repair the sale: ordersvc reconcile --sale ID --repair, or POST /admin/sales/ID/reconcile?repair=true", "sale", id, "count", res.Unattributed)
				}
				stuck[id] = res.Unattributed
			}
		}
		if s.metrics != nil {
			s.metrics.AbandonedUnattributed.Set(float64(unattributed))
		}
	})
	return nil
}

// persisted remembers, per sale in play, the holders' order ids already seen
// with an order row. A row is never deleted, so such a holder is explained
// for good and later passes need not ask PostgreSQL about it again. Without
// it every pass re-read every holder of every open sale: with a few dozen
// 10,000-unit sales open (an afternoon of demos and tests), 20% of a core
// between the order service, PostgreSQL and Redis, all the time.
type persisted struct {
	mu    sync.Mutex
	sales map[int64]map[string]struct{}
}

func (p *persisted) has(saleID int64, orderID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.sales[saleID][orderID]
	return ok
}

func (p *persisted) add(saleID int64, orderIDs []string) {
	if len(orderIDs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sales == nil {
		p.sales = map[int64]map[string]struct{}{}
	}
	ids := p.sales[saleID]
	if ids == nil {
		ids = make(map[string]struct{}, len(orderIDs))
		p.sales[saleID] = ids
	}
	for _, id := range orderIDs {
		ids[id] = struct{}{}
	}
}

// hasAll reports whether every holder's order is known to have a row.
func (p *persisted) hasAll(saleID int64, holders map[string]string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.sales[saleID]
	for _, order := range holders {
		if _, ok := ids[order]; !ok {
			return false
		}
	}
	return true
}

// keep forgets the sales not in listed (the watch no longer reads them).
func (p *persisted) keep(listed []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keepListed(p.sales, listed)
}

// keepListed deletes from a per-sale memo the sales not in listed.
func keepListed[V any](sales map[int64]V, listed []int64) {
	for id := range sales {
		if !slices.Contains(listed, id) {
			delete(sales, id)
		}
	}
}

// settled remembers, per sale in play, when a pass last found its holders in
// the state recorded settled in Redis (see ReleaseAbandoned).
type settled struct {
	mu    sync.Mutex
	sales map[int64]time.Time
}

// within reports whether the sale was found settled less than d before now.
func (s *settled) within(saleID int64, now time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.sales[saleID]
	return ok && now.Sub(at) < d
}

func (s *settled) mark(saleID int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sales == nil {
		s.sales = map[int64]time.Time{}
	}
	s.sales[saleID] = now
}

func (s *settled) forget(saleID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sales, saleID)
}

// keep forgets the sales not in listed.
func (s *settled) keep(listed []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keepListed(s.sales, listed)
}
