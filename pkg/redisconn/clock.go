package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// ErrClockSkew: this host's clock and the Redis server's differ by more
// than a service allows. A gateway's clock is written into every order it
// accepts (the order id's time and placedAt); the order service compares
// those with its own clock and PostgreSQL's: a reservation with no order
// is written off once its id is older than the in-flight window, and a
// payment window runs from placedAt. A gateway whose clock runs behind
// gets its purchases in flight written off as abandoned, and its shoppers
// shorter payment windows. Each service compares its clock with Redis's,
// which they all share, so two services that pass differ from each other
// by at most twice the bound. PostgreSQL's clock, which ends the payment
// windows, the order service measures and exports on its own.
var ErrClockSkew = errors.New("this host's clock differs from Redis's")

// MaxClockSkew is how far a service's clock may be from Redis's: a sixth
// of the in-flight window. A gateway and an order service that both pass
// then differ by at most a third of it, and a purchase in flight (the
// publish timeout and two Redis calls, under half the window when
// FLASHSALE_INFLIGHT_WINDOW is set as advised) is never taken for an
// abandoned one.
func MaxClockSkew(inFlightWindow time.Duration) time.Duration { return inFlightWindow / 6 }

// ClockSkew is how far this host's clock (now) is ahead of the Redis
// server's, behind when negative, from one TIME: the local clock read
// halfway through the round trip against the server's answer. Half the
// round trip is how far off the figure may be; it is returned with it.
func ClockSkew(ctx context.Context, c rueidis.Client, now func() time.Time) (skew, within time.Duration, err error) {
	sent := now()
	vals, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	rtt := now().Sub(sent)
	if err != nil {
		return 0, 0, fmt.Errorf("redis TIME: %w", err)
	}
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("redis TIME: %d values, want 2", len(vals))
	}
	sec, err1 := strconv.ParseInt(vals[0], 10, 64)
	usec, err2 := strconv.ParseInt(vals[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("redis TIME: %w", err)
	}
	server := time.Unix(sec, usec*int64(time.Microsecond/time.Nanosecond))
	return sent.Add(rtt / 2).Sub(server), rtt / 2, nil
}

// skewErr is ErrClockSkew when a skew measured within ±within is surely
// beyond limit either way, nil otherwise.
func skewErr(skew, within, limit time.Duration) error {
	if skew.Abs()-within <= limit {
		return nil
	}
	way := "ahead of"
	if skew < 0 {
		way = "behind"
	}
	return fmt.Errorf("%w: %v %s it (±%v), more than the %v allowed (a sixth of FLASHSALE_INFLIGHT_WINDOW); fix the host's time service",
		ErrClockSkew, skew.Abs().Round(time.Millisecond), way, within.Round(time.Millisecond), limit)
}
