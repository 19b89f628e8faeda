// Package stackapi is the load test's client of the running stack: the order
// service's admin API (create a sale, load its stock) and the gateway's
// public API (sale info, order polling).
package stackapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"flashsale/pkg/adminapi"
	"flashsale/tools/scrape"
)

// Client talks to one gateway and one order-service admin listener.
type Client struct {
	GatewayURL string
	AdminURL   string
	AdminToken string
	HTTP       *http.Client
}

// CreateSale creates a sale through the admin API.
func (c *Client) CreateSale(ctx context.Context, s adminapi.NewSale) (adminapi.Sale, error) {
	var out adminapi.Sale
	err := c.do(ctx, http.MethodPost, c.AdminURL+"/admin/sales", c.AdminToken, s, http.StatusCreated, &out)
	if err != nil {
		return adminapi.Sale{}, fmt.Errorf("create sale: %w", err)
	}
	return out, nil
}

// LoadStock warms the sale's Redis stock up from PostgreSQL.
func (c *Client) LoadStock(ctx context.Context, saleID int64) error {
	if err := c.do(ctx, http.MethodPost, c.AdminURL+"/admin/sales/"+strconv.FormatInt(saleID, 10)+"/load-stock", c.AdminToken, nil, http.StatusOK, nil); err != nil {
		return fmt.Errorf("load stock of sale %d: %w", saleID, err)
	}
	return nil
}

// SaleInfo is the gateway's sale page data.
type SaleInfo struct {
	ID           int64     `json:"id"`
	State        string    `json:"state"`
	StartsAt     time.Time `json:"startsAt"`
	ServerTime   time.Time `json:"serverTime"`
	PurchasePath string    `json:"purchasePath"`
	Items        []struct {
		ID        int64  `json:"id"`
		StockLeft *int64 `json:"stockLeft"`
	} `json:"items"`
}

// SaleInfo reads the sale from the gateway (404 until its catalog has it).
func (c *Client) SaleInfo(ctx context.Context, saleID int64) (SaleInfo, error) {
	var out SaleInfo
	err := c.do(ctx, http.MethodGet, c.GatewayURL+"/api/flash-sales/"+strconv.FormatInt(saleID, 10), "", nil, http.StatusOK, &out)
	return out, err
}

// Order is the polling endpoint's answer.
type Order struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// Pay pays an order as its owner with a payment reference.
func (c *Client) Pay(ctx context.Context, token, orderID, ref string) error {
	return c.do(ctx, http.MethodPost, c.GatewayURL+"/api/flash-sales/orders/"+orderID+"/pay", token, map[string]string{"paymentRef": ref}, http.StatusOK, nil)
}

// Order polls one order as its owner.
func (c *Client) Order(ctx context.Context, token, orderID string) (Order, error) {
	var out Order
	err := c.do(ctx, http.MethodGet, c.GatewayURL+"/api/flash-sales/orders/"+orderID, token, nil, http.StatusOK, &out)
	return out, err
}

// Metric reads one unlabelled sample from a service's /metrics.
func (c *Client) Metric(ctx context.Context, baseURL, name string) (float64, error) {
	fams, err := c.Metrics(ctx, baseURL)
	if err != nil {
		return 0, err
	}
	v, ok := fams.Value(name)
	if !ok {
		return 0, fmt.Errorf("metric %s not found at %s", name, baseURL)
	}
	return v, nil
}

// Metrics reads a service's /metrics page with Prometheus' own text parser.
func (c *Client) Metrics(ctx context.Context, baseURL string) (scrape.Families, error) {
	return scrape.Get(ctx, c.HTTP, baseURL+"/metrics")
}

// HistogramQuantile estimates the q-quantile (0..1) of a histogram family's
// first series the way PromQL's histogram_quantile does: linear within the
// bucket that holds it. ok is false for an empty histogram, or when the
// quantile falls in the +Inf bucket (the highest finite bound is returned).
func HistogramQuantile(mf *dto.MetricFamily, q float64) (v float64, ok bool) {
	if mf == nil || len(mf.GetMetric()) == 0 || mf.GetMetric()[0].GetHistogram() == nil {
		return 0, false
	}
	h := mf.GetMetric()[0].GetHistogram()
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, cum := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if math.IsInf(upper, 1) {
			return lower, false
		}
		if cum >= rank {
			if cum == below {
				return upper, true
			}
			return lower + (upper-lower)*(rank-below)/(cum-below), true
		}
		lower, below = upper, cum
	}
	return lower, false
}

// QueueState is the waiting room's answer.
type QueueState struct {
	Ticket         string `json:"ticket"`
	State          string `json:"state"`
	PollAfterMs    int64  `json:"pollAfterMs"`
	AdmissionToken string `json:"admissionToken"`
	PurchasePath   string `json:"purchasePath"`
}

// JoinQueue joins a sale's virtual queue as the token's shopper; clientIP
// goes in X-Forwarded-For as a load balancer would put it.
func (c *Client) JoinQueue(ctx context.Context, saleID int64, token, clientIP string) (QueueState, error) {
	var out QueueState
	err := c.send(ctx, http.MethodPost, c.GatewayURL+"/api/flash-sales/"+strconv.FormatInt(saleID, 10)+"/queue", token, clientIP, nil, http.StatusOK, &out)
	return out, err
}

// QueueStatus polls a ticket.
func (c *Client) QueueStatus(ctx context.Context, saleID int64, ticket, token string) (QueueState, error) {
	var out QueueState
	err := c.send(ctx, http.MethodGet, c.GatewayURL+"/api/flash-sales/"+strconv.FormatInt(saleID, 10)+"/queue/"+ticket, token, "", nil, http.StatusOK, &out)
	return out, err
}

// StatusError is a non-expected HTTP status.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

func (c *Client) do(ctx context.Context, method, url, token string, in any, want int, out any) error {
	return c.send(ctx, method, url, token, "", in, want, out)
}

// send makes one request: in, when not nil, as its JSON body; clientIP,
// when not empty, in X-Forwarded-For as a load balancer would put it; an
// answer other than want is a StatusError, and out, when not nil, takes
// the JSON body.
func (c *Client) send(ctx context.Context, method, url, token, clientIP string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if clientIP != "" {
		req.Header.Set("X-Forwarded-For", clientIP)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return nil
}
