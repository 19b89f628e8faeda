// Package accepted records, in Redis, the orders the gateway answered 202 for
// until the order service has persisted them, so that polling can answer
// PROCESSING for an accepted order that is still on its way through Kafka,
// and 404 for an id nobody was given.
package accepted

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// TTL of a record: far longer than any sane persistence lag. A record that
// outlives its order's row does no harm: PostgreSQL is asked first.
const TTL = 24 * time.Hour

func key(orderID string) string { return "fs:accepted:" + orderID }

// Record notes that orderID was accepted for userID.
func Record(ctx context.Context, c rueidis.Client, orderID, userID string) error {
	if err := c.Do(ctx, RecordCommand(c, orderID, userID)).Error(); err != nil {
		return fmt.Errorf("record accepted order %s: %w", orderID, err)
	}
	return nil
}

// RecordCommand is Record's command, for a caller that sends it in one
// round trip with others (DoMulti).
func RecordCommand(c rueidis.Client, orderID, userID string) rueidis.Completed {
	return c.B().Set().Key(key(orderID)).Value(userID).Ex(TTL).Build()
}

// Owner returns the user an accepted, not yet persisted order belongs to;
// ok is false when no such order was accepted (or the record expired).
func Owner(ctx context.Context, c rueidis.Client, orderID string) (user string, ok bool, err error) {
	user, err = c.Do(ctx, c.B().Get().Key(key(orderID)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read accepted order %s: %w", orderID, err)
	}
	return user, true, nil
}
