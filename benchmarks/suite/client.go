package suite

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"flashsale/pkg/adminapi"
	"flashsale/tools/stackapi"
)

// client is the run's view of the stack: the order service's admin API and
// the gateway's sale page, through the same client the load test uses.
type client struct{ api *stackapi.Client }

func newClient(adminURL, gatewayURL, token string) *client {
	return &client{api: &stackapi.Client{GatewayURL: gatewayURL, AdminURL: adminURL, AdminToken: token,
		HTTP: &http.Client{Timeout: 30 * time.Second}}}
}

// createSale creates a one-item sale that opens at startsAt and stays open
// for length.
func (c *client) createSale(ctx context.Context, name string, startsAt time.Time, length time.Duration, quantity int) (adminapi.Sale, error) {
	out, err := c.api.CreateSale(ctx, adminapi.NewSale{Name: name, StartsAt: startsAt, EndsAt: startsAt.Add(length), PaymentTTLSeconds: 600,
		Items: []adminapi.NewSaleItem{{ProductID: "bench-sku", Name: "Bench item", Price: "19.99", Quantity: int64(quantity)}}})
	if err != nil {
		return adminapi.Sale{}, err
	}
	if len(out.Items) != 1 {
		return adminapi.Sale{}, fmt.Errorf("create sale: %d items in the answer, want 1", len(out.Items))
	}
	return out, nil
}

// loadStock warms the sale's Redis copy up from PostgreSQL.
func (c *client) loadStock(ctx context.Context, saleID int64) error {
	return c.api.LoadStock(ctx, saleID)
}

// waitOpen waits until the gateway's catalog has the sale open and returns
// its purchase path.
func (c *client) waitOpen(ctx context.Context, saleID int64, bound time.Duration) (string, error) {
	deadline := time.Now().Add(bound)
	for {
		info, err := c.api.SaleInfo(ctx, saleID)
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
