package run

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/tools/crowd"
	"flashsale/tools/stackapi"
)

// waitingRoom plays the crowd through the virtual queue: every shopper joins
// before the opening (the pre-queue, drawn at random at the opening), then
// polls at the pace the server asks; each admitted shopper is handed to the
// vegeta targeter with its admission token and buys once.
type waitingRoom struct {
	api      *stackapi.Client
	crowd    *crowd.Crowd
	saleID   int64
	tickets  []string
	admitted chan admittedShopper
	joined   atomic.Int64
	polls    atomic.Int64
	lost     atomic.Int64 // tickets that lost their place or errored
	used     atomic.Int64 // tickets whose admission had already bought (state USED)
}

type admittedShopper struct {
	index int
	token string
	path  string
}

func newWaitingRoom(api *stackapi.Client, cr *crowd.Crowd, saleID int64) *waitingRoom {
	return &waitingRoom{api: api, crowd: cr, saleID: saleID, tickets: make([]string, len(cr.Users)),
		admitted: make(chan admittedShopper, 4096)}
}

// join queues every shopper with `workers` concurrent joins.
func (w *waitingRoom) join(ctx context.Context, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(w.tickets) || ctx.Err() != nil {
					return
				}
				st, err := w.api.JoinQueue(ctx, w.saleID, w.crowd.Tokens[i], crowd.ShopperIP(i))
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					w.lost.Add(1)
					continue
				}
				w.tickets[i] = st.Ticket
				w.joined.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil && w.joined.Load() == 0 {
		return fmt.Errorf("nobody could join the queue: %w", err)
	}
	return nil
}

// poll has every queued shopper poll its ticket until admitted (or the
// deadline), honouring pollAfterMs, and feeds the admitted to the attack.
func (w *waitingRoom) poll(ctx context.Context, workers int, deadline time.Time, soldOut <-chan struct{}) {
	defer close(w.admitted)
	type pending struct {
		i   int
		due time.Time
	}
	queue := make(chan pending, len(w.tickets))
	for i, t := range w.tickets {
		if t != "" {
			queue <- pending{i: i, due: time.Now()}
		}
	}
	var inQueue atomic.Int64
	inQueue.Store(int64(len(queue)))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for inQueue.Load() > 0 && ctx.Err() == nil && time.Now().Before(deadline) {
				var p pending
				select {
				case <-soldOut: // admission stops with the stock; the rest wait in vain
					return
				case p = <-queue:
				case <-time.After(50 * time.Millisecond):
					continue
				}
				if d := time.Until(p.due); d > 0 {
					time.Sleep(min(d, time.Until(deadline)))
				}
				st, err := w.api.QueueStatus(ctx, w.saleID, w.tickets[p.i], w.crowd.Tokens[p.i])
				w.polls.Add(1)
				switch {
				case err != nil:
					w.lost.Add(1)
					inQueue.Add(-1)
				case st.State == "USED":
					// A shopper of this crowd already bought with this
					// ticket (a crowd reused against the same sale): an
					// admission buys once, so she leaves the queue.
					w.used.Add(1)
					inQueue.Add(-1)
				case st.State == "ADMITTED":
					inQueue.Add(-1)
					select {
					case w.admitted <- admittedShopper{index: p.i, token: st.AdmissionToken, path: st.PurchasePath}:
					case <-ctx.Done():
						return
					}
				default:
					wait := time.Duration(max(st.PollAfterMs, 200)) * time.Millisecond
					queue <- pending{i: p.i, due: time.Now().Add(wait)}
				}
			}
		}()
	}
	wg.Wait()
}

// targeter sends each admitted shopper's purchase with its admission token.
func (w *waitingRoom) targeter(baseURL string, items []int64) vegeta.Targeter {
	base := strings.TrimRight(baseURL, "/")
	return func(t *vegeta.Target) error {
		s, ok := <-w.admitted
		if !ok {
			return vegeta.ErrNoTargets
		}
		t.Method = http.MethodPost
		t.URL = base + s.path + "/items/" + strconv.FormatInt(items[s.index%len(items)], 10) +
			"/purchase?" + crowd.ShopperParam + "=" + strconv.Itoa(s.index)
		t.Body = nil
		t.Header = http.Header{
			"Authorization":     []string{"Bearer " + w.crowd.Tokens[s.index]},
			"X-Forwarded-For":   []string{crowd.ShopperIP(s.index)},
			"X-Admission-Token": []string{s.token},
		}
		return nil
	}
}

func (w *waitingRoom) summary(out io.Writer) {
	fmt.Fprintf(out, "queue: %d joined, %d polls, %d lost their place or failed, %d had bought already\n", w.joined.Load(), w.polls.Load(), w.lost.Load(), w.used.Load())
}
