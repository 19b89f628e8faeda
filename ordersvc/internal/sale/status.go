package sale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/adminapi"
)

// Reconcile verdicts, as Status reports them.
const (
	VerdictOK      = "OK"      // Redis agrees with PostgreSQL
	VerdictDrift   = "DRIFT"   // they differ (Repaired says whether Redis was rewritten)
	VerdictLagging = "LAGGING" // a repair was refused: the consumer group had not caught up
	VerdictError   = "ERROR"   // the reconcile failed (Summary says why)
)

// Verdict is the last reconcile of a sale computed by this process.
type Verdict = adminapi.Verdict

// maxVerdicts bounds the sales remembered; the oldest verdict goes.
const maxVerdicts = 256

type verdicts struct {
	mu     sync.Mutex
	bySale map[int64]Verdict
}

func (v *verdicts) put(saleID int64, vd Verdict) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.bySale == nil {
		v.bySale = map[int64]Verdict{}
	}
	if _, ok := v.bySale[saleID]; !ok && len(v.bySale) >= maxVerdicts {
		var oldest int64
		for id, x := range v.bySale {
			if oldest == 0 || x.At.Before(v.bySale[oldest].At) {
				oldest = id
			}
		}
		delete(v.bySale, oldest)
	}
	v.bySale[saleID] = vd
}

func (v *verdicts) get(saleID int64) (Verdict, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vd, ok := v.bySale[saleID]
	return vd, ok
}

// LastVerdict is the last reconcile verdict of the sale in this process.
func (s *Service) LastVerdict(saleID int64) (Verdict, bool) { return s.verdicts.get(saleID) }

// record keeps the verdict of a reconcile, and exports a completed one.
func (s *Service) record(saleID int64, rec Reconciliation, err error) {
	now := time.Now().UTC()
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, context.Canceled):
		return // no sale to speak of; or the caller went away
	case errors.Is(err, lag.ErrLagging):
		s.verdicts.put(saleID, Verdict{At: now, Verdict: VerdictLagging, Summary: err.Error()})
		return
	case err != nil:
		s.verdicts.put(saleID, Verdict{At: now, Verdict: VerdictError, Summary: err.Error()})
		return
	}
	vd := Verdict{At: now, Verdict: VerdictOK, Repaired: rec.Repaired, Summary: summarize(rec)}
	if !rec.Clean {
		vd.Verdict = VerdictDrift
	}
	s.verdicts.put(saleID, vd)
	if s.metrics != nil {
		s.metrics.ObserveReconcile(saleID, metrics.Reconciliation{
			Differences: len(rec.Differences), InFlight: rec.InFlight, Leaked: rec.Leaked, Repaired: rec.Repaired, At: now,
		})
	}
}

// summarize says what a reconcile found in one line.
func summarize(rec Reconciliation) string {
	if rec.Clean {
		return fmt.Sprintf("clean: %d holders, %d active orders, %d in flight", rec.Holders, rec.Active, rec.InFlight)
	}
	kinds := map[string]int{}
	for _, d := range rec.Differences {
		kinds[d.Kind]++
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	line := fmt.Sprintf("%d differences (%s); %d holders, %d active orders, %d in flight, %d leaked",
		len(rec.Differences), strings.Join(parts, ", "), rec.Holders, rec.Active, rec.InFlight, rec.Leaked)
	if rec.Repaired {
		line += "; Redis rewritten from PostgreSQL"
	}
	return line
}

// The dashboard's view of a sale's orders (pkg/adminapi): orders by status
// from PostgreSQL (every status key always present), the consumer group's
// lag, the last reconcile.
type (
	Status     = adminapi.SaleStatus
	ItemStatus = adminapi.ItemStatus
	LagStatus  = adminapi.ConsumerLag
)

// Status reads the sale's order counts (one indexed query) and adds the
// last lag reading and reconcile verdict; ErrNotFound for no sale.
func (s *Service) Status(ctx context.Context, saleID int64) (Status, error) {
	counts, err := s.store.OrdersByStatus(ctx, saleID)
	if err != nil {
		return Status{}, err
	}
	st := Status{SaleID: saleID, OrdersByStatus: zeroCounts(), Items: make([]ItemStatus, 0, len(counts))}
	for _, it := range counts {
		is := ItemStatus{ItemID: it.ItemID, OrdersByStatus: zeroCounts()}
		for status, n := range it.Counts {
			is.OrdersByStatus[status] += n
			st.OrdersByStatus[status] += n
		}
		st.Items = append(st.Items, is)
	}
	st.ConsumerLag = s.lagStatus()
	if vd, ok := s.verdicts.get(saleID); ok {
		st.Reconcile = &vd
	}
	return st, nil
}

func zeroCounts() map[string]int64 {
	m := make(map[string]int64, len(store.Statuses))
	for _, k := range store.Statuses {
		m[k] = 0
	}
	return m
}

func (s *Service) lagStatus() LagStatus {
	ls := LagStatus{Partitions: []lag.PartitionLag{}}
	if s.tracker == nil {
		ls.Error = "consumer lag is not tracked by this process"
		return ls
	}
	rd := s.tracker.Last()
	switch {
	case rd.At.IsZero():
		ls.Error = "consumer lag not read yet"
	case rd.Err != nil:
		ls.Error = fmt.Sprintf("read at %s: %v", rd.At.UTC().Format(time.RFC3339), rd.Err)
	default:
		ls.Total = rd.Lag.Total
		if rd.Lag.Partitions != nil {
			ls.Partitions = rd.Lag.Partitions
		}
	}
	return ls
}

// periodicReconcileTimeout bounds the read-only reconcile of one sale in
// WatchOpenSales.
const periodicReconcileTimeout = 30 * time.Second

// WatchOpenSales reconciles every open sale, read-only, every interval
// until ctx ends: the verdicts reach Status and /metrics, and drift is
// logged for an operator to repair. It never writes to Redis. Every order
// service instance that has it on runs it, each keeping its own verdicts.
func (s *Service) WatchOpenSales(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	s.everyListedSale(ctx, interval, s.store.OpenSales, log, "periodic reconcile: list open sales", func(ids []int64) {
		for _, id := range ids {
			// One sale that hangs (a slow read) must not starve the others.
			rctx, cancel := context.WithTimeout(ctx, periodicReconcileTimeout)
			rec, err := s.Reconcile(rctx, id, false)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("periodic reconcile failed", "sale", id, "err", err)
			case !rec.Clean:
				log.Warn("redis differs from postgres", "sale", id, "differences", len(rec.Differences),
					"inFlight", rec.InFlight, "leaked", rec.Leaked, "summary", summarize(rec))
			}
		}
		if s.metrics != nil {
			// A sale yet to open keeps its series: the reconcile after its
			// load-stock is where a drift shows first.
			live, err := s.store.SalesNotEnded(ctx, time.Now())
			if err != nil {
				log.Warn("periodic reconcile: list sales not ended; every verdict series kept", "err", err)
				return
			}
			s.metrics.RetainReconciles(live)
		}
	})
	return nil
}

// everyListedSale calls pass with the ids of the sales list gives every
// interval until ctx ends. A listing that fails is logged under listFailed
// (a constant message of the caller's) and the pass waits for the next
// tick.
func (s *Service) everyListedSale(ctx context.Context, interval time.Duration, list func(context.Context, time.Time) ([]int64, error),
	log *slog.Logger, listFailed string, pass func(ids []int64)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids, err := list(ctx, time.Now())
		if err != nil {
			if ctx.Err() == nil {
				log.Warn(listFailed, "err", err)
			}
			continue
		}
		pass(ids)
	}
}
