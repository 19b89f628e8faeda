package consumer

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A batch closes when it is full or when its first message has waited
// BatchWait, and an empty one never does.
func TestPolledBatchCloses(t *testing.T) {
	var b polled
	if b.due(2) || b.pollWait() != idlePoll {
		t.Fatalf("empty batch: due %v, poll wait %v; want not due, %v", b.due(2), b.pollWait(), idlePoll)
	}
	b.add(&kafka.Message{}, time.Hour)
	if b.due(2) {
		t.Fatal("one of two messages, within its wait: due")
	}
	if w := b.pollWait(); w <= 0 || w > time.Hour {
		t.Fatalf("poll wait %v, want what is left of the hour", w)
	}
	b.add(&kafka.Message{}, time.Nanosecond) // the deadline is the first message's
	if !b.due(2) {
		t.Fatal("two of two messages: not due")
	}
	if got := len(b.take()); got != 2 || len(b.msgs) != 0 {
		t.Fatalf("take: %d messages, %d left; want 2, 0", got, len(b.msgs))
	}
	b.add(&kafka.Message{}, 0)
	if !b.due(100) || b.pollWait() != 0 {
		t.Fatalf("a message past its wait: due %v, poll wait %v; want due, 0", b.due(100), b.pollWait())
	}
}
