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

// DropAssignment stops kc reading its partitions, as a member whose
// session timed out has lost them, without the group knowing: the stall
// check's view of a member that lost its partitions and could not rejoin.
// Call it in Run's goroutine (from SetOnPoll's f).
func DropAssignment(c *Consumer, kc *kafka.Consumer) error {
	parts, err := kc.Assignment()
	if err != nil {
		return err
	}
	if err := kc.Unassign(); err != nil {
		return err
	}
	c.stall.revoked(parts, true, time.Now())
	return nil
}

// SetDeadLetterProducer makes c's first dead-letter producer reach brokers
// (a black hole, say) with deliveries timing out after timeout; a
// replacement reaches the configured brokers with the same timeout. Call
// it before Run.
func SetDeadLetterProducer(c *Consumer, brokers string, timeout time.Duration) error {
	c.producerCfg["message.timeout.ms"] = int(timeout / time.Millisecond)
	first := kafka.ConfigMap{}
	for k, v := range c.producerCfg {
		first[k] = v
	}
	first["bootstrap.servers"] = brokers
	kp, err := kafka.NewProducer(&first)
	if err != nil {
		return err
	}
	c.producer.Close()
	c.producer = kp
	return nil
}

// DeadLetterProducersReplaced is how many times deadLetter replaced the
// producer.
func DeadLetterProducersReplaced(c *Consumer) int64 { return c.producersReplaced.Load() }
