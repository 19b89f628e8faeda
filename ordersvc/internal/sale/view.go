package sale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/adminapi"
)

func viewOf(s store.Sale) View {
	v := View{ID: s.ID, Name: s.Name, StartsAt: s.StartsAt.UTC(), EndsAt: s.EndsAt.UTC(),
		PaymentTTLSeconds: int64(s.PaymentTTL / time.Second), CreatedAt: s.CreatedAt.UTC(), Items: []ItemView{},
		Queue: QueueView(s.Queue), StockShards: s.StockShards}
	for _, it := range s.Items {
		v.Items = append(v.Items, ItemView{ID: it.ID, ProductID: it.ProductID, Name: it.Name, Price: it.Price, Quantity: it.Quantity, Sold: it.Sold})
	}
	return v
}

// The JSON of the admin API is pkg/adminapi's, shared with its clients.
type (
	// View is a sale, printed by create-sale and answered by the admin API.
	View = adminapi.Sale
	// QueueView is a sale's admission settings.
	QueueView = adminapi.SaleQueue
	// ItemView is an item of a View.
	ItemView = adminapi.SaleItem
	// CreateRequest is the body of POST /admin/sales.
	CreateRequest = adminapi.NewSale
	// ItemRequest is one item of a CreateRequest.
	ItemRequest = adminapi.NewSaleItem
	// Price is a decimal amount given as a JSON number or string.
	Price = adminapi.Price
)

// MaxRequestBytes bounds a CreateRequest body.
const MaxRequestBytes = 1 << 20

// DecodeCreate decodes and validates a CreateRequest from untrusted bytes.
func DecodeCreate(b []byte) (store.NewSale, error) {
	if len(b) > MaxRequestBytes {
		return store.NewSale{}, fmt.Errorf("%w: body of %d bytes, want at most %d", ErrInvalid, len(b), MaxRequestBytes)
	}
	// A queue object fills in what it names over the defaults: a partial
	// one ({"enabled": true}) made a sale admitting nobody (rate 0) with
	// no draw.
	defaults := QueueView(store.DefaultQueue)
	req := CreateRequest{Queue: &defaults}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return store.NewSale{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return store.NewSale{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	const maxTTLSeconds = int64(MaxPaymentTTL / time.Second)
	ttl := time.Duration(min(max(req.PaymentTTLSeconds, -1), maxTTLSeconds+1)) * time.Second // no overflow
	ns := store.NewSale{Name: req.Name, StartsAt: req.StartsAt, EndsAt: req.EndsAt, PaymentTTL: ttl, Queue: store.DefaultQueue,
		StockShards: req.StockShards}
	if req.Queue != nil {
		ns.Queue = store.Queue(*req.Queue)
	}
	for _, it := range req.Items {
		ns.Items = append(ns.Items, store.NewItem{ProductID: it.ProductID, Name: it.Name, Price: string(it.Price), Quantity: it.Quantity})
	}
	if err := Validate(ns); err != nil {
		return store.NewSale{}, err
	}
	return ns, nil
}
