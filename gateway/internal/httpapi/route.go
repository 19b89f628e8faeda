package httpapi

import (
	"bytes"

	"flashsale/pkg/openapi"
)

// purchaseRoute is a parsed purchase path:
// /api/flash-sales/{saleId}/g/{gate}/items/{itemId}/purchase
type purchaseRoute struct {
	saleID, itemID int64
	gate           []byte // aliases the request path: valid only in the handler
	idsOK          bool   // both ids are canonical positive int64s
}

var (
	prefixSales = []byte("/api/flash-sales/")
	segGate     = []byte("/g/")
	segItems    = []byte("/items/")
	suffixBuy   = []byte("/purchase")
)

// matchPurchase recognises the purchase route without allocating. ok is
// false when the path has another shape (the router answers it); idsOK is
// false when it has this shape with ids that are not canonical positive
// integers (openapi.ParseID: no leading zero, sign or space).
func matchPurchase(path []byte) (purchaseRoute, bool) {
	var r purchaseRoute
	rest, ok := bytes.CutPrefix(path, prefixSales)
	if !ok {
		return r, false
	}
	rest, ok = bytes.CutSuffix(rest, suffixBuy)
	if !ok {
		return r, false
	}
	sale, rest, ok := bytes.Cut(rest, segGate)
	if !ok || len(sale) == 0 || bytes.IndexByte(sale, '/') >= 0 {
		return r, false
	}
	i := bytes.LastIndex(rest, segItems)
	if i <= 0 {
		return r, false
	}
	gate, item := rest[:i], rest[i+len(segItems):]
	if len(item) == 0 || bytes.IndexByte(gate, '/') >= 0 || bytes.IndexByte(item, '/') >= 0 {
		return r, false
	}
	var ok1, ok2 bool
	r.saleID, ok1 = openapi.ParseID(sale)
	r.itemID, ok2 = openapi.ParseID(item)
	r.gate, r.idsOK = gate, ok1 && ok2
	return r, true
}
