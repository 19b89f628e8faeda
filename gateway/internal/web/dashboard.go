package web

import (
	"flashsale/pkg/adminauth"
	"flashsale/pkg/httperr"

	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/httpapi"
	"flashsale/gateway/internal/queue"
	"flashsale/gateway/internal/ratelimit"
)

// Sources are the parts of the gateway the dashboard reads.
type Sources struct {
	Catalog *catalog.Catalog
	Queue   *queue.Queue
	// Orders reads orders by status, consumer lag and the reconcile verdict
	// from the order service; nil leaves them out.
	Orders *OrdersClient
	// Gatherer is the gateway's metrics registry; the sampler reads the
	// counters from it in process, so a new outcome shows up unasked.
	Gatherer       prometheus.Gatherer
	PurchaseLimits httpapi.Limits
	QueueLimits    httpapi.Limits
	PollLimits     httpapi.Limits
	AdminToken     []byte
	RedisTimeout   time.Duration
	Log            *slog.Logger
}

// Dashboard samples the counters once a second and answers the page.
type Dashboard struct {
	src   Sources
	pages site
	every time.Duration
	keep  int
	admin adminauth.Check // built once: it hashes the token

	mu      sync.Mutex
	samples []sample // oldest first, at most keep
}

type sample struct {
	at       time.Time
	outcomes map[string]uint64 // flashsale_gateway_purchases_total by outcome
	other    map[string]uint64 // unlabelled counters, e.g. queue joins
}

// NewDashboard loads the page's files; the series covers the last five
// minutes at one point a second.
func NewDashboard(src Sources) (*Dashboard, error) {
	pages, err := load("dashboard.html", "dashboard.js", "style.css")
	if err != nil {
		return nil, err
	}
	if src.RedisTimeout <= 0 {
		src.RedisTimeout = time.Second
	}
	if src.Log == nil {
		src.Log = slog.New(slog.DiscardHandler)
	}
	return &Dashboard{src: src, pages: pages, every: time.Second, keep: 301, admin: adminauth.New(src.AdminToken)}, nil
}

// Run samples until ctx ends.
func (d *Dashboard) Run(ctx context.Context) {
	d.Sample(time.Now())
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.Sample(now)
		}
	}
}

// Sample reads the counters once (Run calls it; tests call it directly).
func (d *Dashboard) Sample(now time.Time) {
	fams, err := d.src.Gatherer.Gather()
	if err != nil {
		d.src.Log.Warn("dashboard sample", "err", err)
		return
	}
	s := counters(fams)
	s.at = now
	d.mu.Lock()
	d.samples = append(d.samples, s)
	if n := len(d.samples) - d.keep; n > 0 {
		d.samples = append(d.samples[:0], d.samples[n:]...)
	}
	d.mu.Unlock()
}

const (
	purchasesMetric = httpapi.Namespace + "_purchases_total"
	gatewayPrefix   = httpapi.Namespace + "_"
)

// counters picks the counters the dashboard shows from a gathering:
// purchases by outcome and the gateway's unlabelled counters.
func counters(fams []*dto.MetricFamily) sample {
	s := sample{outcomes: map[string]uint64{}, other: map[string]uint64{}}
	for _, mf := range fams {
		name := mf.GetName()
		if mf.GetType() != dto.MetricType_COUNTER || !strings.HasPrefix(name, gatewayPrefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := uint64(m.GetCounter().GetValue())
			switch {
			case name == purchasesMetric:
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						s.outcomes[l.GetValue()] = v
					}
				}
			case len(m.GetLabel()) == 0:
				s.other[name] = v
			}
		}
	}
	return s
}

// State is the JSON the dashboard polls.
type State struct {
	ServerTime time.Time         `json:"serverTime"`
	Sales      []SaleState       `json:"sales"`
	Limits     map[string]Route  `json:"limits"`
	Totals     map[string]uint64 `json:"totals"`   // purchases by outcome since start
	Counters   map[string]uint64 `json:"counters"` // queue joins, admissions, rate limited...
	// LastSecond is the latest rate per outcome; Series the last minutes.
	LastSecond map[string]float64 `json:"lastSecond"`
	Series     Series             `json:"series"`
}

// Route holds one route's per-user and per-IP rules (IP nil for a route
// limited per user only: the ticket polls).
type Route struct {
	User ratelimit.Rule  `json:"user"`
	IP   *ratelimit.Rule `json:"ip,omitempty"`
}

func routeLimits(l httpapi.Limits) Route {
	ip := l.IP.Rule()
	return Route{User: l.User.Rule(), IP: &ip}
}

// SaleState is one sale as this gateway sees it.
type SaleState struct {
	ID       int64         `json:"id"`
	Name     string        `json:"name"`
	State    catalog.State `json:"state"`
	StartsAt time.Time     `json:"startsAt"`
	EndsAt   time.Time     `json:"endsAt"`
	Items    []ItemState   `json:"items"`
	Queue    QueueState    `json:"queue"`
	Orders   *OrdersState  `json:"orders"` // null without an order service client
}

// ItemState is one item: its stock as last polled from Redis.
type ItemState struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Price    string `json:"price"`
	Quantity int64  `json:"quantity"`
	Left     *int64 `json:"left"` // null when unknown
	SoldOut  bool   `json:"soldOut"`
}

// QueueState is a sale's waiting room.
type QueueState struct {
	Enabled       bool    `json:"enabled"`
	Draw          bool    `json:"draw"`
	PowDifficulty int     `json:"powDifficulty"`
	AdmissionRate float64 `json:"admissionRate"`
	AdmittedUpTo  *int64  `json:"admittedUpTo"` // null when Redis did not answer
	// Waiting is how many places admission has not reached (people in the
	// queue), Joined how many were handed out; null when Redis did not answer.
	Waiting *int64 `json:"waiting"`
	Joined  *int64 `json:"joined"`
}

// Series holds requests per second by outcome, one point per sample.
type Series struct {
	Outcomes []string    `json:"outcomes"`
	Times    []int64     `json:"times"` // unix ms
	Rates    [][]float64 `json:"rates"` // [point][outcome]
}

// Admin wraps the admin handler: /dashboard/ serves the page (static files,
// no secret in them; the page asks for the admin token) and
// GET /admin/dashboard[?sale=ID,ID] the state, behind the admin credential.
func (d *Dashboard) Admin(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if d.pages.serve(ctx, DashboardPrefix) {
			return
		}
		if string(ctx.Path()) != StatePath {
			next(ctx)
			return
		}
		if !ctx.IsGet() {
			ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET")
			httperr.Write(ctx, fasthttp.StatusMethodNotAllowed, httperr.CodeMethod, "GET only")
			return
		}
		if !d.admin.OK(ctx) {
			adminauth.Refuse(ctx)
			return
		}
		ids, ok := parseIDs(ctx.QueryArgs().Peek("sale"))
		if !ok {
			httperr.Write(ctx, fasthttp.StatusBadRequest, httperr.CodeBadRequest, "sale must be a comma-separated list of ids")
			return
		}
		c, cancel := context.WithTimeout(context.Background(), d.timeout())
		defer cancel()
		b, err := json.Marshal(d.State(c, time.Now(), ids))
		if err != nil {
			httperr.Write(ctx, fasthttp.StatusInternalServerError, httperr.CodeInternal, "state not encoded")
			return
		}
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
		ctx.SetBody(b)
	}
}

// timeout bounds one state request: the Redis reads and the order
// service's answer run side by side, each under its own bound.
func (d *Dashboard) timeout() time.Duration {
	t := 2 * d.src.RedisTimeout
	if d.src.Orders != nil {
		t = max(t, d.src.Orders.timeout+100*time.Millisecond)
	}
	return t
}

// parseIDs reads "1,2,3"; empty is no ids.
func parseIDs(b []byte) ([]int64, bool) {
	var ids []int64
	for len(b) > 0 {
		part, rest, _ := bytes.Cut(b, []byte(","))
		b = rest
		if len(part) == 0 {
			continue
		}
		id, err := strconv.ParseInt(string(part), 10, 64)
		if err != nil || id <= 0 {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, len(ids) <= 20
}

// DefaultSales is how many of the newest sales the dashboard shows when
// none are asked for.
const DefaultSales = 5

// State assembles the dashboard's view of the sales asked for (unknown ids
// are left out), or of the DefaultSales newest. Only those cost a look-up
// in Redis and at the order service, however many sales the catalog holds.
func (d *Dashboard) State(ctx context.Context, now time.Time, saleIDs []int64) State {
	st := State{ServerTime: now.UTC(), Sales: []SaleState{}, Limits: map[string]Route{
		"purchase": routeLimits(d.src.PurchaseLimits),
		"queue":    routeLimits(d.src.QueueLimits),
		"poll":     {User: d.src.PollLimits.User.Rule()},
	}}
	sales := d.src.Catalog.Sales()
	ids := make([]int64, 0, len(sales))
	if len(saleIDs) > 0 {
		for _, id := range saleIDs {
			if _, ok := sales[id]; ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	} else {
		for id := range sales {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] }) // newest first
		ids = ids[:min(len(ids), DefaultSales)]
	}
	st.Sales = make([]SaleState, len(ids))
	// The look-ups of each sale run side by side: the page waits for the
	// slowest, not for their sum.
	var g errgroup.Group
	for i, id := range ids {
		s := sales[id]
		v := &st.Sales[i]
		*v = SaleState{ID: s.ID, Name: s.Name, State: s.StateAt(now), StartsAt: s.StartsAt.UTC(), EndsAt: s.EndsAt.UTC(),
			Items: []ItemState{}, Queue: QueueState{Enabled: s.Queue.Enabled, Draw: s.Queue.Draw,
				PowDifficulty: s.Queue.PowDifficulty, AdmissionRate: s.Queue.AdmissionRate}}
		for _, it := range s.Items {
			iv := ItemState{ID: it.ID, Name: it.Name, Price: it.Price, Quantity: it.Quantity, SoldOut: it.SoldOut()}
			if left := it.Left(); left >= 0 {
				iv.Left = &left
			}
			v.Items = append(v.Items, iv)
		}
		if s.Queue.Enabled && d.src.Queue != nil {
			g.Go(func() error { d.queueState(ctx, s, &v.Queue, now); return nil })
		}
		if d.src.Orders != nil {
			g.Go(func() error {
				o := d.src.Orders.Sale(ctx, s.ID)
				v.Orders = &o
				return nil
			})
		}
	}
	_ = g.Wait() // every look-up records its own failure in the state
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.samples); n > 0 {
		last := d.samples[n-1]
		st.Totals, st.Counters = last.outcomes, last.other
	}
	st.Series = d.series()
	st.LastSecond = map[string]float64{}
	if k := len(st.Series.Rates); k > 0 {
		for i, o := range st.Series.Outcomes {
			st.LastSecond[o] = st.Series.Rates[k-1][i]
		}
	}
	return st
}

// queueState reads the admission rate and watermark the way
// GET /admin/sales/{id}/queue does.
func (d *Dashboard) queueState(ctx context.Context, s *catalog.Sale, q *QueueState, now time.Time) {
	rate, set, err := d.src.Queue.Rate(ctx, s.ID)
	if err != nil {
		return
	}
	if set {
		q.AdmissionRate = rate
	}
	if !s.IsOpen(now) {
		zero := int64(0)
		q.AdmittedUpTo = &zero
	} else if admitted, _, err := d.src.Queue.Advance(ctx, s.ID, s.StartsAt, q.AdmissionRate, s.StateAt(now) == catalog.SoldOut); err == nil {
		q.AdmittedUpTo = &admitted
	}
	if l, err := d.src.Queue.Size(ctx, s.ID); err == nil {
		q.Waiting, q.Joined = &l.Waiting, &l.Joined
	}
}

// series turns the samples into rates; d.mu is held.
func (d *Dashboard) series() Series {
	se := Series{Outcomes: []string{}, Times: []int64{}, Rates: [][]float64{}}
	if len(d.samples) == 0 {
		return se
	}
	for o := range d.samples[len(d.samples)-1].outcomes {
		se.Outcomes = append(se.Outcomes, o)
	}
	sort.Strings(se.Outcomes)
	for i := 1; i < len(d.samples); i++ {
		a, b := d.samples[i-1], d.samples[i]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		row := make([]float64, len(se.Outcomes))
		for j, o := range se.Outcomes {
			if b.outcomes[o] >= a.outcomes[o] { // a counter never goes back; a restart would
				row[j] = float64(b.outcomes[o]-a.outcomes[o]) / dt
			}
		}
		se.Times = append(se.Times, b.at.UnixMilli())
		se.Rates = append(se.Rates, row)
	}
	return se
}
