package httpapi

import (
	"flashsale/pkg/adminauth"

	"context"
	"encoding/json"
	"sort"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/ratelimit"
)

// admin wraps an operator endpoint with the admin credential check every
// admin listener shares (pkg/adminauth: 401 with a Bearer challenge).
func (a *API) admin(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return adminauth.New(a.AdminToken).Wrap(h)
}

// limitsView is the live rate-limit configuration of this gateway.
type limitsView struct {
	Purchase routeLimits `json:"purchase"`
	Queue    routeLimits `json:"queue"`
}

type routeLimits struct {
	User *ratelimit.Rule `json:"user,omitempty"`
	IP   *ratelimit.Rule `json:"ip,omitempty"`
}

func (a *API) getLimits(ctx *fasthttp.RequestCtx) {
	pu, pi, qu, qi := a.PurchaseLimits.User.Rule(), a.PurchaseLimits.IP.Rule(), a.QueueLimits.User.Rule(), a.QueueLimits.IP.Rule()
	writeJSON(ctx, fasthttp.StatusOK, limitsView{Purchase: routeLimits{&pu, &pi}, Queue: routeLimits{&qu, &qi}})
}

// putLimits changes this gateway's limits live; omitted rules stay.
// Limits are per gateway instance: operators set each one.
func (a *API) putLimits(ctx *fasthttp.RequestCtx) {
	var v limitsView
	if err := json.Unmarshal(ctx.PostBody(), &v); err != nil {
		errBadRequest.Write(ctx)
		return
	}
	for _, r := range []*ratelimit.Rule{v.Purchase.User, v.Purchase.IP, v.Queue.User, v.Queue.IP} {
		if r != nil && (r.Rate < 0 || (r.Rate > 0 && r.Burst < 1)) {
			errBadRequest.Write(ctx)
			return
		}
	}
	set := func(l *ratelimit.Limiter, r *ratelimit.Rule) {
		if r != nil {
			l.SetRule(*r)
		}
	}
	set(a.PurchaseLimits.User, v.Purchase.User)
	set(a.PurchaseLimits.IP, v.Purchase.IP)
	set(a.QueueLimits.User, v.Queue.User)
	set(a.QueueLimits.IP, v.Queue.IP)
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
	// queueLength: places admission has not reached yet (people waiting).
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"saleId": s.ID, "admittedUpTo": admitted, "admissionRate": rate,
		"queueLength": l.Waiting, "joined": l.Joined,
		"powDifficulty": s.Queue.PowDifficulty, "draw": s.Queue.Draw, "opensAt": s.StartsAt.UTC()})
}

// putAdmissionRate sets a sale's admission rate for every gateway.
func (a *API) putAdmissionRate(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	var v struct {
		Rate *float64 `json:"rate"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &v); err != nil || v.Rate == nil || *v.Rate < 0 {
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
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"saleId": s.ID, "admissionRate": *v.Rate})
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
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"users": users})
}

func (a *API) putBypass(ctx *fasthttp.RequestCtx) {
	var v struct {
		Add    []string `json:"add"`
		Remove []string `json:"remove"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &v); err != nil || a.Bypass == nil {
		errBadRequest.Write(ctx)
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

// BypassStore keeps the bypass list where every gateway reads it.
type BypassStore interface {
	Change(ctx context.Context, add, remove []string) ([]string, error)
}
