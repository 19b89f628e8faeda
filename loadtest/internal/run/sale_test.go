package run

import (
	"testing"
	"time"
)

// The stock is spread over the items, the first ones taking the remainder.
func TestNewSaleSpreadsStock(t *testing.T) {
	tests := []struct {
		name         string
		stock, items int
		want         []int64
	}{
		{"even", 300, 2, []int64{150, 150}},
		{"the remainder goes to the first items", 10, 4, []int64{3, 3, 2, 2}},
		{"one item takes all", 7, 1, []int64{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			o.Stock, o.Items = tt.stock, tt.items
			opens := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			ns := newSale(o, "loadtest x", opens)
			var got []int64
			for _, it := range ns.Items {
				got = append(got, it.Quantity)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("quantities %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("quantities %v, want %v", got, tt.want)
					break
				}
			}
			if !ns.EndsAt.Equal(opens.Add(saleLength)) || ns.Queue != nil {
				t.Errorf("sale %+v: want an hour from the opening, no queue", ns)
			}
		})
	}
}
