package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// Watch is a service's readiness check of its Redis: the server answers,
// no node may evict the sale's keys (CheckEviction), and this host's clock
// agrees with the server's (ClockSkew). The last two are asked at most
// once per interval (a probe flood costs Redis nothing more), and each
// change between passing and failing is logged once. A node's policy
// changes under a running service with CONFIG SET, or when a replica with
// another configuration takes over; a host's clock when its time service
// fails.
type Watch struct {
	c       rueidis.Client
	every   time.Duration
	maxSkew time.Duration
	log     *slog.Logger
	clock   func() time.Time // the host's clock, compared with Redis's

	mu       sync.Mutex
	at       time.Time
	evictErr error          // nil, or wraps ErrEvicts
	clockErr error          // nil, or wraps ErrClockSkew
	skew     *time.Duration // the last measure, nil before the first
}

// Recheck is how often a readiness probe asks the nodes again.
const Recheck = 10 * time.Second

// NewWatch watches c's nodes, asking them at most once per every, and
// fails while this host's clock differs from Redis's by more than maxSkew
// (0: the clock is not checked).
func NewWatch(c rueidis.Client, every, maxSkew time.Duration, log *slog.Logger) *Watch {
	return &Watch{c: c, every: every, maxSkew: maxSkew, log: log, clock: time.Now}
}

// UseClock makes the watch compare now with Redis's clock instead of
// time.Now: a test's host clock set ahead or behind.
func (w *Watch) UseClock(now func() time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock = now
}

// Run checks every interval until ctx ends, so that a service whose
// readiness nobody probes still logs a change and exports its skew.
func (w *Watch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = w.Err(cctx)
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Collector exports the last measured skew as <namespace>_clock_skew_seconds.
func (w *Watch) Collector(namespace string) prometheus.Collector {
	return &skewCollector{w: w, desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "clock_skew_seconds"),
		"How far this host's clock was ahead of Redis's at the last check (behind when negative); readiness fails past a sixth of FLASHSALE_INFLIGHT_WINDOW.", nil, nil)}
}

type skewCollector struct {
	w    *Watch
	desc *prometheus.Desc
}

func (c *skewCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *skewCollector) Collect(ch chan<- prometheus.Metric) {
	c.w.mu.Lock()
	skew := c.w.skew
	c.w.mu.Unlock()
	if skew != nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, skew.Seconds())
	}
}

// Ready answers a PING, then returns Err.
func (w *Watch) Ready(ctx context.Context) error {
	if err := w.c.Do(ctx, w.c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return w.Err(ctx)
}

// Err returns an error wrapping ErrEvicts while a node may evict keys, or
// ErrClockSkew while the clocks disagree. A node that cannot be reached or
// refuses a question keeps the last answer until the next check: the
// readiness probe's own ping reports an unreachable server.
func (w *Watch) Err(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); w.at.IsZero() || now.Sub(w.at) >= w.every {
		w.at = now
		w.checkEviction(ctx)
		w.checkClock(ctx)
	}
	return errors.Join(w.evictErr, w.clockErr)
}

func (w *Watch) checkEviction(ctx context.Context) {
	err := CheckEviction(ctx, w.c)
	if err != nil && !errors.Is(err, ErrEvicts) {
		return // unknown: keep the last answer, ask again after the interval
	}
	switch {
	case err != nil && w.evictErr == nil:
		w.log.Error("Redis may evict the sale's keys: not ready until every node has maxmemory-policy noeviction", "err", err)
	case err == nil && w.evictErr != nil:
		w.log.Info("Redis no longer evicts keys: ready again")
	}
	w.evictErr = err
}

func (w *Watch) checkClock(ctx context.Context) {
	if w.maxSkew <= 0 {
		return
	}
	skew, within, err := ClockSkew(ctx, w.c, w.clock)
	if err != nil || within > w.maxSkew/2 {
		return // unknown (no answer, or too slow to tell): as above
	}
	w.skew = &skew
	err = skewErr(skew, within, w.maxSkew)
	switch {
	case err != nil && w.clockErr == nil:
		w.log.Error("this host's clock disagrees with Redis's: not ready until they agree", "err", err)
	case err == nil && w.clockErr != nil:
		w.log.Info("this host's clock agrees with Redis's again: ready again", "skew", skew)
	}
	w.clockErr = err
}
