package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/holding"
)

// orderView is the caller's active order in a sale.
type orderView struct {
	OrderID uuid.UUID `json:"orderId"`
	SaleID  int64     `json:"saleId"`
	ItemID  int64     `json:"itemId,omitempty"` // absent when not yet known
	Status  string    `json:"status"`
	// ExpiresAt is absent while PROCESSING: the order service sets it when
	// it persists the order.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

var errNoOrder = newAPIError(fasthttp.StatusNotFound, "NOT_FOUND", "you hold no active order in this sale", "")

// myOrder answers GET /api/flash-sales/{saleId}/order: the caller's active
// order in the sale, so a shopper whose purchase answer was lost finds the
// unit she won. Rate-limited as her other order requests are (the poll
// rule, her order bucket; no per-IP rule: at the opening, shoppers behind
// one address who lost an answer competed with the crowd's joins for the
// queue's per-IP bucket); the user comes from her verified token, so
// nobody learns another shopper's order.
func (a *API) myOrder(ctx *fasthttp.RequestCtx) {
	saleID, ok := pathID(ctx, "saleId")
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	if _, ok := a.Catalog.Sale(saleID); !ok {
		errNotFound.Write(ctx)
		return
	}
	user, ok := a.shopper(ctx)
	if !ok || !a.allowUser(ctx, a.PollLimits, orderBucket+user) {
		return
	}
	if a.Holding == nil {
		errUnavailable.Write(ctx)
		return
	}
	c, cancel := context.WithTimeout(a.BaseCtx, 2*a.RedisTimeout)
	o, err := a.Holding.Find(c, saleID, user)
	cancel()
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	switch {
	case errors.Is(err, holding.ErrNone):
		a.Metrics.orderLookups[lookupNone].Inc()
		errNoOrder.Write(ctx)
		return
	case errors.Is(err, holding.ErrUnconfirmed):
		// A purchase of hers still waiting for the broker, or one a dead
		// gateway never published (freed after the order service's
		// in-flight window): asking again settles it.
		a.Metrics.orderLookups[lookupUnconfirmed].Inc()
		errUnavailable.WriteOrder(ctx, o.ID.String())
		return
	case err != nil:
		a.Metrics.orderLookups[lookupUnavailable].Inc()
		errUnavailable.Write(ctx)
		return
	}
	a.Metrics.orderLookups[lookupFound].Inc()
	v := orderView{OrderID: o.ID, SaleID: saleID, ItemID: o.ItemID, Status: o.Status}
	if !o.ExpiresAt.IsZero() {
		v.ExpiresAt = &o.ExpiresAt
	}
	b, err := json.Marshal(v)
	if err != nil {
		errInternal.Write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
