package httpapi

import (
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
)

// ordersPath is where the order service answers a shopper's order.
const ordersPath = "/api/flash-sales/orders/"

// orderBucket prefixes a shopper's key in the poll limiter for her order
// requests, apart from her ticket polls' (a user id has no NUL).
const orderBucket = "order\x00"

// errInvalidOrderID is the order service's own answer to a malformed id.
var errInvalidOrderID = httperr.InvalidOrderID

// proxyOrder forwards a shopper's order requests (read, pay, cancel) to
// the order service, so shoppers use one origin. Only those requests go:
// the upstream path is rebuilt from the order id, which must be a
// canonical UUID, and the action, which must be pay or cancel. Forwarding
// the request's own path let an encoded one ("..%2F..%2Freadyz", which
// the router matched raw and fasthttp sent decoded and normalized) reach
// every route of the order service's listener. The shopper's token and
// her poll rule come before the trip to the order service, in a bucket of
// her order requests apart from her ticket polls' (one must not spend the
// other's); no per-IP rule, as for the ticket polls: a crowd behind one
// address pays and polls as many orders as it holds. The order service
// verifies the token again.
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
	user, ok := a.shopper(ctx)
	if !ok || !a.allowUser(ctx, a.PollLimits, orderBucket+user) {
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
