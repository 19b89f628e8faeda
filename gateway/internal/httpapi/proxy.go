package httpapi

import (
	"time"

	"github.com/valyala/fasthttp"
)

// proxyOrder forwards the order endpoints to the order service, so shoppers
// use one origin. The shopper's Authorization header goes along; the order
// service verifies it again.
func (a *API) proxyOrder(ctx *fasthttp.RequestCtx) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ctx.Request.CopyTo(req)
	req.Header.Del(fasthttp.HeaderConnection)
	req.SetHost(a.Orders.Addr)
	if err := a.Orders.DoTimeout(req, resp, 3*time.Second); err != nil {
		errUnavailable.Write(ctx)
		return
	}
	resp.Header.Del(fasthttp.HeaderConnection)
	resp.CopyTo(&ctx.Response)
}
