package app

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flashsale/ordersvc/internal/config"
	"flashsale/pkg/redisconn"
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
