package audit

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"flashsale/pkg/event"
)

// clean is a sale of one item of 3 units after a clean run: all sold to
// u0..u2, Redis holds them, nothing left, nothing to release.
func clean() (facts, map[string]string) {
	f := facts{items: []itemFacts{{Item: Item{ID: 7, Quantity: 3, Sold: 3, Active: 3}}}, holders: map[string]string{}}
	accepted := map[string]string{}
	for i := range 3 {
		id, user := fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i)
		f.orders = append(f.orders, orderRow{id: id, user: user, status: "PENDING"})
		f.holders[user] = id
		accepted[id] = user
	}
	return f, accepted
}

// The judgement alone, on facts as read: each row plants one fault (or
// one thing that must not count as a fault) in a clean sale. Problems are
// compared only where their order does not depend on map iteration.
func TestJudge(t *testing.T) {
	tests := []struct {
		name  string
		plant func(f *facts, accepted map[string]string)
		want  Verdict
		// problems, when set, is the exact list of problems expected.
		problems []string
	}{
		{
			name:  "a clean run holds every invariant",
			plant: func(*facts, map[string]string) {},
			want:  Verdict{StockConserved: true},
		},
		{
			// a consumer that bypassed the sold counter: 4 rows for 3 units
			name: "an active order beyond quantity is an oversell",
			plant: func(f *facts, a map[string]string) {
				f.items[0].Active = 4
				f.orders = append(f.orders, orderRow{id: "o9", user: "u9", status: "PAID"})
				a["o9"] = "u9"
				f.holders["u9"] = "o9"
			},
			want: Verdict{Oversold: 1, StockConserved: false},
			problems: []string{
				"item 7: Redis left 0 + active 4 != quantity 3",
				"item 7: 4 active orders for 3 units",
				"item 7: sold column 3 != active orders 4",
			},
		},
		{
			name:     "a negative Redis stock is an oversell by its size",
			plant:    func(f *facts, _ map[string]string) { f.items[0].RedisLeft = -2 },
			want:     Verdict{Oversold: 2},
			problems: []string{"item 7: Redis stock is -2", "item 7: Redis left -2 + active 3 != quantity 3"},
		},
		{
			// -1 read from Redis is an oversell, not the missing-key marker
			name:  "a Redis stock of -1 is an oversell of one",
			plant: func(f *facts, _ map[string]string) { f.items[0].RedisLeft = -1 },
			want:  Verdict{Oversold: 1},
		},
		{
			name:     "a missing stock key breaks conservation and shows as -1",
			plant:    func(f *facts, _ map[string]string) { f.items[0].redisMissing = true },
			want:     Verdict{StockConserved: false},
			problems: []string{"item 7: stock key missing in Redis"},
		},
		{
			name:     "Redis stock drifting from PostgreSQL breaks conservation",
			plant:    func(f *facts, _ map[string]string) { f.items[0].RedisLeft = 5 },
			want:     Verdict{StockConserved: false},
			problems: []string{"item 7: Redis left 5 + active 3 != quantity 3"},
		},
		{
			name: "a sold column apart from the active orders breaks conservation",
			plant: func(f *facts, _ map[string]string) {
				f.items[0].Sold = 2
			},
			want:     Verdict{StockConserved: false},
			problems: []string{"item 7: sold column 2 != active orders 3"},
		},
		{
			name:     "a 202 without a row is lost",
			plant:    func(_ *facts, a map[string]string) { a["ghost-order"] = "ghost" },
			want:     Verdict{Lost: 1, StockConserved: true},
			problems: []string{"order ghost-order was answered 202 but has no row"},
		},
		{
			name:     "a row of another user than the one told is a duplicate",
			plant:    func(_ *facts, a map[string]string) { a["o0"] = "someone-else" },
			want:     Verdict{Duplicates: 1, StockConserved: true},
			problems: []string{"order o0 belongs to u0 in PostgreSQL, was answered to someone-else"},
		},
		{
			name:     "a row nobody was told about is a duplicate",
			plant:    func(_ *facts, a map[string]string) { delete(a, "o0") },
			want:     Verdict{Duplicates: 1, StockConserved: true},
			problems: []string{"order o0 exists but nobody was answered 202 for it"},
		},
		{
			name: "a gateway's tombstone for a publish it gave up on is no duplicate",
			plant: func(f *facts, _ map[string]string) {
				f.orders = append(f.orders, orderRow{id: "t1", user: "late", status: "REJECTED", reason: PublishFailed})
			},
			want: Verdict{StockConserved: true},
		},
		{
			name: "the order service's row for an abandoned reservation is no duplicate",
			plant: func(f *facts, _ map[string]string) {
				f.orders = append(f.orders, orderRow{id: "t1", user: "late", status: "REJECTED", reason: event.RejectAbandoned})
			},
			want: Verdict{StockConserved: true},
		},
		{
			name: "any other REJECTED row nobody was told about is a duplicate",
			plant: func(f *facts, _ map[string]string) {
				f.orders = append(f.orders, orderRow{id: "t1", user: "late", status: "REJECTED", reason: "ALREADY_ACTIVE"})
			},
			want:     Verdict{Duplicates: 1, StockConserved: true},
			problems: []string{"order t1 exists but nobody was answered 202 for it"},
		},
		{
			// told twice, and both rows exist: the second active order is the duplicate
			name: "a second active order of one user is a duplicate",
			plant: func(f *facts, a map[string]string) {
				f.orders[1].user = "u0"
				a["o1"] = "u0"
			},
			want: Verdict{Duplicates: 1, StockConserved: false},
			problems: []string{"user u0 holds 2 active orders",
				`2 holders differ from the active orders: Redis holds o0 for u0, PostgreSQL's active order is "o1"; Redis holds o1 for u1, PostgreSQL's active order is ""`},
		},
		{
			name:  "Redis holders apart from the active orders break conservation",
			plant: func(f *facts, _ map[string]string) { delete(f.holders, "u2") },
			want:  Verdict{StockConserved: false},
			problems: []string{"Redis holds 2 buyers, PostgreSQL 3 active orders",
				"1 holders differ from the active orders: u2 holds active order o2, Redis no unit"},
		},
		{
			// as many holders as active orders, but not theirs: u2 could
			// buy again, u9 is refused with no order
			name: "a holder who is not the active order's shopper breaks conservation",
			plant: func(f *facts, _ map[string]string) {
				delete(f.holders, "u2")
				f.holders["u9"] = "bogus"
			},
			want:     Verdict{StockConserved: false},
			problems: []string{"2 holders differ from the active orders: Redis holds bogus for u9, PostgreSQL's active order is \"\"; u2 holds active order o2, Redis no unit"},
		},
		{
			name:     "a holder naming another order of its shopper breaks conservation",
			plant:    func(f *facts, _ map[string]string) { f.holders["u1"] = "o-stale" },
			want:     Verdict{StockConserved: false},
			problems: []string{"1 holders differ from the active orders: Redis holds o-stale for u1, PostgreSQL's active order is \"o1\""},
		},
		{
			// Redis sold a 4th unit of 3; PostgreSQL refused it
			name: "a 202 PostgreSQL refused for lack of stock is an oversell",
			plant: func(f *facts, a map[string]string) {
				f.items[0].Rejected = 1
				f.orders = append(f.orders, orderRow{id: "o9", user: "u9", status: "REJECTED", reason: "SOLD_OUT_IN_DB"})
				a["o9"] = "u9"
			},
			want:     Verdict{Oversold: 1, StockConserved: true},
			problems: []string{"order o9 was answered 202 but PostgreSQL had no unit for it (REJECTED SOLD_OUT_IN_DB)"},
		},
		{
			name: "a 202 written off afterwards is lost",
			plant: func(f *facts, a map[string]string) {
				f.items[0].Rejected = 1
				f.orders = append(f.orders, orderRow{id: "o9", user: "u9", status: "REJECTED", reason: PublishFailed})
				a["o9"] = "u9"
			},
			want:     Verdict{Lost: 1, StockConserved: true},
			problems: []string{"order o9 was answered 202 but is REJECTED (" + PublishFailed + ")"},
		},
		{
			name:     "ended orders whose unit is not back yet are unreleased rejects",
			plant:    func(f *facts, _ map[string]string) { f.unreleased = 2 },
			want:     Verdict{UnreleasedRejects: 2, StockConserved: true},
			problems: []string{"2 ended orders still wait for their unit to be returned"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, accepted := clean()
			tt.plant(&f, accepted)
			got := judge(f, accepted)
			if got.OK() != tt.want.OK() {
				t.Errorf("OK() = %v, want %v (verdict %+v)", got.OK(), tt.want.OK(), got)
			}
			counts := func(v Verdict) [5]any {
				return [5]any{v.Oversold, v.Lost, v.Duplicates, v.StockConserved, v.UnreleasedRejects}
			}
			if diff := cmp.Diff(counts(got), counts(tt.want)); diff != "" {
				t.Errorf("oversold, lost, duplicates, conserved, unreleased (-got +want):\n%s", diff)
			}
			if tt.problems != nil {
				if diff := cmp.Diff(got.Problems, tt.problems); diff != "" {
					t.Errorf("problems (-got +want):\n%s", diff)
				}
			}
			if tt.want.OK() != (len(got.Problems) == 0) {
				t.Errorf("problems %q for a verdict with OK() = %v", got.Problems, got.OK())
			}
			if len(got.Items) != len(f.items) {
				t.Fatalf("%d items in the verdict, want %d", len(got.Items), len(f.items))
			}
			wantLeft := f.items[0].RedisLeft
			if f.items[0].redisMissing {
				wantLeft = -1
			}
			if got.Items[0].RedisLeft != wantLeft {
				t.Errorf("item RedisLeft %d, want %d", got.Items[0].RedisLeft, wantLeft)
			}
		})
	}
}

// Only five lost orders and five unannounced rows are described, however
// many there are: a broken run must not bury the report.
func TestJudgeCapsDescriptions(t *testing.T) {
	f, accepted := clean()
	for i := range 8 {
		accepted[fmt.Sprintf("ghost%d", i)] = "ghost"
		f.orders = append(f.orders, orderRow{id: fmt.Sprintf("extra%d", i), user: fmt.Sprintf("x%d", i), status: "REJECTED"})
	}
	v := judge(f, accepted)
	if v.Lost != 8 || v.Duplicates != 8 {
		t.Fatalf("lost %d, duplicates %d, want 8 and 8", v.Lost, v.Duplicates)
	}
	if len(v.Problems) != 10 {
		t.Errorf("%d problems described, want 5 lost + 5 duplicates: %q", len(v.Problems), v.Problems)
	}
}
