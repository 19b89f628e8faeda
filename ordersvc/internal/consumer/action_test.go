package consumer

import (
	"testing"

	"flashsale/ordersvc/internal/store"
)

func TestActionFor(t *testing.T) {
	tests := []struct {
		name string
		o    store.Outcome
		want action
	}{
		// A new PENDING row: counted, nothing else to do.
		{"accepted", store.Outcome{Kind: store.Accepted}, action{accepted: true}},
		// A new REJECTED row: its outbox row returns the unit; the DLQ and
		// the reject metric tell why.
		{"rejected", store.Outcome{Kind: store.Rejected, Reason: store.ReasonSoldOutInDB}, action{rejectMetric: true, deadLetter: true, drain: true}},
		// No row and so no outbox row: the unit is released directly.
		{"unpersistable", store.Outcome{Kind: store.Unpersistable, Reason: store.ReasonUnknownItem}, action{rejectMetric: true, deadLetter: true, release: true}},
		// A REJECTED row from an earlier delivery: its dead letter may have
		// been lost, so again (at least once), but not counted as a new reject.
		{"duplicate of a rejected row", store.Outcome{Kind: store.Duplicate, Status: store.StatusRejected, Reason: store.ReasonAlreadyActive}, action{duplicate: true, deadLetter: true, drain: true}},
		// A duplicate of an active order holds its unit rightly.
		{"duplicate of a pending row", store.Outcome{Kind: store.Duplicate, Status: store.StatusPending}, action{duplicate: true}},
		// A copy earlier in the same batch, or an id lost to another
		// writer: the stored row was not read, so nothing is redone.
		{"duplicate, status not read", store.Outcome{Kind: store.Duplicate}, action{duplicate: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := actionFor(tt.o); got != tt.want {
				t.Errorf("actionFor = %+v, want %+v", got, tt.want)
			}
		})
	}
}
