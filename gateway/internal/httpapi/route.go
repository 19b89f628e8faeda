package httpapi

import "bytes"

// purchaseRoute is a parsed purchase path:
// /api/flash-sales/{saleId}/g/{gate}/items/{itemId}/purchase
type purchaseRoute struct {
	saleID, itemID int64
	gate           []byte // aliases the request path: valid only in the handler
	idsOK          bool   // both ids are positive int64s
}

var (
	prefixSales = []byte("/api/flash-sales/")
	segGate     = []byte("/g/")
	segItems    = []byte("/items/")
	suffixBuy   = []byte("/purchase")
)

// matchPurchase recognises the purchase route without allocating. ok is
// false when the path has another shape (the router answers it); idsOK is
// false when it has this shape with ids that are not positive integers.
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
	r.saleID, ok1 = parseID(sale)
	r.itemID, ok2 = parseID(item)
	r.gate, r.idsOK = gate, ok1 && ok2
	return r, true
}

// parseID reads a positive int64 written in plain decimal digits.
func parseID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, n > 0
}
