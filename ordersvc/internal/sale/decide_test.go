package sale

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
)

func TestJudgeHolder(t *testing.T) {
	now := time.Now()
	recent, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	// The same id read once the window has passed.
	later := now.Add(InFlightWindow + time.Second)
	row := func(user, status string, releasing bool) store.HeldOrder {
		return store.HeldOrder{OrderID: recent, UserID: user, ItemID: 7, Status: status, ReleasePending: releasing}
	}
	tests := []struct {
		name     string
		facts    holderFacts
		want     holderVerdict
		wantDiff string
		wantKeep bool
	}{
		// The user's active order in PostgreSQL wins over anything this
		// holder's own row says; HOLDER_MISSING reports the active one.
		{"user active elsewhere beats a pending row", holderFacts{user: "u", userActive: true, hasRow: true, row: row("u", store.StatusPending, false), id: recent, now: later, window: InFlightWindow}, holderSuperseded, "", false},
		// Even a holder that looks leaked is not reported when the user is active.
		{"user active elsewhere beats no row", holderFacts{user: "u", userActive: true, id: recent, now: later, window: InFlightWindow}, holderSuperseded, "", false},
		// Persisted between the Redis snapshot and the PostgreSQL read.
		{"pending row of this user", holderFacts{user: "u", hasRow: true, row: row("u", store.StatusPending, false), id: recent, now: later, window: InFlightWindow}, holderPersisted, "", true},
		// Paid counts as active too.
		{"paid row of this user", holderFacts{user: "u", hasRow: true, row: row("u", store.StatusPaid, false), id: recent, now: later, window: InFlightWindow}, holderPersisted, "", true},
		// Ended with its release still queued: the relay returns the unit.
		{"expired row with release pending", holderFacts{user: "u", hasRow: true, row: row("u", store.StatusExpired, true), id: recent, now: later, window: InFlightWindow}, holderReleasing, "", false},
		// Ended and nothing queued will ever release it.
		{"expired row, release done", holderFacts{user: "u", hasRow: true, row: row("u", store.StatusExpired, false), id: recent, now: later, window: InFlightWindow}, holderStale, DiffHolderStale, false},
		// A row of another user is not this holder's order, even when active.
		{"row of another user", holderFacts{user: "u", hasRow: true, row: row("v", store.StatusPending, false), id: recent, now: later, window: InFlightWindow}, holderStale, DiffHolderStale, false},
		// Another user's releasing row does not make this holder releasing.
		{"releasing row of another user", holderFacts{user: "u", hasRow: true, row: row("v", store.StatusRejected, true), id: recent, now: later, window: InFlightWindow}, holderStale, DiffHolderStale, false},
		// A row decides before an accepted record: the order reached PostgreSQL.
		{"row beats accepted record", holderFacts{user: "u", hasRow: true, row: row("u", store.StatusRejected, false), accepted: true, id: recent, now: now, window: InFlightWindow}, holderStale, DiffHolderStale, false},
		// The gateway recorded it as accepted: on its way to PostgreSQL.
		{"no row, accepted record", holderFacts{user: "u", accepted: true, id: recent, now: later, window: InFlightWindow}, holderInFlight, "", true},
		// Minted within the window: may still await the broker's ack.
		{"no row, recent id", holderFacts{user: "u", id: recent, now: now, window: InFlightWindow}, holderInFlight, "", true},
		// Past the window with nothing to explain it: leaked.
		{"no row, old id", holderFacts{user: "u", id: recent, now: later, window: InFlightWindow}, holderLeaked, DiffHolderLeaked, false},
		// A v4 id carries no time, so it is never taken for recent.
		{"no row, v4 id", holderFacts{user: "u", id: uuid.New(), now: now, window: InFlightWindow}, holderLeaked, DiffHolderLeaked, false},
		// An unparsable order id arrives as uuid.Nil: no time, no record.
		{"no row, unparsable id", holderFacts{user: "u", now: now, window: InFlightWindow}, holderLeaked, DiffHolderLeaked, false},
		// The window is the service's setting, not the default.
		{"no row, recent id outside a short window", holderFacts{user: "u", id: recent, now: now.Add(2 * time.Second), window: time.Second}, holderLeaked, DiffHolderLeaked, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeHolder(tt.facts)
			if got != tt.want {
				t.Errorf("judgeHolder = %d, want %d", got, tt.want)
			}
			if d := got.diff(); d != tt.wantDiff {
				t.Errorf("diff = %q, want %q", d, tt.wantDiff)
			}
			if k := got.keep(); k != tt.wantKeep {
				t.Errorf("keep = %v, want %v", k, tt.wantKeep)
			}
		})
	}
}

func TestJudgeStock(t *testing.T) {
	item := func(quantity, active, inFlight, releasing int64) ItemReconciliation {
		return ItemReconciliation{ItemID: 1, Quantity: quantity, Active: active, InFlight: inFlight, Releasing: releasing}
	}
	tests := []struct {
		name   string
		item   ItemReconciliation
		left   int64
		loaded bool
		want   stockVerdict
	}{
		// Redis agrees with quantity - active - inFlight - releasing.
		{"agrees", item(10, 3, 1, 1), 5, true, stockVerdict{expected: 5, write: 6}},
		// Releasing units are still held in Redis, so they are expected
		// out of stock, but a repair counts them as returned.
		{"releasing units held, written back", item(10, 0, 0, 2), 8, true, stockVerdict{expected: 8, write: 10}},
		// Any other number is a mismatch, either way.
		{"redis has more", item(10, 3, 0, 0), 9, true, stockVerdict{expected: 7, diff: DiffStockMismatch, write: 7}},
		{"redis has fewer", item(10, 3, 0, 0), 5, true, stockVerdict{expected: 7, diff: DiffStockMismatch, write: 7}},
		// A missing key is reported as not loaded, whatever left says.
		{"key missing", item(10, 3, 0, 0), 0, false, stockVerdict{expected: 7, diff: DiffStockNotLoaded, write: 7}},
		// A missing key of a sold-out item is still not loaded: the
		// gateways answer 503 instead of 410.
		{"key missing, sold out", item(2, 2, 0, 0), 0, false, stockVerdict{expected: 0, diff: DiffStockNotLoaded, write: 0}},
		// More in flight than units: expected goes negative (Redis can
		// never show it), but a repair never writes below zero.
		{"oversubscribed in flight", item(2, 1, 3, 0), 0, true, stockVerdict{expected: -2, diff: DiffStockMismatch, write: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeStock(tt.item, tt.left, tt.loaded); got != tt.want {
				t.Errorf("judgeStock = %+v, want %+v", got, tt.want)
			}
		})
	}
}
