package outcome

import (
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		r      vegeta.Result
		want   Kind
		wantID string
	}{
		{"accepted", vegeta.Result{Code: 202, Body: []byte(`{"orderId":"o1","status":"PENDING"}`)}, Accepted, "o1"},
		// A retried purchase answered with the order the shopper already held.
		{"replay, not yet persisted", vegeta.Result{Code: 202, Body: []byte(`{"orderId":"o2","status":"PROCESSING"}`)}, Accepted, "o2"},
		{"replay, paid", vegeta.Result{Code: 202, Body: []byte(`{"orderId":"o3","status":"PAID"}`)}, Accepted, "o3"},
		{"202 with an unknown status is an error", vegeta.Result{Code: 202, Body: []byte(`{"orderId":"o4","status":"MAYBE"}`)}, Errors, ""},
		{"202 without order id is not a sale", vegeta.Result{Code: 202, Body: []byte(`{}`)}, Errors, ""},
		{"sold out", vegeta.Result{Code: 410, Body: []byte(`{"error":"SOLD_OUT"}`)}, SoldOut, ""},
		{"already purchased", vegeta.Result{Code: 409, Body: []byte(`{"error":"ALREADY_PURCHASED"}`)}, AlreadyPurchased, ""},
		{"rate limited", vegeta.Result{Code: 429, Body: []byte(`{"error":"RATE_LIMITED"}`)}, RateLimited, ""},
		{"not admitted", vegeta.Result{Code: 403, Body: []byte(`{"error":"NOT_ADMITTED"}`)}, NotAdmitted, ""},
		{"admission used", vegeta.Result{Code: 403, Body: []byte(`{"error":"ADMISSION_USED"}`)}, NotAdmitted, ""},
		{"unavailable", vegeta.Result{Code: 503, Body: []byte(`{"error":"UNAVAILABLE"}`)}, Unavailable, ""},
		{"transport error", vegeta.Result{Error: "connection refused"}, Errors, ""},
		{"410 with an HTML body is an error", vegeta.Result{Code: 410, Body: []byte(`<html>`)}, Errors, ""},
		{"500", vegeta.Result{Code: 500, Body: []byte(`{"error":"INTERNAL"}`)}, Errors, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, id := Classify(&tt.r)
			if got != tt.want || id != tt.wantID {
				t.Errorf("Classify() = %v %q, want %v %q", got, id, tt.want, tt.wantID)
			}
		})
	}
}

func TestTallyArithmetic(t *testing.T) {
	var tl Tally
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= 100; i++ {
		r := vegeta.Result{Code: 410, Body: []byte(`{"error":"SOLD_OUT"}`), Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Latency: time.Duration(i) * time.Millisecond}
		if i <= 10 {
			r.Code, r.Body = 202, []byte(`{"orderId":"x","status":"PENDING"}`)
		}
		tl.Add(&r)
	}
	if tl.Count[Accepted] != 10 || tl.Count[SoldOut] != 90 || tl.Total() != 100 {
		t.Fatalf("counts = %v", tl.Count)
	}
	all := tl.LatencyAll()
	if all.P50 != 50*time.Millisecond || all.P99 != 99*time.Millisecond || all.Max != 100*time.Millisecond {
		t.Errorf("percentiles = %+v, want p50 50ms p99 99ms max 100ms", all)
	}
	if acc := tl.Latency(Accepted); acc.P50 != 5*time.Millisecond {
		t.Errorf("accepted p50 = %v, want 5ms", acc.P50)
	}
	// the 10th result (accepted) started at +10ms and took 10ms
	if got := tl.LastAccepted.Sub(t0); got != 20*time.Millisecond {
		t.Errorf("last accepted at +%v, want +20ms", got)
	}
	if got := tl.First.Sub(t0); got != time.Millisecond {
		t.Errorf("first at +%v, want +1ms", got)
	}
}
