package lag

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A leader that is not serving yet answers NOT_LEADER_OR_FOLLOWER for a
// while (CI saw it for longer than one request timeout on a just-created
// topic): the reading is retried until its deadline, not given up on the
// first answer, while an error that asking again cannot fix is returned at
// once.
func TestRetryTransient(t *testing.T) {
	notLeader := kafka.NewError(kafka.ErrNotLeaderForPartition, "Broker: Not leader for partition", false)
	permanent := kafka.NewError(kafka.ErrTopicAuthorizationFailed, "Broker: Topic authorization failed", false)
	// failing answers err for its first n calls, then 7.
	failing := func(n int, err error) (func(context.Context) (int, error), *int) {
		calls := 0
		return func(context.Context) (int, error) {
			calls++
			if calls <= n {
				return 0, err
			}
			return 7, nil
		}, &calls
	}
	const pause = time.Millisecond
	far := time.Now().Add(time.Minute)

	t.Run("transient errors are outlasted", func(t *testing.T) {
		f, calls := failing(5, notLeader)
		v, err := retryTransient(context.Background(), far, pause, f)
		if err != nil || v != 7 || *calls != 6 {
			t.Fatalf("got %d, %v after %d calls; want 7 after 6", v, err, *calls)
		}
	})
	t.Run("a permanent error is returned at once", func(t *testing.T) {
		f, calls := failing(5, permanent)
		if _, err := retryTransient(context.Background(), far, pause, f); !errors.Is(err, permanent) || *calls != 1 {
			t.Fatalf("got %v after %d calls; want the permanent error after 1", err, *calls)
		}
	})
	t.Run("the deadline ends the retries with the last error", func(t *testing.T) {
		f, calls := failing(1<<30, notLeader)
		_, err := retryTransient(context.Background(), time.Now().Add(50*time.Millisecond), pause, f)
		if !errors.Is(err, notLeader) || *calls < 2 {
			t.Fatalf("got %v after %d calls; want the transient error after several", err, *calls)
		}
	})
	t.Run("a cancelled context ends the retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		f, calls := failing(1<<30, notLeader)
		if _, err := retryTransient(ctx, far, time.Hour, f); !errors.Is(err, notLeader) || *calls != 1 {
			t.Fatalf("got %v after %d calls; want the transient error after 1", err, *calls)
		}
	})
}
