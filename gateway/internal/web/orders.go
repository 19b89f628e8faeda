package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/adminapi"
)

// SaleOrders is the order service's view of one sale, as its admin
// listener answers GET /admin/sales/{id}/status (pkg/adminapi, the type the
// order service writes): PostgreSQL's counts of orders by status, the
// consumer group's lag and the last reconcile.
type SaleOrders = adminapi.SaleStatus

// OrdersState is what the dashboard shows of a sale's orders: the order
// service's answer, or why there is none.
type OrdersState struct {
	*SaleOrders
	// Unavailable is set, and the rest absent, when the order service did
	// not answer; the dashboard renders everything else regardless.
	Unavailable string `json:"unavailable,omitempty"`
}

// OrdersClient reads sales' order figures from the order service's admin
// listener. Answers, failures included, are kept for a second, so a
// dashboard in every operator's tab costs the order service one request
// per sale per second, and a dead order service costs each refresh no
// more than one timeout per second.
type OrdersClient struct {
	hc      *fasthttp.HostClient
	auth    string
	timeout time.Duration
	ttl     time.Duration

	mu    sync.Mutex
	cache map[int64]*ordersEntry
}

type ordersEntry struct {
	done  chan struct{} // closed when the fetch below finished
	at    time.Time
	state OrdersState
}

// NewOrdersClient talks to the order service's admin listener at addr
// (host:port) with the admin bearer token; timeout bounds one request.
func NewOrdersClient(addr string, token []byte, timeout time.Duration) *OrdersClient {
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	return &OrdersClient{
		hc: &fasthttp.HostClient{Addr: addr, Name: "flashsale-gateway-dashboard", MaxConns: 8,
			ReadTimeout: timeout, WriteTimeout: timeout, MaxResponseBodySize: 1 << 20},
		auth:    "Bearer " + string(token),
		timeout: timeout,
		ttl:     time.Second,
		cache:   map[int64]*ordersEntry{},
	}
}

// Sale answers a sale's orders, from the cache when the last answer is
// under a second old. Concurrent callers share one request.
func (c *OrdersClient) Sale(ctx context.Context, saleID int64) OrdersState {
	c.mu.Lock()
	e, ok := c.cache[saleID]
	if ok {
		select {
		case <-e.done:
			if time.Since(e.at) < c.ttl {
				c.mu.Unlock()
				return e.state
			}
			ok = false // stale: fetch again
		default: // in flight: wait for it below
		}
	}
	if !ok {
		e = &ordersEntry{done: make(chan struct{})}
		c.cache[saleID] = e
		c.mu.Unlock()
		// The fetch is bounded by c.timeout; it is not tied to this
		// caller's context because other callers may be waiting on it.
		e.state = c.fetch(saleID)
		e.at = time.Now()
		close(e.done)
		return e.state
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.state
	case <-ctx.Done():
		return OrdersState{Unavailable: ctx.Err().Error()}
	}
}

// errStatus is an answer other than 200 from the order service.
type errStatus int

func (e errStatus) Error() string {
	switch int(e) {
	case fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
		return fmt.Sprintf("it refused the admin token (%d)", int(e))
	case fasthttp.StatusNotFound:
		return "it does not know this sale or has no status endpoint (404)"
	}
	return fmt.Sprintf("it answered %d", int(e))
}

func (c *OrdersClient) fetch(saleID int64) OrdersState {
	o, err := c.get(saleID)
	if err != nil {
		return OrdersState{Unavailable: err.Error()}
	}
	return OrdersState{SaleOrders: o}
}

func (c *OrdersClient) get(saleID int64) (*SaleOrders, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + c.hc.Addr + "/admin/sales/" + strconv.FormatInt(saleID, 10) + "/status")
	req.Header.SetMethod(fasthttp.MethodGet)
	req.Header.Set(fasthttp.HeaderAuthorization, c.auth)
	req.Header.Set(fasthttp.HeaderAccept, "application/json")
	if err := c.hc.DoTimeout(req, resp, c.timeout); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) {
			return nil, fmt.Errorf("%s did not answer within %v", c.hc.Addr, c.timeout)
		}
		return nil, fmt.Errorf("%s: %w", c.hc.Addr, err)
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		return nil, errStatus(code)
	}
	var o SaleOrders
	if err := json.Unmarshal(resp.Body(), &o); err != nil {
		return nil, fmt.Errorf("status of sale %d: %w", saleID, err)
	}
	if o.SaleID != saleID {
		return nil, fmt.Errorf("it answered for sale %d, asked %d", o.SaleID, saleID)
	}
	return &o, nil
}
