package consumer

import (
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// SetOnPoll makes Run call f with its client before each poll, in Run's
// goroutine. Call it before Run.
func SetOnPoll(c *Consumer, f func(*kafka.Consumer)) { c.onPoll = f }

// SetStallTimes shortens the stall check's waits. Call it before Run.
func SetStallTimes(c *Consumer, after, every, grace time.Duration) {
	c.stall.after, c.stall.every, c.stall.watch.Grace = after, every, grace
}
