package httpapi

import (
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

// ordersPath is where the order service answers a shopper's order.
const ordersPath = "/api/flash-sales/orders/"

// errInvalidOrderID is the order service's own answer to a malformed id.
var errInvalidOrderID = newAPIError(fasthttp.StatusBadRequest, "INVALID_ORDER_ID", "order id is not a UUID", "")

// proxyOrder forwards a shopper's order requests (read, pay, cancel) to
// the order service, so shoppers use one origin. Only those requests go:
// the upstream path is rebuilt from the order id, which must be a
// canonical UUID, and the action, which must be pay or cancel. Forwarding
// the request's own path let an encoded one ("..%2F..%2Freadyz", which
// the router matched raw and fasthttp sent decoded and normalized) reach
// every route of the order service's listener. The route's per-IP rule
// comes first, then the shopper's token and her poll rule, so that a
// flood costs neither a signature check nor a trip to the order service.
// The order service verifies the token again.
func (a *API) proxyOrder(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("orderId").(string)
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 { // only the canonical form, as the gateway hands it out
		errInvalidOrderID.Write(ctx)
		return
	}
	path := ordersPath + id.String()
	if ctx.IsPost() {
		switch action, _ := ctx.UserValue("action").(string); action {
		case "pay", "cancel":
			path += "/" + action
		default:
			errNotFound.Write(ctx)
			return
		}
	}
	if _, ok := a.limitedShopperFor(ctx, a.QueueLimits, a.PollLimits); !ok {
		return
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ctx.Request.CopyTo(req)
	req.SetRequestURI(path)
	req.Header.Del(fasthttp.HeaderConnection)
	req.SetHost(a.Orders.Addr)
	if err := a.Orders.DoTimeout(req, resp, 3*time.Second); err != nil {
		errUnavailable.Write(ctx)
		return
	}
	resp.Header.Del(fasthttp.HeaderConnection)
	resp.CopyTo(&ctx.Response)
}
