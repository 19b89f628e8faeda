package httpapi

import (
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/catalog"
)

type saleItemView struct {
	ID        int64  `json:"id"`
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Price     string `json:"price"`
	Quantity  int64  `json:"quantity"`
	// StockLeft is approximate (refreshed every second); null when unknown.
	StockLeft *int64 `json:"stockLeft"`
	SoldOut   bool   `json:"soldOut"`
}

type saleView struct {
	ID         int64          `json:"id"`
	Name       string         `json:"name"`
	State      catalog.State  `json:"state"`
	StartsAt   time.Time      `json:"startsAt"`
	EndsAt     time.Time      `json:"endsAt"`
	ServerTime time.Time      `json:"serverTime"`
	OpensInMs  int64          `json:"opensInMs"`
	Items      []saleItemView `json:"items"`
	// PurchasePath exists only while the sale is open (and, for a queued
	// sale, comes with the admission token instead).
	PurchasePath  string `json:"purchasePath,omitempty"`
	QueueEnabled  bool   `json:"queueEnabled"`
	PowDifficulty int    `json:"powDifficulty"`
}

// saleInfo answers the sale page: items, stock, countdown and server time.
// The purchase path is revealed only once the sale is open.
func (a *API) saleInfo(ctx *fasthttp.RequestCtx) {
	saleID, ok := pathID(ctx, "saleId")
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	s, ok := a.Catalog.Sale(saleID)
	if !ok {
		errNotFound.Write(ctx)
		return
	}
	now := a.Now()
	v := saleView{ID: s.ID, Name: s.Name, State: s.StateAt(now), StartsAt: s.StartsAt, EndsAt: s.EndsAt,
		ServerTime: now.UTC(), OpensInMs: max(0, s.StartsAt.Sub(now).Milliseconds())}
	for _, it := range s.Items {
		iv := saleItemView{ID: it.ID, ProductID: it.ProductID, Name: it.Name, Price: it.Price, Quantity: it.Quantity, SoldOut: it.SoldOut()}
		if left := it.Left(); left >= 0 {
			iv.StockLeft = &left
		}
		v.Items = append(v.Items, iv)
	}
	// Open sales reveal the purchase path, but a queued sale only to its
	// bypass users: everybody else gets it with an admission token.
	if s.IsOpen(now) {
		if !s.Queue.Enabled {
			v.PurchasePath = purchasePath(s)
		} else if user, ok := a.userID(ctx); ok && a.bypasses(user) {
			v.PurchasePath = purchasePath(s)
		}
	}
	v.QueueEnabled = s.Queue.Enabled
	v.PowDifficulty = s.Queue.PowDifficulty
	b, err := json.Marshal(v)
	if err != nil {
		errInternal.Write(ctx)
		return
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetBody(b)
}
