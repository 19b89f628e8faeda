package store

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"flashsale/pkg/event"
)

func TestDecide(t *testing.T) {
	placed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl = 15 * time.Minute
	stored := uuid.New()
	ev := func(saleID, itemID int64, user string) event.OrderPlaced {
		return event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: saleID, ItemID: itemID, UserID: user, PlacedAt: placed}
	}
	// fresh prechecks: item 10 of sale 1 with left units; user "busy" of
	// sale 1 already active; order stored is a REJECTED row.
	fresh := func(left int64) *prechecks {
		return &prechecks{
			items:    map[int64]*lockedItem{10: {saleID: 1, left: left, ttl: ttl}},
			existing: map[uuid.UUID]existingOrder{stored: {status: StatusRejected, reason: ReasonSoldOutInDB}},
			active:   map[saleUser]bool{{1, "busy"}: true},
		}
	}
	withID := func(e event.OrderPlaced, id uuid.UUID) event.OrderPlaced { e.OrderID = id; return e }
	tests := []struct {
		name       string
		left       int64
		e          event.OrderPlaced
		want       Outcome
		wantRow    bool
		wantStatus string
		wantReason string
		wantExpiry time.Time
		wantLeft   int64 // units left on item 10 afterwards
		wantActive bool  // the event's user is active afterwards
	}{
		// A stored id is a duplicate and reports the stored row, so the
		// caller can dead-letter a REJECTED one again; no row is written.
		{"stored id", 5, withID(ev(1, 10, "u"), stored), Outcome{Kind: Duplicate, Status: StatusRejected, Reason: ReasonSoldOutInDB}, false, "", "", time.Time{}, 5, false},
		// The stored row decides even if the event's item is unknown.
		{"stored id of unknown item", 5, withID(ev(1, 99, "u"), stored), Outcome{Kind: Duplicate, Status: StatusRejected, Reason: ReasonSoldOutInDB}, false, "", "", time.Time{}, 5, false},
		// No such item: no row can reference it.
		{"unknown item", 5, ev(1, 99, "u"), Outcome{Kind: Unpersistable, Reason: ReasonUnknownItem}, false, "", "", time.Time{}, 5, false},
		// An item of another sale is as unknown as a missing one.
		{"item of another sale", 5, ev(2, 10, "u"), Outcome{Kind: Unpersistable, Reason: ReasonUnknownItem}, false, "", "", time.Time{}, 5, false},
		// One active order per user and sale: a visible REJECTED row that
		// expires at once, and the unit is not taken.
		{"user already active", 5, ev(1, 10, "busy"), Outcome{Kind: Rejected, Reason: ReasonAlreadyActive}, true, StatusRejected, ReasonAlreadyActive, placed, 5, true},
		// Already active wins over sold out: the reason says why first.
		{"user already active and sold out", 0, ev(1, 10, "busy"), Outcome{Kind: Rejected, Reason: ReasonAlreadyActive}, true, StatusRejected, ReasonAlreadyActive, placed, 0, true},
		// PostgreSQL has no unit left although Redis let it through.
		{"sold out in the database", 0, ev(1, 10, "u"), Outcome{Kind: Rejected, Reason: ReasonSoldOutInDB}, true, StatusRejected, ReasonSoldOutInDB, placed, 0, false},
		// Accepted: a PENDING row for the payment TTL; it takes a unit and
		// makes the user active for the rest of the batch.
		{"accepted", 5, ev(1, 10, "u"), Outcome{Kind: Accepted}, true, StatusPending, "", placed.Add(ttl), 4, true},
		// The last unit is still a unit.
		{"accepted, last unit", 1, ev(1, 10, "u"), Outcome{Kind: Accepted}, true, StatusPending, "", placed.Add(ttl), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := fresh(tt.left)
			got, row, write := pc.decide(tt.e)
			if got != tt.want {
				t.Errorf("outcome = %+v, want %+v", got, tt.want)
			}
			if write != tt.wantRow {
				t.Fatalf("write = %v, want %v", write, tt.wantRow)
			}
			if write {
				want := orderRow{order: tt.e, status: tt.wantStatus, reason: tt.wantReason, expires: tt.wantExpiry}
				if diff := cmp.Diff(row, want, cmp.AllowUnexported(orderRow{})); diff != "" {
					t.Errorf("row (-got +want):\n%s", diff)
				}
			}
			if got := pc.items[10].left; got != tt.wantLeft {
				t.Errorf("left = %d, want %d", got, tt.wantLeft)
			}
			if got := pc.active[saleUser{tt.e.SaleID, tt.e.UserID}]; got != tt.wantActive {
				t.Errorf("active = %v, want %v", got, tt.wantActive)
			}
		})
	}
}

// TestPlanBatch runs dedupe and plan over one batch, as PersistBatch
// does, and checks the statement's columns and the outcomes of rows the
// INSERT did not return.
func TestPlanBatch(t *testing.T) {
	placed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	events := []event.OrderPlaced{
		{OrderID: a, SaleID: 1, ItemID: 10, UserID: "u1", PlacedAt: placed},
		{OrderID: a, SaleID: 1, ItemID: 10, UserID: "u1", PlacedAt: placed},                     // same id again
		{OrderID: b, SaleID: 1, ItemID: 10, UserID: "u1", PlacedAt: placed, AdmissionID: "t-b"}, // u1 active by now
		{OrderID: c, SaleID: 1, ItemID: 99, UserID: "u2", PlacedAt: placed},                     // unknown item
	}
	out := make([]Outcome, len(events))
	uniq := dedupe(events, out)
	if diff := cmp.Diff(uniq, []int{0, 2, 3}); diff != "" {
		t.Fatalf("dedupe (-got +want):\n%s", diff)
	}
	pc := &prechecks{
		items:    map[int64]*lockedItem{10: {saleID: 1, left: 5, ttl: time.Minute}},
		existing: map[uuid.UUID]existingOrder{},
		active:   map[saleUser]bool{},
	}
	plan := pc.plan(events, uniq, out)
	want := []any{
		[]pgtype.UUID{{Bytes: a, Valid: true}, {Bytes: b, Valid: true}},
		[]int64{1, 1},
		[]int64{10, 10},
		[]string{"u1", "u1"},
		[]string{StatusPending, StatusRejected},
		[]time.Time{placed, placed},
		[]time.Time{placed.Add(time.Minute), placed},
		[]string{"", ReasonAlreadyActive},
		[]string{"", "t-b"},
	}
	if diff := cmp.Diff(plan.args(), want); diff != "" {
		t.Errorf("args (-got +want):\n%s", diff)
	}
	// The INSERT lost b to another writer: b's event becomes a duplicate.
	plan.markLost([]uuid.UUID{a}, out)
	wantOut := []Outcome{
		{Kind: Accepted},
		{Kind: Duplicate},
		{Kind: Duplicate},
		{Kind: Unpersistable, Reason: ReasonUnknownItem},
	}
	if diff := cmp.Diff(out, wantOut); diff != "" {
		t.Errorf("outcomes (-got +want):\n%s", diff)
	}
}

// An admission id the column's check would refuse (and with it the whole
// batch, retried for ever) is stored as none: the order is kept.
func TestPlanDropsAnAdmissionIDItCannotKeep(t *testing.T) {
	placed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	events := []event.OrderPlaced{
		{OrderID: uuid.New(), SaleID: 1, ItemID: 10, UserID: "u1", PlacedAt: placed, AdmissionID: strings.Repeat("t", event.MaxAdmissionIDLen+1)},
		{OrderID: uuid.New(), SaleID: 1, ItemID: 10, UserID: "u2", PlacedAt: placed, AdmissionID: "t-u2"},
	}
	out := make([]Outcome, len(events))
	pc := &prechecks{
		items:    map[int64]*lockedItem{10: {saleID: 1, left: 5, ttl: time.Minute}},
		existing: map[uuid.UUID]existingOrder{},
		active:   map[saleUser]bool{},
	}
	plan := pc.plan(events, dedupe(events, out), out)
	if diff := cmp.Diff(plan.admissions, []string{"", "t-u2"}); diff != "" {
		t.Errorf("admission ids (-got +want):\n%s", diff)
	}
	if out[0].Kind != Accepted || out[1].Kind != Accepted {
		t.Errorf("outcomes %+v, want both accepted", out)
	}
}
