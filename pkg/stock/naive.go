package stock

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// NaiveReserve is the design this package exists to avoid: read the stock,
// then decrement it, as two separate commands. Between the GET and the DECR
// other buyers pass the same check, so it oversells under contention. It is
// kept, clearly named, only so tests and benchmarks can show the difference;
// no service calls it.
func NaiveReserve(ctx context.Context, client rueidis.Client, saleID, itemID int64) (bool, error) {
	key := StockKey(saleID, itemID)
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
