package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/ratelimit"
	"flashsale/pkg/adminapi"
	"flashsale/pkg/adminauth"
	"flashsale/pkg/event"
)

// admin wraps an operator endpoint with the admin credential check every
// admin listener shares (pkg/adminauth: 401 with a Bearer challenge).
func (a *API) admin(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return adminauth.New(a.AdminToken).Wrap(h)
}

func (a *API) getLimits(ctx *fasthttp.RequestCtx) {
	rule := func(l *ratelimit.Limiter) *adminapi.Rule { r := adminapi.Rule(l.Rule()); return &r }
	writeJSON(ctx, fasthttp.StatusOK, adminapi.Limits{
		Purchase: adminapi.RouteLimits{User: rule(a.PurchaseLimits.User), IP: rule(a.PurchaseLimits.IP)},
		Queue:    adminapi.RouteLimits{User: rule(a.QueueLimits.User), IP: rule(a.QueueLimits.IP)},
		Poll:     adminapi.UserLimits{User: rule(a.PollLimits.User)}})
}

// putLimits changes this gateway's limits live; omitted rules stay.
// Limits are per gateway instance: operators set each one.
func (a *API) putLimits(ctx *fasthttp.RequestCtx) {
	var v adminapi.Limits
	if err := decodeObject(ctx.PostBody(), &v); err != nil {
		errBadRequest.Write(ctx)
		return
	}
	for _, r := range []*adminapi.Rule{v.Purchase.User, v.Purchase.IP, v.Queue.User, v.Queue.IP} {
		if r != nil && ratelimit.Rule(*r).Validate() != nil {
			errBadRequest.Write(ctx)
			return
		}
	}
	if r := v.Poll.User; r != nil && ratelimit.ValidatePoll(ratelimit.Rule(*r)) != nil {
		errBadRequest.Write(ctx)
		return
	}
	set := func(l *ratelimit.Limiter, r *adminapi.Rule) {
		if r != nil {
			l.SetRule(ratelimit.Rule(*r))
		}
	}
	set(a.PurchaseLimits.User, v.Purchase.User)
	set(a.PurchaseLimits.IP, v.Purchase.IP)
	set(a.QueueLimits.User, v.Queue.User)
	set(a.QueueLimits.IP, v.Queue.IP)
	set(a.PollLimits.User, v.Poll.User)
	a.Log.Info("rate limits changed by operator", "limits", string(ctx.PostBody()))
	a.getLimits(ctx)
}

func (a *API) getQueue(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	c, cancel := context.WithTimeout(a.BaseCtx, a.RedisTimeout)
	defer cancel()
	rate, set, err := a.Queue.Rate(c, s.ID)
	if err != nil {
		errUnavailable.Write(ctx)
		return
	}
	if !set {
		rate = s.Queue.AdmissionRate
	}
	admitted, _, err := a.Queue.Advance(c, s.ID, s.StartsAt, rate, s.StateAt(a.Now()) == "SOLD_OUT")
	if err != nil {
		errUnavailable.Write(ctx)
		return
	}
	l, err := a.Queue.Size(c, s.ID)
	if err != nil {
		errUnavailable.Write(ctx)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, adminapi.QueueState{SaleID: s.ID, AdmittedUpTo: admitted, AdmissionRate: rate,
		QueueLength: l.Waiting, Joined: l.Joined,
		PowDifficulty: s.Queue.PowDifficulty, Draw: s.Queue.Draw, OpensAt: s.StartsAt.UTC()})
}

// The admission rates an operator may set: 0 stops admitting; otherwise
// at least one place in about 17 minutes, at most what a sale may be
// created with. A rate near 0 made every waiting shopper's ETA overflow
// (1e-300 per second: -9223372036854775808 seconds), and one past the
// bound was refused at creation but taken here.
const (
	minAdmissionRate = 1e-3
	maxAdmissionRate = 1e6
)

// putAdmissionRate sets a sale's admission rate for every gateway.
func (a *API) putAdmissionRate(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	var v adminapi.AdmissionRateChange
	if err := decodeObject(ctx.PostBody(), &v); err != nil || v.Rate == nil ||
		*v.Rate != 0 && (*v.Rate < minAdmissionRate || *v.Rate > maxAdmissionRate) {
		errBadRequest.Write(ctx)
		return
	}
	c, cancel := context.WithTimeout(a.BaseCtx, a.RedisTimeout)
	defer cancel()
	if err := a.Queue.SetRate(c, s.ID, *v.Rate); err != nil {
		errUnavailable.Write(ctx)
		return
	}
	a.SetAdmissionRate(s.ID, *v.Rate)
	a.Log.Info("admission rate changed by operator", "sale", s.ID, "rate", *v.Rate)
	writeJSON(ctx, fasthttp.StatusOK, adminapi.AdmissionRate{SaleID: s.ID, AdmissionRate: *v.Rate})
}

// Bypass users are shared by every gateway through Redis; see BypassStore.
func (a *API) getBypass(ctx *fasthttp.RequestCtx) {
	m := a.bypass.Load()
	users := []string{}
	if m != nil {
		for u := range *m {
			users = append(users, u)
		}
	}
	sort.Strings(users)
	writeJSON(ctx, fasthttp.StatusOK, adminapi.Bypass{Users: users})
}

// putBypass adds and removes shared bypass users. An added user id must be
// one a token's subject can be (event.ValidUserID: no token matches an
// empty, overlong or control-bearing one, and it would only clutter the
// list); a removed one need only be non-empty, so that an entry from
// before this check can still go. A user may not be both added and
// removed in one change.
func (a *API) putBypass(ctx *fasthttp.RequestCtx) {
	var v adminapi.BypassChange
	invalid := func(u string) bool { return !event.ValidUserID(u) }
	if err := decodeObject(ctx.PostBody(), &v); err != nil || a.Bypass == nil ||
		slices.ContainsFunc(v.Add, invalid) || slices.Contains(v.Remove, "") ||
		slices.ContainsFunc(v.Add, func(u string) bool { return slices.Contains(v.Remove, u) }) {
		errBadRequest.Write(ctx)
		return
	}
	if slices.ContainsFunc(v.Remove, a.configuredBypass) {
		errConfiguredBypass.Write(ctx)
		return
	}
	c, cancel := context.WithTimeout(a.BaseCtx, a.RedisTimeout)
	defer cancel()
	users, err := a.Bypass.Change(c, v.Add, v.Remove)
	if err != nil {
		errUnavailable.Write(ctx)
		return
	}
	a.SetBypass(users)
	a.Log.Info("queue bypass list changed by operator", "add", len(v.Add), "remove", len(v.Remove))
	a.getBypass(ctx)
}

// decodeObject reads an operator's JSON body, which must be an object of
// known fields: a bare null, or a misspelt key, would decode to "change
// nothing" and answer 200.
func decodeObject(b []byte, v any) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return errNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errNotObject
	}
	return nil
}

var errNotObject = errors.New("body: want a JSON object")

// BypassStore keeps the bypass list where every gateway reads it.
type BypassStore interface {
	Change(ctx context.Context, add, remove []string) ([]string, error)
}
