package redisconn_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flashsale/pkg/redisconn"
	"flashsale/tools/testenv"
)

// The skew is read from Redis's TIME: about zero on one machine, and the
// shift of a host clock set ahead or behind.
func TestClockSkew(t *testing.T) {
	ctx := testenv.Context(t)
	c := testenv.RedisClient(t, testenv.ThrowawayRedis(t))
	for _, shift := range []time.Duration{0, 20 * time.Second, -90 * time.Second} {
		skew, within, err := redisconn.ClockSkew(ctx, c, func() time.Time { return time.Now().Add(shift) })
		if err != nil {
			t.Fatal(err)
		}
		// Redis's TIME is this machine's clock, read a round trip later.
		if d := (skew - shift).Abs(); d > within+5*time.Millisecond {
			t.Errorf("host clock shifted by %v: skew %v ±%v", shift, skew, within)
		}
	}
}

func TestSkewErr(t *testing.T) {
	tests := []struct {
		skew, within time.Duration
		want         string // "" for no error
	}{
		{0, time.Millisecond, ""},
		{7 * time.Second, 0, ""},
		{-7 * time.Second, 0, ""},
		{8 * time.Second, 2 * time.Second, ""}, // may be within
		{8 * time.Second, 0, "8s ahead of"},
		{-9 * time.Second, 500 * time.Millisecond, "9s behind"},
	}
	for _, tt := range tests {
		err := redisconn.SkewErr(tt.skew, tt.within, 7*time.Second)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("skew %v ±%v: %v, want none", tt.skew, tt.within, err)
		case tt.want != "" && (!errors.Is(err, redisconn.ErrClockSkew) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("skew %v ±%v: %v, want ErrClockSkew saying %q", tt.skew, tt.within, err, tt.want)
		}
	}
}

// A readiness watch fails while the host's clock is off by more than its
// bound, says so once, and passes again once the clock is back.
func TestWatchClock(t *testing.T) {
	ctx := testenv.Context(t)
	c := testenv.RedisClient(t, testenv.ThrowawayRedis(t))
	var logs bytes.Buffer
	w := redisconn.NewWatch(c, 0, 5*time.Second, slog.New(slog.NewTextHandler(&logs, nil)))
	var shift time.Duration
	w.UseClock(func() time.Time { return time.Now().Add(shift) })
	if err := w.Ready(ctx); err != nil {
		t.Fatalf("clocks agree: %v", err)
	}
	shift = -30 * time.Second
	for range 2 {
		if err := w.Ready(ctx); !errors.Is(err, redisconn.ErrClockSkew) || !strings.Contains(err.Error(), "behind") {
			t.Fatalf("host clock 30s behind: %v, want ErrClockSkew", err)
		}
	}
	shift = 0
	if err := w.Ready(ctx); err != nil {
		t.Errorf("clock back: %v", err)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "agrees with Redis's again") {
		t.Errorf("want one error and the recovery logged:\n%s", logs.String())
	}
	off := redisconn.NewWatch(c, 0, 0, slog.New(slog.DiscardHandler))
	off.UseClock(func() time.Time { return time.Now().Add(time.Hour) })
	if err := off.Ready(ctx); err != nil {
		t.Errorf("a watch with no clock bound: %v", err)
	}
}
