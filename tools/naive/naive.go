// Package naive is the stock design flashsale exists to avoid, kept apart
// from the product so no service can call it: read the stock, then
// decrement it, as two separate commands. Between the GET and the DECR other
// buyers pass the same check, so it oversells under contention. The
// redis-naive baseline of benchmarks/ runs it, and its test shows the
// oversell that the atomic script of pkg/stock prevents.
package naive

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
)

// Reserve takes one unit of an item with GET then DECR. It reports whether
// it took one; under contention more buyers than units get true.
func Reserve(ctx context.Context, client rueidis.Client, saleID, itemID int64) (bool, error) {
	key := stock.StockKey(saleID, itemID)
	left, err := client.Do(ctx, client.B().Get().Key(key).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("naive reserve: read stock: %w", err)
	}
	if left <= 0 {
		return false, nil
	}
	if err := client.Do(ctx, client.B().Decr().Key(key).Build()).Error(); err != nil {
		return false, fmt.Errorf("naive reserve: decrement: %w", err)
	}
	return true, nil
}
