package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"flashsale/pkg/stock"
)

// Watcher keeps the items' live state in step with Redis: it reads the
// units left of every open sale on a timer, and it listens on the
// stock-returned channel so a returned unit clears the sold-out flag at
// once. The timer bounds the delay even if a pub/sub message is lost.
type Watcher struct {
	cat    *Catalog
	client rueidis.Client
	stock  *stock.Store
	log    *slog.Logger
}

// NewWatcher ties a catalog to Redis; st names each item's stock keys.
func NewWatcher(cat *Catalog, client rueidis.Client, st *stock.Store, log *slog.Logger) *Watcher {
	return &Watcher{cat: cat, client: client, stock: st, log: log}
}

// Poll reads units left for every item of sales that have not ended.
func (w *Watcher) Poll(ctx context.Context) error {
	var items []*Item
	var sales []int64 // each item's sale
	var parts []int   // keys per item: 1, or the pool and shards of a sharded item
	var cmds rueidis.Commands
	now := time.Now()
	for _, s := range w.cat.Sales() {
		if !now.Before(s.EndsAt) {
			continue
		}
		for _, it := range s.Items {
			keys, err := w.stock.StockKeys(s.ID, it.ID)
			if err != nil {
				return err
			}
			items = append(items, it)
			sales = append(sales, s.ID)
			parts = append(parts, len(keys))
			for _, k := range keys {
				cmds = append(cmds, w.client.B().Get().Key(k).Build())
			}
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	var errs []error
	dry := map[int64]bool{} // sales with a sharded item that reads sold out
	res := w.client.DoMulti(ctx, cmds...)
	for i, it := range items {
		var left int64
		missing, failed := false, false
		for _, r := range res[:parts[i]] {
			n, err := r.AsInt64()
			switch {
			case rueidis.IsRedisNil(err):
				missing = true
			case err != nil:
				errs = append(errs, err)
				failed = true
			default:
				left += n
			}
		}
		res = res[parts[i]:]
		switch {
		case failed: // keep what was known
		case missing:
			it.live.left.Store(-1) // not loaded: unknown, not zero
		default:
			it.setLeft(left)
			if left == 0 && parts[i] > 1 {
				dry[sales[i]] = true
			}
		}
	}
	// A sharded item's last units may sit in a move journal (a refill cut
	// between its take and its give); with the item reading sold out no
	// refill would land them. Landed, they show at the next poll.
	for saleID := range dry {
		landed, err := w.stock.FinishMoves(ctx, saleID)
		if err != nil {
			errs = append(errs, err)
		} else if landed > 0 {
			w.log.Info("units of moves left halfway landed", "sale", saleID, "units", landed)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("poll stock: %w", errors.Join(errs...))
	}
	return nil
}

// Listen subscribes to stock returns until ctx ends, resubscribing after
// connection errors.
func (w *Watcher) Listen(ctx context.Context) error {
	for {
		err := w.client.Receive(ctx, w.client.B().Subscribe().Channel(stock.ReturnedChannel).Build(),
			func(m rueidis.PubSubMessage) { w.returned(m.Message) })
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("stock-returned subscription lost; resubscribing", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// returned handles "<sale>:<item>" (one unit back) or "<sale>" (reload).
func (w *Watcher) returned(msg string) {
	saleText, itemText, hasItem := strings.Cut(msg, ":")
	saleID, err := strconv.ParseInt(saleText, 10, 64)
	if err != nil {
		return
	}
	s, ok := w.cat.Sale(saleID)
	if !ok {
		return
	}
	if !hasItem {
		for _, it := range s.Items {
			it.live.soldOut.Store(false)
			it.live.left.Store(-1)
		}
		return
	}
	itemID, err := strconv.ParseInt(itemText, 10, 64)
	if err != nil {
		return
	}
	if it, ok := s.Item(itemID); ok {
		it.live.soldOut.Store(false)
		if it.live.left.Load() >= 0 {
			it.live.left.Add(1)
		}
	}
}

// Run refreshes the catalog and polls stock every interval, and listens for
// returns, until ctx ends. The refresh and the poll run on goroutines of
// their own, each pass bounded (passTimeout): a PostgreSQL that stops
// answering must not stop the stock poll, which bounds how long a sold-out
// flag can outlive a returned unit whose announcement was lost.
func (w *Watcher) Run(ctx context.Context, catalogEvery, stockEvery time.Duration) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Listen(ctx) })
	g.Go(func() error {
		w.every(ctx, catalogEvery, w.cat.Refresh, "catalog refresh failed; serving the last one")
		return nil
	})
	g.Go(func() error {
		w.every(ctx, stockEvery, w.Poll, "stock poll failed")
		return nil
	})
	return g.Wait()
}

// every runs pass each interval until ctx ends, logging a failed pass.
func (w *Watcher) every(ctx context.Context, interval time.Duration, pass func(context.Context) error, failed string) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, passTimeout(interval))
		err := pass(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			w.log.Warn(failed, "err", err)
		}
	}
}

// passTimeout bounds one refresh or poll: a dependency that stops answering
// fails the pass, and the next one tries again.
func passTimeout(interval time.Duration) time.Duration { return max(interval, 2*time.Second) }
