package purchase

import (
	"testing"

	"github.com/google/uuid"

	"flashsale/pkg/event"
)

// What an unconfirmed order's row says about its fate (the real
// PostgreSQL cases are in settle_test.go).
func TestSettlementOf(t *testing.T) {
	id := uuid.Must(uuid.NewV7())
	tests := []struct {
		name           string
		written, taken bool
		reason         string
		want           Settlement
		wantErr        bool
	}{
		{name: "our insert wrote the tombstone", written: true, want: Abandoned},
		// an earlier settlement of the same order (a retry) wrote it
		{name: "our own tombstone from before", taken: true, reason: ReasonPublishFailed, want: Abandoned},
		// the order service's outbox gives the unit back; ours is a no-op
		{name: "the order service found it abandoned", taken: true, reason: event.RejectAbandoned, want: Abandoned},
		{name: "the consumer stored the order", taken: true, reason: "", want: Placed},
		// a rejection by the consumer (here: the database found it sold out)
		// still means the event arrived
		{name: "the consumer rejected the order", taken: true, reason: "SOLD_OUT_IN_DB", want: Placed},
		// nothing deletes orders, so this is a fault, not a fate
		{name: "neither written nor found", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := settlementOf(id, tt.written, tt.taken, tt.reason)
			if (got.err != nil) != tt.wantErr || got.s != tt.want {
				t.Errorf("settlementOf(written %v, taken %v, %q) = %v, %v; want %v (error %v)",
					tt.written, tt.taken, tt.reason, got.s, got.err, tt.want, tt.wantErr)
			}
		})
	}
}
