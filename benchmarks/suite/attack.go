package suite

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/tools/crowd"
	"flashsale/tools/herd"
	"flashsale/tools/outcome"
)

// tallied is one attack's results.
type tallied struct {
	outcome.Tally
	bounded bool // the time bound stopped it before the crowd was through
}

func (t *tallied) counts() map[string]int {
	m := map[string]int{}
	for _, k := range outcome.Kinds() {
		if t.Count[k] > 0 {
			m[k.String()] = t.Count[k]
		}
	}
	return m
}

// attack sends the whole crowd, each shopper once, through the herd h,
// with the same generator settings for every target: a closed loop of
// Workers requests in flight over at most Connections keep-alive
// connections, stopped by the crowd's end or by Bound, whichever comes
// first. soldOut, when not nil, is called once, at the answer that accepts
// the quantity-th order.
func (r *runner) attack(ctx context.Context, h *herd.Herd, name, baseURL, purchasePath string, items []int64, quantity int, soldOut func()) *tallied {
	atk := h.Attacker()
	pacer := crowd.Limit(vegeta.Rate{Freq: 0}, uint64(r.o.Shoppers)) // as fast as the loop goes
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-actx.Done(); atk.Stop() }()

	var done atomic.Int64
	stop := tick(actx, func(elapsed time.Duration, n, perSec int64) {
		fmt.Fprintf(r.progress, "bench:   %-11s %3.0fs %8d requests %7d/s\n", name, elapsed.Seconds(), n, perSec)
	}, &done)
	t := &tallied{}
	accepted := 0
	for res := range atk.Attack(r.crowd.Targeter(baseURL, purchasePath, items), pacer, r.o.Bound, name) {
		if res.Method == "" { // the targeter ran dry; nothing was sent
			continue
		}
		if k, _ := t.Add(res); k == outcome.Accepted {
			if accepted++; accepted == quantity && soldOut != nil {
				soldOut()
			}
		}
		done.Add(1)
	}
	stop()
	t.bounded = t.Total() < r.o.Shoppers && ctx.Err() == nil
	all := t.LatencyAll()
	fmt.Fprintf(r.progress, "bench:   %-11s done: %d requests in %.2fs, p50 %s p99 %s, %v\n",
		name, t.Total(), t.Last.Sub(t.First).Seconds(), all.P50.Round(time.Microsecond), all.P99.Round(time.Microsecond), t.counts())
	return t
}

// tick calls f once a second with the requests done so far.
func tick(ctx context.Context, f func(elapsed time.Duration, n, perSec int64), done *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var prev int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n := done.Load()
				f(time.Since(start), n, n-prev)
				prev = n
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// warm sends one purchase with a token outside the crowd and checks its
// status (0: any answer will do).
func (r *runner) warm(ctx context.Context, baseURL, purchasePath string, itemID int64, want int) error {
	u := baseURL + purchasePath + "/items/" + strconv.FormatInt(itemID, 10) + "/purchase"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.warmup)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("warm-up request: %w", err)
	}
	resp.Body.Close()
	if want != 0 && resp.StatusCode != want {
		return fmt.Errorf("warm-up request: HTTP %d, want %d", resp.StatusCode, want)
	}
	return nil
}
