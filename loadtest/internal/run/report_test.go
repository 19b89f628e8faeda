package run

import (
	"bytes"
	"strings"
	"testing"
)

// A run whose crowd could buy every unit and did not says so, beside an
// audit that may well pass (a sale that sold nothing breaks no invariant).
func TestReportSaysWhenTheSaleDidNotSellOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        Report
		wantFail bool
	}{
		{"sold out", Report{Sold: 10, Stock: 10, SoldOutExpected: true}, false},
		{"nothing sold, the crowd could buy it all", Report{Sold: 0, Stock: 10, SoldOutExpected: true}, true},
		{"some left, the crowd smaller than the stock", Report{Sold: 3, Stock: 10, SoldOutExpected: false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeHuman(&b, tc.r)
			if got := strings.Contains(b.String(), "FAIL: the crowd could buy every unit"); got != tc.wantFail {
				t.Errorf("report says FAIL: %v, want %v\n%s", got, tc.wantFail, b.String())
			}
			if got := tc.r.Summary()["every_unit_sold"]; got != (tc.r.Sold >= tc.r.Stock) {
				t.Errorf("summary every_unit_sold = %v", got)
			}
		})
	}
}
