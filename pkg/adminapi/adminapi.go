// Package adminapi is the JSON of the operators' APIs, written once for the
// servers that answer it (ordersvc's admin listener, the gateway's) and the
// clients that read it (the gateway's dashboard, tools/stackapi, the
// tests). pkg/openapi's document describes the same shapes; its
// conformance test checks the real answers against it.
package adminapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// NewSale is the body of POST /admin/sales (ordersvc).
type NewSale struct {
	Name              string    `json:"name"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	PaymentTTLSeconds int64     `json:"paymentTtlSeconds"`
	// Queue is optional: without it the sale has no virtual queue.
	Queue *SaleQueue `json:"queue,omitempty"`
	// StockShards splits each item's stock over this many Redis shards
	// (default 1; more for a hot item on a Redis Cluster).
	StockShards int           `json:"stockShards,omitempty"`
	Items       []NewSaleItem `json:"items"`
}

// NewSaleItem is one item of a NewSale.
type NewSaleItem struct {
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Price     Price  `json:"price"`
	Quantity  int64  `json:"quantity"`
}

// Price is a decimal amount given as a JSON number (19.99) or string
// ("19.99"); it keeps the text, so no float ever rounds money. It is
// written as a string.
type Price string

var errPrice = errors.New("price: want a number or a decimal string")

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
		return errPrice
	}
	*p = Price(n.String())
	return nil
}

// SaleQueue is a sale's admission settings.
type SaleQueue struct {
	Enabled       bool  `json:"enabled"`
	Draw          bool  `json:"draw"`
	AdmissionRate int64 `json:"admissionRate"`
	PowDifficulty int   `json:"powDifficulty"`
}

// Sale is a sale as POST /admin/sales and GET /admin/sales/{saleId}
// answer it (and create-sale prints it). Left, StockLoaded and Holders come
// from Redis and are present only when Redis was read.
type Sale struct {
	ID                int64      `json:"id"`
	Name              string     `json:"name"`
	StartsAt          time.Time  `json:"startsAt"`
	EndsAt            time.Time  `json:"endsAt"`
	PaymentTTLSeconds int64      `json:"paymentTtlSeconds"`
	Queue             SaleQueue  `json:"queue"`
	StockShards       int        `json:"stockShards"`
	CreatedAt         time.Time  `json:"createdAt"`
	Items             []SaleItem `json:"items"`
	Holders           *int       `json:"holders,omitempty"`
}

// SaleItem is one item of a Sale.
type SaleItem struct {
	ID          int64  `json:"id"`
	ProductID   string `json:"productId"`
	Name        string `json:"name"`
	Price       string `json:"price"`
	Quantity    int64  `json:"quantity"`
	Sold        int64  `json:"sold"`
	Left        *int64 `json:"left,omitempty"`
	StockLoaded *bool  `json:"stockLoaded,omitempty"`
}

// LoadResult is what POST /admin/sales/{saleId}/load-stock wrote to Redis.
type LoadResult struct {
	SaleID  int64        `json:"saleId"`
	Items   []LoadedItem `json:"items"`
	Holders int          `json:"holders"`
	// SpentAdmissions is how many admissions orders were placed with,
	// put back in the sale's spent sets (a queued sale's; 0 otherwise).
	SpentAdmissions int `json:"spentAdmissions"`
}

// LoadedItem is the stock written for one item.
type LoadedItem struct {
	ItemID int64 `json:"itemId"`
	Left   int64 `json:"left"`
}

// SaleStatus is GET /admin/sales/{saleId}/status: a sale's order figures
// for the operators' dashboard, orders by status from PostgreSQL (every
// status key always present), the consumer group's lag, the last
// reconcile of the answering process.
type SaleStatus struct {
	SaleID         int64            `json:"saleId"`
	OrdersByStatus map[string]int64 `json:"ordersByStatus"`
	Items          []ItemStatus     `json:"items"`
	ConsumerLag    ConsumerLag      `json:"consumerLag"`
	Reconcile      *Verdict         `json:"reconcile"` // null until one ran in this process
}

// ItemStatus is one item's orders by status.
type ItemStatus struct {
	ItemID         int64            `json:"itemId"`
	OrdersByStatus map[string]int64 `json:"ordersByStatus"`
}

// ConsumerLag is the last reading of the order consumer's lag; Error says
// why there is none (the order counts do not depend on it).
type ConsumerLag struct {
	Total      int64          `json:"total"`
	Partitions []PartitionLag `json:"partitions"`
	Error      string         `json:"error"`
}

// Lag is the consumer group's lag over every partition of the topic, as
// the 409 CONSUMER_LAGGING answer carries it.
type Lag struct {
	Total      int64          `json:"total"`
	Partitions []PartitionLag `json:"partitions"`
}

// PartitionLag is one partition. Committed is the group's committed offset,
// -1 when the group never committed one (it then starts at the earliest
// message still held, the low watermark); End is the high watermark.
type PartitionLag struct {
	Partition int32 `json:"partition"`
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	Lag       int64 `json:"lag"`
}

// Verdict is the last reconcile of a sale computed by one order service.
type Verdict struct {
	At       time.Time `json:"at"`
	Verdict  string    `json:"verdict"` // OK, DRIFT, LAGGING, ERROR
	Repaired bool      `json:"repaired"`
	Summary  string    `json:"summary"`
}

// Lagging is the 409 CONSUMER_LAGGING answer of load-stock and reconcile:
// the usual error body plus the lag left.
type Lagging struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Lag     Lag    `json:"lag"`
}

// Rule is one token bucket: Rate per second (0: no limit), Burst tokens.
type Rule struct {
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

var errRule = errors.New("rule: want {\"rate\": number, \"burst\": integer}, both given")

// UnmarshalJSON takes a rule only with both fields: a missing one would
// read as 0, and rate 0 turns the limit off. It refuses unknown keys
// itself: a decoder's DisallowUnknownFields does not reach into a custom
// UnmarshalJSON, so "brust" would have been dropped and the rule set.
func (r *Rule) UnmarshalJSON(b []byte) error {
	var in struct {
		Rate  *float64 `json:"rate"`
		Burst *int     `json:"burst"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	if in.Rate == nil || in.Burst == nil {
		return errRule
	}
	r.Rate, r.Burst = *in.Rate, *in.Burst
	return nil
}

// Limits is GET and PUT /admin/limits (gateway): the live rate limits of
// one gateway instance. In a PUT, an omitted rule stays as it is.
type Limits struct {
	Purchase RouteLimits `json:"purchase"`
	Queue    RouteLimits `json:"queue"`
	// Poll bounds each shopper's polls of her queue ticket and her
	// requests for an order (per user only); a rule must be off or at
	// least 2 per second.
	Poll UserLimits `json:"poll"`
}

// UserLimits is a route's per-user rule, for a route with no per-IP one.
type UserLimits struct {
	User *Rule `json:"user,omitempty"`
}

// RouteLimits are a route's per-user and per-IP rules.
type RouteLimits struct {
	User *Rule `json:"user,omitempty"`
	IP   *Rule `json:"ip,omitempty"`
}

// QueueState is GET /admin/sales/{saleId}/queue (gateway). QueueLength is
// the places admission has not reached yet (people waiting), Joined how
// many were handed out.
type QueueState struct {
	SaleID        int64     `json:"saleId"`
	AdmittedUpTo  int64     `json:"admittedUpTo"`
	AdmissionRate float64   `json:"admissionRate"`
	QueueLength   int64     `json:"queueLength"`
	Joined        int64     `json:"joined"`
	PowDifficulty int       `json:"powDifficulty"`
	Draw          bool      `json:"draw"`
	OpensAt       time.Time `json:"opensAt"`
}

// AdmissionRateChange is the body of PUT /admin/sales/{saleId}/admission-rate
// (gateway): admitted places per second, for every gateway; required.
type AdmissionRateChange struct {
	Rate *float64 `json:"rate"`
}

// AdmissionRate is the answer of that PUT: the rate now in force.
type AdmissionRate struct {
	SaleID        int64   `json:"saleId"`
	AdmissionRate float64 `json:"admissionRate"`
}

// Bypass is GET /admin/queue/bypass: the users who need no admission
// token, sorted.
type Bypass struct {
	Users []string `json:"users"`
}

// BypassChange is the body of PUT /admin/queue/bypass.
type BypassChange struct {
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
}
