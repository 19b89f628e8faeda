package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// client is the run's view of the stack: the order service's admin API
// (ordersvc/internal/api/admin.go) and the gateway's sale page.
type client struct {
	adminURL, gatewayURL, token string
}

type newItem struct {
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Price     string `json:"price"`
	Quantity  int64  `json:"quantity"`
}

type newSale struct {
	Name              string    `json:"name"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	PaymentTTLSeconds int64     `json:"paymentTtlSeconds"`
	Items             []newItem `json:"items"`
}

type sale struct {
	ID    int64 `json:"id"`
	Items []struct {
		ID       int64 `json:"id"`
		Quantity int64 `json:"quantity"`
	} `json:"items"`
}

// createSale creates a one-item sale that opens at startsAt and lasts an hour.
func (c *client) createSale(ctx context.Context, name string, startsAt time.Time, quantity int) (sale, error) {
	in := newSale{Name: name, StartsAt: startsAt, EndsAt: startsAt.Add(time.Hour), PaymentTTLSeconds: 600,
		Items: []newItem{{ProductID: "bench-sku", Name: "Bench item", Price: "19.99", Quantity: int64(quantity)}}}
	var out sale
	if err := c.do(ctx, http.MethodPost, c.adminURL+"/admin/sales", c.token, in, http.StatusCreated, &out); err != nil {
		return sale{}, fmt.Errorf("create sale: %w", err)
	}
	if len(out.Items) != 1 {
		return sale{}, fmt.Errorf("create sale: %d items in the answer, want 1", len(out.Items))
	}
	return out, nil
}

// loadStock warms the sale's Redis copy up from PostgreSQL.
func (c *client) loadStock(ctx context.Context, saleID int64) error {
	if err := c.do(ctx, http.MethodPost, c.adminURL+"/admin/sales/"+strconv.FormatInt(saleID, 10)+"/load-stock", c.token, nil, http.StatusOK, nil); err != nil {
		return fmt.Errorf("load stock of sale %d: %w", saleID, err)
	}
	return nil
}

// waitOpen waits until the gateway's catalog has the sale open and returns
// its purchase path.
func (c *client) waitOpen(ctx context.Context, saleID int64, bound time.Duration) (string, error) {
	deadline := time.Now().Add(bound)
	for {
		var info struct {
			State        string `json:"state"`
			PurchasePath string `json:"purchasePath"`
		}
		err := c.do(ctx, http.MethodGet, c.gatewayURL+"/api/flash-sales/"+strconv.FormatInt(saleID, 10), "", nil, http.StatusOK, &info)
		if err == nil && info.PurchasePath != "" {
			return info.PurchasePath, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("sale %d not open on the gateway after %s (state %q, last error %v)", saleID, bound, info.State, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func (c *client) do(ctx context.Context, method, url, token string, in any, want int, out any) error {
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
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return nil
}
