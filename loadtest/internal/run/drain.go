package run

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/tools/crowd"
	"flashsale/tools/stackapi"
)

// waitPersisted polls PostgreSQL until every accepted order has a row and
// returns when that was first seen.
func waitPersisted(ctx context.Context, pool *pgxpool.Pool, accepted map[string]string, timeout time.Duration) (time.Time, error) {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE id = ANY($1::uuid[])`, ids).Scan(&n)
		now := time.Now()
		if err == nil && n == len(ids) {
			return now, nil
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d accepted orders persisted after %v (last error: %v)", n, len(ids), timeout, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// rowWatch samples, over time, how many of the sale's orders PostgreSQL
// holds as sold.
type rowWatch struct {
	mu      sync.Mutex
	samples []rowSample
	cancel  context.CancelFunc
	done    chan struct{}
}

type rowSample struct {
	at   time.Time
	rows int
}

// watchRows reads the sale's sold counters every 10 ms until stop. The
// consumer bumps them in the transaction that inserts the order rows, so
// they count the PENDING rows (every accepted order, until one is paid,
// cancelled or refused by PostgreSQL) for the price of reading one row per
// item. Counting the rows themselves, 100 times a second, cost PostgreSQL
// a millisecond or more each time: CPU taken from the sale it measured, and
// counted in its CPU per order.
func watchRows(ctx context.Context, pool *pgxpool.Pool, saleID int64) *rowWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &rowWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			var n int
			if err := pool.QueryRow(ctx, `SELECT coalesce(sum(sold), 0) FROM flash_sale_item WHERE sale_id = $1`, saleID).Scan(&n); err == nil {
				w.mu.Lock()
				w.samples = append(w.samples, rowSample{time.Now(), n})
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and returns when the count first reached want
// (zero if it never did while watched).
func (w *rowWatch) stop(want int) time.Time {
	w.cancel()
	<-w.done
	for _, s := range w.samples {
		if s.rows >= want {
			return s.at
		}
	}
	return time.Time{}
}

// waitReleases waits (bounded) until the outbox of the sale is drained, so
// the audit sees rejected units returned.
func waitReleases(ctx context.Context, pool *pgxpool.Pool, saleID int64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, saleID).Scan(&n); err == nil && n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pollSample checks up to n accepted orders through the shoppers' polling
// endpoint, as their owners, and counts the statuses seen.
func pollSample(ctx context.Context, api *stackapi.Client, cr *crowd.Crowd, accepted map[string]string, n int) map[string]int {
	var mu sync.Mutex
	seen := map[string]int{}
	asOwners(cr, accepted, n, func(orderID, token string) {
		status := "ERROR"
		if o, err := api.Order(ctx, token, orderID); err == nil {
			status = o.Status
		}
		mu.Lock()
		seen[status]++
		mu.Unlock()
	})
	return seen
}

// payShare pays a share of the winners through the polling origin, as the
// shoppers would, and returns how many payments succeeded.
func payShare(ctx context.Context, api *stackapi.Client, cr *crowd.Crowd, accepted map[string]string, share float64) int {
	var paid atomic.Int64
	asOwners(cr, accepted, int(float64(len(accepted))*share), func(orderID, token string) {
		if err := api.Pay(ctx, token, orderID, "lt-"+orderID); err == nil {
			paid.Add(1)
		}
	})
	return int(paid.Load())
}

// asOwners calls f, from 16 goroutines, for up to n accepted orders (map
// order is random: a fair sample) with the token of the shopper who owns
// each.
func asOwners(cr *crowd.Crowd, accepted map[string]string, n int, f func(orderID, token string)) {
	tokenOf := make(map[string]string, len(cr.Users))
	for i, u := range cr.Users {
		tokenOf[u] = cr.Tokens[i]
	}
	type job struct{ id, token string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range jobs {
				f(j.id, j.token)
			}
		})
	}
	sent := 0
	for id, user := range accepted {
		if sent >= n {
			break
		}
		jobs <- job{id, tokenOf[user]}
		sent++
	}
	close(jobs)
	wg.Wait()
}
