package sale

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"flashsale/ordersvc/internal/store"
)

// ParseItem parses the CLI form name:price:quantity[:productId]. The name
// cannot contain ':'; the product id may. Without a product id the name is
// used.
func ParseItem(spec string) (store.NewItem, error) {
	parts := strings.SplitN(spec, ":", 4)
	if len(parts) < 3 {
		return store.NewItem{}, fmt.Errorf("%w: item %q: want name:price:quantity[:productId]", ErrInvalid, spec)
	}
	q, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return store.NewItem{}, fmt.Errorf("%w: item %q: quantity %q is not an integer", ErrInvalid, spec, parts[2])
	}
	it := store.NewItem{Name: parts[0], Price: parts[1], Quantity: q, ProductID: parts[0]}
	if len(parts) == 4 {
		it.ProductID = parts[3]
	}
	return it, nil
}

// ParseStart parses an RFC 3339 time, or "+30s" meaning that long after now.
func ParseStart(s string, now time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("%w: starts-at %q: want RFC 3339 or +duration", ErrInvalid, s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: starts-at %q: want RFC 3339 or +duration", ErrInvalid, s)
	}
	return t, nil
}
