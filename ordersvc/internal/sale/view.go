package sale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"flashsale/ordersvc/internal/store"
)

// View is the JSON of a sale, printed by create-sale and answered by the
// admin API. Left, StockLoaded and Holders come from Redis and are present
// only when Redis was read.
type View struct {
	ID                int64      `json:"id"`
	Name              string     `json:"name"`
	StartsAt          time.Time  `json:"startsAt"`
	EndsAt            time.Time  `json:"endsAt"`
	PaymentTTLSeconds int64      `json:"paymentTtlSeconds"`
	Queue             QueueView  `json:"queue"`
	StockShards       int        `json:"stockShards"`
	CreatedAt         time.Time  `json:"createdAt"`
	Items             []ItemView `json:"items"`
	Holders           *int       `json:"holders,omitempty"`
}

// QueueView is the JSON of a sale's admission settings.
type QueueView struct {
	Enabled       bool  `json:"enabled"`
	Draw          bool  `json:"draw"`
	AdmissionRate int64 `json:"admissionRate"`
	PowDifficulty int   `json:"powDifficulty"`
}

// ItemView is the JSON of an item.
type ItemView struct {
	ID          int64  `json:"id"`
	ProductID   string `json:"productId"`
	Name        string `json:"name"`
	Price       string `json:"price"`
	Quantity    int64  `json:"quantity"`
	Sold        int64  `json:"sold"`
	Left        *int64 `json:"left,omitempty"`
	StockLoaded *bool  `json:"stockLoaded,omitempty"`
}

func viewOf(s store.Sale) View {
	v := View{ID: s.ID, Name: s.Name, StartsAt: s.StartsAt.UTC(), EndsAt: s.EndsAt.UTC(),
		PaymentTTLSeconds: int64(s.PaymentTTL / time.Second), CreatedAt: s.CreatedAt.UTC(), Items: []ItemView{},
		Queue: QueueView(s.Queue), StockShards: s.StockShards}
	for _, it := range s.Items {
		v.Items = append(v.Items, ItemView{ID: it.ID, ProductID: it.ProductID, Name: it.Name, Price: it.Price, Quantity: it.Quantity, Sold: it.Sold})
	}
	return v
}

// CreateRequest is the body of POST /admin/sales.
type CreateRequest struct {
	Name              string    `json:"name"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	PaymentTTLSeconds int64     `json:"paymentTtlSeconds"`
	// Queue is optional: without it the sale has no virtual queue.
	Queue *QueueView `json:"queue,omitempty"`
	// StockShards splits each item's stock over this many Redis shards
	// (default 1; more for a hot item on a Redis Cluster).
	StockShards int           `json:"stockShards,omitempty"`
	Items       []ItemRequest `json:"items"`
}

// ItemRequest is one item of a CreateRequest.
type ItemRequest struct {
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Price     Price  `json:"price"`
	Quantity  int64  `json:"quantity"`
}

// Price is a decimal amount given as a JSON number (19.99) or string
// ("19.99"); it keeps the text, so no float ever rounds money.
type Price string

// UnmarshalJSON accepts a number or a string.
func (p *Price) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = Price(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("price: want a number or a decimal string")
	}
	*p = Price(n.String())
	return nil
}

// MaxRequestBytes bounds a CreateRequest body.
const MaxRequestBytes = 1 << 20

// DecodeCreate decodes and validates a CreateRequest from untrusted bytes.
func DecodeCreate(b []byte) (store.NewSale, error) {
	if len(b) > MaxRequestBytes {
		return store.NewSale{}, fmt.Errorf("%w: body of %d bytes, want at most %d", ErrInvalid, len(b), MaxRequestBytes)
	}
	var req CreateRequest
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
