package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/admission"
	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/holding"
	"flashsale/gateway/internal/queue"
)

// queueView is the JSON a waiting-room page renders.
type queueView struct {
	Ticket       string `json:"ticket"`
	State        string `json:"state"` // DRAWING (before the opening), WAITING, ADMITTED, USED
	Position     *int64 `json:"position"`
	AdmittedUpTo int64  `json:"admittedUpTo"`
	QueueSize    int64  `json:"queueSize"`
	EtaSeconds   *int64 `json:"etaSeconds"`
	// PollAfterMs is when to ask again; the server chooses it.
	PollAfterMs    int64      `json:"pollAfterMs"`
	AdmissionToken string     `json:"admissionToken,omitempty"`
	AdmissionUntil *time.Time `json:"admissionExpiresAt,omitempty"`
	PurchasePath   string     `json:"purchasePath,omitempty"`
}

// queueSale finds a queue-enabled sale that has not ended.
func (a *API) queueSale(ctx *fasthttp.RequestCtx) (*catalog.Sale, bool) {
	saleID, ok := pathID(ctx, "saleId")
	if !ok {
		return nil, false
	}
	s, ok := a.Catalog.Sale(saleID)
	if !ok || !s.Queue.Enabled || !a.Now().Before(s.EndsAt) {
		return nil, false
	}
	return s, true
}

// queueChallenge hands out the proof-of-work puzzle for joining.
func (a *API) queueChallenge(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	if !a.allowIP(ctx, a.QueueLimits) {
		return
	}
	user, ok := a.shopper(ctx)
	if !ok {
		return
	}
	exp := a.Now().Add(a.PowChallengeTTL).Truncate(time.Second) // whole seconds, as the challenge keeps it
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"challenge":  a.Admission.Challenge(s.ID, user, s.Queue.PowDifficulty, exp),
		"difficulty": s.Queue.PowDifficulty, "expiresAt": exp.UTC(),
		"algorithm": "sha256(challenge + \":\" + nonce) has `difficulty` leading zero bits",
	})
}

type joinRequest struct {
	Challenge string `json:"challenge"`
	Nonce     string `json:"nonce"`
}

// queueJoin gives the shopper a place (the same one if asked again).
func (a *API) queueJoin(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	user, ok := a.limitedShopper(ctx, a.QueueLimits)
	if !ok {
		return
	}
	if s.Queue.PowDifficulty > 0 {
		var req joinRequest
		if err := json.Unmarshal(ctx.PostBody(), &req); err != nil ||
			a.Admission.CheckProof(req.Challenge, req.Nonce, s.ID, user, a.Now()) != nil {
			a.Metrics.badProof.Inc()
			errBadProof.Write(ctx)
			return
		}
	}
	c, cancel := context.WithTimeout(a.BaseCtx, a.RedisTimeout)
	defer cancel()
	ticket, err := a.Queue.Join(c, s.ID, s.StartsAt, s.Queue.Draw, user)
	if err != nil {
		errUnavailable.Write(ctx)
		return
	}
	a.Metrics.queueJoins.Inc()
	a.writeQueueStatus(ctx, c, s, user, ticket)
}

// queueStatus answers a poll of a ticket, with an admission token once admitted.
func (a *API) queueStatus(ctx *fasthttp.RequestCtx) {
	s, ok := a.queueSale(ctx)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	user, ok := a.shopper(ctx)
	if !ok || !a.allowUser(ctx, a.PollLimits, user) {
		return
	}
	ticket, _ := ctx.UserValue("ticket").(string)
	if len(ticket) == 0 || len(ticket) > 64 {
		errNotFound.Write(ctx)
		return
	}
	c, cancel := context.WithTimeout(a.BaseCtx, a.RedisTimeout)
	defer cancel()
	a.writeQueueStatus(ctx, c, s, user, ticket)
}

func (a *API) writeQueueStatus(ctx *fasthttp.RequestCtx, c context.Context, s *catalog.Sale, user, ticket string) {
	// Another shopper's ticket is unknown to the status script: as if it
	// did not exist.
	st, err := a.Queue.Status(c, s.ID, s.StartsAt, ticket, user)
	switch {
	case errors.Is(err, queue.ErrUnknownTicket):
		errNotFound.Write(ctx)
		return
	case errors.Is(err, queue.ErrTicketExpired):
		errTicketExpired.Write(ctx)
		return
	case err != nil:
		errUnavailable.Write(ctx)
		return
	}
	now := a.Now()
	v := queueView{Ticket: ticket, AdmittedUpTo: st.Admitted, QueueSize: st.Size}
	rate := a.admissionRate(s)
	admitted := st.IsAdmitted() && s.IsOpen(now)
	var used, holding bool
	if admitted && a.Stock != nil {
		if used, holding, err = a.Stock.AdmissionSpent(c, s.ID, user, ticket); err != nil {
			errUnavailable.Write(ctx)
			return
		}
	}
	switch {
	case st.Position == 0:
		v.State = "DRAWING"
		v.PollAfterMs = drawingPoll(s.StartsAt.Sub(now), a.Queue.Grace(), ticket)
	case admitted && used:
		// Her admission bought a unit: no new token, which the purchase
		// would refuse. While she holds a unit whose order is not placed
		// yet (her purchase in progress, or PROCESSING) the page asks
		// again, since a purchase that fails gives the admission back;
		// once the order is placed, or has ended, never (an admission buys
		// once; an ended order's unit went back to those still queued).
		v.State = "USED"
		v.Position = &st.Position
		if holding && !a.admissionFinal(c, s.ID, user) {
			v.PollAfterMs = usedPoll.Milliseconds()
		}
	case admitted:
		v.State = "ADMITTED"
		v.Position = &st.Position
		zero := int64(0)
		v.EtaSeconds = &zero
		// Whole seconds, as the token keeps it: shown finer, the page
		// would count on up to a second the token does not have.
		exp := now.Add(a.AdmissionTTL).Truncate(time.Second)
		v.AdmissionToken = a.Admission.Sign(admission.Token{SaleID: s.ID, UserID: user, ID: ticket, Expires: exp})
		v.AdmissionUntil = &exp
		v.PurchasePath = purchasePath(s)
		a.Metrics.admissions.Inc()
	default:
		v.State = "WAITING"
		v.Position = &st.Position
		ahead := st.Position - st.Admitted
		var eta time.Duration
		if rate > 0 {
			secs := int64(math.Ceil(float64(ahead) / rate))
			v.EtaSeconds = &secs
			eta = time.Duration(secs) * time.Second
		}
		v.PollAfterMs = clampPoll(eta/4, a.Queue.Grace())
	}
	writeJSON(ctx, fasthttp.StatusOK, v)
}

// admissionFinal reports whether the order a used admission bought is in
// PostgreSQL, PENDING or PAID: the admission then never comes back (an
// order that existed used it; only one refused or never placed gives it
// back), and the page need not ask again. Before, a buyer's page asked
// every 5 s until her order ended, up to the payment window: 2,000 status
// scripts a second for a 10,000-unit sale. PROCESSING (the consumer may
// still refuse it) or a lookup that failed is not final.
func (a *API) admissionFinal(c context.Context, saleID int64, user string) bool {
	if a.Holding == nil {
		return false
	}
	o, err := a.Holding.Find(c, saleID, user)
	return err == nil && (o.Status == holding.Pending || o.Status == holding.Paid)
}

// usedPoll is how often a page whose admission is used, and whose shopper
// still holds a unit, asks again: her purchase may yet fail and give the
// admission back.
const usedPoll = 5 * time.Second

// openingSpread is how far after the opening drawingPoll spreads the
// early joiners' first polls; minDrawingPoll is the least it advises, the
// pace of the page's own floor and of the queue's default per-user limit
// (2 a second).
const (
	openingSpread  = 2 * time.Second
	minDrawingPoll = 500 * time.Millisecond
)

// drawingPoll advises an early joiner of a drawn queue, untilOpen before
// the opening by the gateway's clock. Until the opening no poll can learn
// anything but the queue's size, and at the opening every place is
// decided at once, so the page comes back right after the opening, each
// ticket at its own moment within openingSpread so that the crowd does not
// arrive in one instant; until then only as often as its place needs (a
// third of the grace, 10 s at most). A poll still DRAWING past the opening
// by the gateway's clock (Redis's, which decides, is behind it) is spread
// the same way from now. Advised a second at a time, as before, the whole
// crowd polled every second of the last few before the opening: at 500,000
// early joiners, half a million status scripts a second on the sale's
// Redis node for nothing.
func drawingPoll(untilOpen, grace time.Duration, ticket string) int64 {
	h := fnv.New32a()
	h.Write([]byte(ticket))
	at := max(untilOpen, 0) + time.Duration(h.Sum32())%openingSpread
	return max(minDrawingPoll, min(at, grace/3, 10*time.Second)).Milliseconds()
}

// clampPoll keeps polls between 1 s and a third of the grace period, so a
// shopper who follows the advice never loses the place.
func clampPoll(d, grace time.Duration) int64 {
	return max(time.Second, min(d, grace/3, 10*time.Second)).Milliseconds()
}

func (a *API) admissionRate(s *catalog.Sale) float64 {
	if r, ok := a.rates.Load(s.ID); ok {
		return r.(float64)
	}
	return s.Queue.AdmissionRate
}

// SetAdmissionRate records the rate last seen by the advancer (for ETAs).
func (a *API) SetAdmissionRate(saleID int64, rate float64) { a.rates.Store(saleID, rate) }

func purchasePath(s *catalog.Sale) string {
	return "/api/flash-sales/" + itoa(s.ID) + "/g/" + s.Gate()
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		errInternal.Write(ctx)
		return
	}
	ctx.Response.Header.SetContentTypeBytes(contentJSON)
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}
