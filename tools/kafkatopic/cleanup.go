package kafkatopic

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// DeleteAtCleanup deletes topics when t's test is over (after the cleanups
// registered later, such as the clients using them), so the local brokers
// do not collect a test's partitions run after run: a broker holding
// thousands of partitions is slower at every metadata request and
// restart. A failure is logged, not fatal.
func DeleteAtCleanup(t testing.TB, brokers string, topics ...string) {
	t.Helper()
	t.Cleanup(func() {
		ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
		if err != nil {
			t.Logf("cleanup: admin client for %s: %v", brokers, err)
			return
		}
		defer ac.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := Delete(ctx, ac, topics...); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}
