package httpapi

import (
	"strconv"
	"testing"
)

func TestMatchPurchase(t *testing.T) {
	tests := []struct {
		path         string
		match, idsOK bool
		sale, item   int64
		gate         string
	}{
		{"/api/flash-sales/7/g/abc/items/42/purchase", true, true, 7, 42, "abc"},
		{"/api/flash-sales/7/g//items/42/purchase", false, false, 0, 0, ""}, // empty gate: the router answers 404
		{"/api/flash-sales/x/g/abc/items/42/purchase", true, false, 0, 42, "abc"},
		{"/api/flash-sales/7/g/abc/items/-1/purchase", true, false, 7, 0, "abc"},
		{"/api/flash-sales/7/g/abc/items/99999999999999999999/purchase", true, false, 7, 0, "abc"},
		{"/api/flash-sales/0/g/abc/items/1/purchase", true, false, 0, 1, "abc"},
		// Ids in one canonical form only (FuzzMatchPurchase's finding:
		// "01" was sale 1, a second URL for the same purchase).
		{"/api/flash-sales/01/g/abc/items/1/purchase", true, false, 0, 1, "abc"},
		{"/api/flash-sales/1/g/abc/items/007/purchase", true, false, 1, 0, "abc"},
		{"/api/flash-sales/+1/g/abc/items/1/purchase", true, false, 0, 1, "abc"},
		{"/api/flash-sales/1 /g/abc/items/1/purchase", true, false, 0, 1, "abc"},
		{"/api/flash-sales/7/g/a/b/items/42/purchase", false, false, 0, 0, ""},
		{"/api/flash-sales/7/items/42/purchase", false, false, 0, 0, ""},
		{"/api/flash-sales/7/g/abc/items/42/purchase/", false, false, 0, 0, ""},
		{"/api/flash-sales/7/g/abc/items/42", false, false, 0, 0, ""},
		{"/api/flash-sales/7", false, false, 0, 0, ""},
		{"/other", false, false, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r, ok := matchPurchase([]byte(tt.path))
			if ok != tt.match || r.idsOK != tt.idsOK {
				t.Fatalf("match=%v idsOK=%v, want %v %v", ok, r.idsOK, tt.match, tt.idsOK)
			}
			if tt.idsOK && (r.saleID != tt.sale || r.itemID != tt.item || string(r.gate) != tt.gate) {
				t.Fatalf("got sale %d item %d gate %q", r.saleID, r.itemID, r.gate)
			}
		})
	}
}

func FuzzMatchPurchase(f *testing.F) {
	f.Add("/api/flash-sales/7/g/abc/items/42/purchase")
	f.Add("/api/flash-sales//g//items//purchase")
	f.Fuzz(func(t *testing.T, path string) {
		r, ok := matchPurchase([]byte(path))
		if ok && r.idsOK {
			want := "/api/flash-sales/" + strconv.FormatInt(r.saleID, 10) + "/g/" + string(r.gate) + "/items/" + strconv.FormatInt(r.itemID, 10) + "/purchase"
			if want != path {
				t.Fatalf("%q parsed as %+v", path, r)
			}
		}
	})
}
