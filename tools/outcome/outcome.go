// Package outcome classifies the load test's results by status code and
// error body. vegeta counts every non-2xx as a failure, but a flash sale is
// mostly 409/410/429 by design, so its success ratio means nothing here.
package outcome

import (
	"encoding/json"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Kind of answer a shopper got.
type Kind int

// Kinds, in report order.
const (
	Accepted Kind = iota
	SoldOut
	AlreadyPurchased
	RateLimited
	NotAdmitted
	NotFound
	Unauthorized
	Unavailable
	Errors // transport errors and unexpected answers
	numKinds
)

var names = [numKinds]string{"accepted", "sold_out", "already_purchased", "rate_limited", "not_admitted", "not_found", "unauthorized", "unavailable", "errors"}

func (k Kind) String() string { return names[k] }

// Kinds lists every kind in report order.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

type body struct {
	Error   string `json:"error"`
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// Classify reads one result. For an accepted purchase it also returns the
// order id the shopper was given.
func Classify(r *vegeta.Result) (Kind, string) {
	if r.Error != "" && r.Code == 0 {
		return Errors, ""
	}
	var b body
	_ = json.Unmarshal(r.Body, &b) // a body that is not JSON classifies as Errors below
	switch {
	case r.Code == 202 && b.OrderID != "" && (b.Status == "PENDING" || b.Status == "PROCESSING" || b.Status == "PAID"):
		// PROCESSING and PAID come only in a replay: the shopper already
		// held this order (the accepted map keys on the id, so it counts once).
		return Accepted, b.OrderID
	case r.Code == 410 && b.Error == "SOLD_OUT":
		return SoldOut, ""
	case r.Code == 409 && b.Error == "ALREADY_PURCHASED":
		return AlreadyPurchased, ""
	case r.Code == 429 && b.Error == "RATE_LIMITED":
		return RateLimited, ""
	case r.Code == 403 && (b.Error == "NOT_ADMITTED" || b.Error == "ADMISSION_USED"):
		// A spent admission is a refused admission to the crowd's tally.
		return NotAdmitted, ""
	case r.Code == 404:
		return NotFound, ""
	case r.Code == 401:
		return Unauthorized, ""
	case r.Code == 503 && b.Error == "UNAVAILABLE":
		return Unavailable, ""
	}
	return Errors, ""
}

// Tally counts outcomes and keeps latencies per kind.
type Tally struct {
	Count     [numKinds]int
	latencies [numKinds][]time.Duration
	First     time.Time // first request sent
	Last      time.Time // last answer received
	// LastAccepted is when the last accepted purchase was answered.
	LastAccepted time.Time
	// FirstSoldOut is when the first SOLD_OUT was answered.
	FirstSoldOut time.Time
}

// Add records one result and returns its kind and order id.
func (t *Tally) Add(r *vegeta.Result) (Kind, string) {
	k, id := Classify(r)
	t.Count[k]++
	t.latencies[k] = append(t.latencies[k], r.Latency)
	end := r.End()
	if t.First.IsZero() || r.Timestamp.Before(t.First) {
		t.First = r.Timestamp
	}
	if end.After(t.Last) {
		t.Last = end
	}
	if k == Accepted && end.After(t.LastAccepted) {
		t.LastAccepted = end
	}
	if k == SoldOut && (t.FirstSoldOut.IsZero() || end.Before(t.FirstSoldOut)) {
		t.FirstSoldOut = end
	}
	return k, id
}

// Total is the number of results.
func (t *Tally) Total() int {
	n := 0
	for _, c := range t.Count {
		n += c
	}
	return n
}

// Percentiles of one kind's latencies (or of all when all is true).
type Percentiles struct {
	P50, P90, P99, Max time.Duration
}

// Latency returns the percentiles of kind k.
func (t *Tally) Latency(k Kind) Percentiles { return percentiles(t.latencies[k]) }

// LatencyAll returns the percentiles over every result.
func (t *Tally) LatencyAll() Percentiles {
	var all []time.Duration
	for _, l := range t.latencies {
		all = append(all, l...)
	}
	return percentiles(all)
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		// nearest rank: the smallest value with at least q of the data at or below it
		i := int(q*float64(len(s))+0.999999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: s[len(s)-1]}
}
