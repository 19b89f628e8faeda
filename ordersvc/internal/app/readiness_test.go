package app

import (
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/redisconn"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

// The service's Redis readiness fails while this host's clock is further
// from Redis's than a sixth of the in-flight window: the abandoned-
// reservation pass and the payment windows compare the gateways' clocks
// with this one.
func TestReadinessFollowsTheClock(t *testing.T) {
	rc := testenv.RedisClient(t, testenv.ThrowawayRedis(t))
	check := newRedisCheck(rc, config.Config{InFlightWindow: 30 * time.Second}, slog.New(slog.DiscardHandler))
	check.w.UseClock(func() time.Time { return time.Now().Add(-10 * time.Second) })
	if err := check.Ready(); !errors.Is(err, redisconn.ErrClockSkew) || !strings.Contains(err.Error(), "behind") {
		t.Errorf("readiness with the clock 10s behind Redis's (window 30s, so 5s allowed): %v, want ErrClockSkew", err)
	}
	fine := newRedisCheck(rc, config.Config{InFlightWindow: 30 * time.Second}, slog.New(slog.DiscardHandler))
	fine.w.UseClock(func() time.Time { return time.Now().Add(3 * time.Second) })
	if err := fine.Ready(); err != nil {
		t.Errorf("readiness with the clock 3s ahead (window 30s, so 5s allowed): %v", err)
	}
}

// PostgreSQL's clock is measured for /metrics: about this host's on one
// machine.
func TestPostgresClockIsMeasured(t *testing.T) {
	testenv.Require(t, testenv.PostgresAddr())
	pool, err := pgxpool.New(testenv.Context(t), testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := metrics.New()
	measurePostgresClock(store.New(pool), m, slog.New(slog.DiscardHandler))(testenv.Context(t))
	fams, err := scrape.Gather(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fams.Value("flashsale_ordersvc_postgres_clock_skew_seconds"); !ok || math.Abs(v) > 0.1 {
		t.Errorf("postgres_clock_skew_seconds: %v (present %v), want about 0 on one machine", v, ok)
	}
}
