package purchase

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"flashsale/gateway/internal/holding"
	"flashsale/pkg/stock"
)

// What a shopper who already holds a unit is told, from the lookup of her
// order. The lookup itself runs against the real Redis and PostgreSQL in
// the app tests (TestLostAnswerFindsTheOrder).
func TestReplayed(t *testing.T) {
	id := uuid.Must(uuid.NewV7())
	const item = 7
	tests := []struct {
		name      string
		order     holding.Order
		err       error
		wantErr   error     // nil: a receipt, 202
		wantID    uuid.UUID // the id she learns
		wantState string
	}{
		// Her lost answer, again: the same order, its current status.
		{name: "same item, persisted", order: holding.Order{ID: id, ItemID: item, Status: holding.Pending}, wantID: id, wantState: holding.Pending},
		{name: "same item, paid", order: holding.Order{ID: id, ItemID: item, Status: holding.Paid}, wantID: id, wantState: holding.Paid},
		{name: "same item, on its way", order: holding.Order{ID: id, ItemID: item, Status: holding.Processing}, wantID: id, wantState: holding.Processing},
		// Another item: refused, with the id of the order she holds.
		{name: "another item", order: holding.Order{ID: id, ItemID: item + 1, Status: holding.Pending}, wantErr: stock.ErrAlreadyPurchased, wantID: id},
		// Item not noted (an old reservation): never a 202 for a guess.
		{name: "item unknown", order: holding.Order{ID: id, Status: holding.Processing}, wantErr: stock.ErrAlreadyPurchased, wantID: id},
		// Not confirmed yet: ask again, with the id.
		{name: "unconfirmed", order: holding.Order{ID: id, ItemID: item}, err: holding.ErrUnconfirmed, wantErr: ErrUnavailable, wantID: id},
		// Her order just ended and its release is on its way: ask again.
		{name: "released meanwhile", err: holding.ErrNone, wantErr: ErrReleasing},
		// The lookup failed: the bare truth, ALREADY_PURCHASED.
		{name: "lookup failed", err: errors.New("dial tcp: refused"), wantErr: stock.ErrAlreadyPurchased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := replayed(tt.order, tt.err, item)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("error %v, want a receipt", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("error %v, want one matching %v", err, tt.wantErr)
			}
			if r.OrderID != tt.wantID || r.Status != tt.wantState || r.Replayed != (tt.wantErr == nil) {
				t.Errorf("receipt %+v, want order %s status %q replayed %v", r, tt.wantID, tt.wantState, tt.wantErr == nil)
			}
		})
	}
}
