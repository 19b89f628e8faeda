package httpapi

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/ratelimit"
)

// Limits are the token buckets of one route.
type Limits struct {
	User *ratelimit.Limiter
	IP   *ratelimit.Limiter
}

// NewLimits builds a route's limiters.
func NewLimits(user, ip ratelimit.Rule, maxKeys int) Limits {
	return Limits{User: ratelimit.New(user, maxKeys), IP: ratelimit.New(ip, maxKeys)}
}

// NewPollLimits builds the limiter of each shopper's polls of her queue
// ticket, and in a bucket apart of her order requests (proxyOrder,
// myOrder) (FLASHSALE_LIMIT_POLL_USER, 4/s with a burst of 10 by
// default), per user only: a crowd behind one address polls as many
// tickets as it holds. It is not the queue's per-user rule: that one is
// tuned live against join floods, and tightened while a crowd waits it
// refused their polls, so that shoppers who followed the advice lost
// their places past the grace. The advice is never under 500 ms (2 polls
// a second, ratelimit.MinPollRate); the default allows twice that, with
// room for a page reloaded a few times.
func NewPollLimits(user ratelimit.Rule, maxKeys int) Limits {
	return Limits{User: ratelimit.New(user, maxKeys)}
}

// retryAfterText holds "0".."10" so a 429 formats no number.
var retryAfterText = func() (t [11]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

// writeRateLimited answers 429 with a Retry-After in whole seconds.
func writeRateLimited(ctx *fasthttp.RequestCtx, retry time.Duration) {
	secs := int((retry + time.Second - 1) / time.Second)
	secs = max(1, min(secs, 10))
	errRateLimited.WithRetryAfter(retryAfterText[secs]).Write(ctx)
}

// allowIP applies a route's per-IP limit.
func (a *API) allowIP(ctx *fasthttp.RequestCtx, l Limits) bool {
	var buf [16]byte
	ok, retry := l.IP.Allow(ipKey(&buf, a.clientIP(ctx)))
	if !ok {
		a.Metrics.rateLimited.Inc()
		writeRateLimited(ctx, retry)
	}
	return ok
}

// shopper is the caller's verified user id; it answers 401 itself when the
// bearer token does not verify.
func (a *API) shopper(ctx *fasthttp.RequestCtx) (string, bool) {
	user, ok := a.userID(ctx)
	if !ok {
		errUnauthorized.Write(ctx)
	}
	return user, ok
}

// limitedShopper is the door of the queue's join: the route's per-IP
// limit first, so a flood costs no signature check, then the verified
// user, then her per-user limit. It has answered the request when ok is
// false.
func (a *API) limitedShopper(ctx *fasthttp.RequestCtx, l Limits) (string, bool) {
	if !a.allowIP(ctx, l) {
		return "", false
	}
	user, ok := a.shopper(ctx)
	if !ok || !a.allowUser(ctx, l, user) {
		return "", false
	}
	return user, true
}

// allowUser applies a route's per-user limit (none when it has no
// limiter) to the bucket of key: the user's id, or it with a prefix for a
// bucket of hers apart in the same limiter.
func (a *API) allowUser(ctx *fasthttp.RequestCtx, l Limits, key string) bool {
	if l.User == nil {
		return true
	}
	ok, retry := l.User.Allow([]byte(key))
	if !ok {
		a.Metrics.rateLimited.Inc()
		writeRateLimited(ctx, retry)
	}
	return ok
}
