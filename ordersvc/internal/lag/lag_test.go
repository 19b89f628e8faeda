package lag_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"flashsale/ordersvc/internal/lag"
	"flashsale/tools/testenv"
)

// names gives each test its own topic and group on the shared broker.
func names(t *testing.T) (topic, group string) {
	s := uuid.NewString()[:8]
	return "test-lag-" + s, "test-lag-" + s
}

func newReader(t *testing.T, topic, group string) *lag.Reader {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	r, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Group: group, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// produce writes n messages with distinct keys, so they spread over the
// topic's partitions, and waits for every acknowledgement.
func produce(t *testing.T, topic string, n int) {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "acks": "all", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reports := make(chan kafka.Event, n)
	for i := range n {
		err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(fmt.Sprint(i)), Value: []byte("x")}, reports)
		if err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatal(m.TopicPartition.Error)
		}
	}
}

// consumeAndCommit joins group, reads n messages and commits them, as the
// order consumer does after persisting a batch.
func consumeAndCommit(ctx context.Context, topic, group string, n int) error {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "group.id": group,
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "log_level": 3})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		return err
	}
	for read := 0; read < n; {
		if ctx.Err() != nil {
			return fmt.Errorf("read %d of %d: %w", read, n, ctx.Err())
		}
		ev := c.Poll(100)
		if m, ok := ev.(*kafka.Message); ok {
			if m.TopicPartition.Error != nil {
				return m.TopicPartition.Error
			}
			read++
		}
	}
	_, err = c.Commit()
	return err
}

func TestLag(t *testing.T) {
	t.Parallel()
	topic, group := names(t)
	r := newReader(t, topic, group)
	ctx := testenv.Context(t)

	// No topic yet: nothing was produced, nothing to wait for.
	l, err := r.Lag(ctx)
	if err != nil || l.Total != 0 || len(l.Partitions) != 0 {
		t.Fatalf("lag of a topic not created yet: got %+v, %v; want 0 and no partitions", l, err)
	}
	if _, err := r.WaitCaughtUp(ctx, time.Second); err != nil {
		t.Fatalf("wait on a topic not created yet: %v", err)
	}

	const n = 25
	produce(t, topic, n)
	l, err = r.Lag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != n {
		t.Errorf("lag with no consumer: got %d, want %d (%+v)", l.Total, n, l)
	}
	var ends, lags int64
	for _, p := range l.Partitions {
		if p.Committed != -1 {
			t.Errorf("partition %d: committed %d before any commit, want -1", p.Partition, p.Committed)
		}
		ends += p.End
		lags += p.Lag
	}
	if ends != n || lags != n || len(l.Partitions) < 2 {
		t.Errorf("partitions: ends sum to %d, lags to %d over %d partitions; want %d each over several", ends, lags, len(l.Partitions), n)
	}

	if err := consumeAndCommit(ctx, topic, group, n); err != nil {
		t.Fatal(err)
	}
	l, err = r.Lag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 0 {
		t.Errorf("lag after the group committed everything: got %d, want 0 (%+v)", l.Total, l)
	}
	for _, p := range l.Partitions {
		if p.End > 0 && p.Committed != p.End {
			t.Errorf("partition %d: committed %d, want its end %d", p.Partition, p.Committed, p.End)
		}
	}
}

// With nobody consuming, the wait ends at its bound with ErrLagging and
// the lag left, in words an operator can act on.
func TestWaitCaughtUpTimesOut(t *testing.T) {
	t.Parallel()
	topic, group := names(t)
	r := newReader(t, topic, group)
	ctx := testenv.Context(t)
	produce(t, topic, 7)

	l, err := r.WaitCaughtUp(ctx, 300*time.Millisecond)
	var le *lag.LaggingError
	if !errors.Is(err, lag.ErrLagging) || !errors.As(err, &le) {
		t.Fatalf("got %v, want a *LaggingError", err)
	}
	if le.Lag.Total != 7 || l.Total != 7 || le.Group != group || le.Topic != topic || le.Waited < 300*time.Millisecond {
		t.Errorf("lagging error: got %+v (returned lag %+v), want 7 behind on %s/%s after >= 300ms", le, l, group, topic)
	}
	for _, want := range []string{group, topic, "7 messages behind", "committed -1", "retry"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// The wait returns once the group commits up to the watermarks read when
// it started.
func TestWaitCaughtUp(t *testing.T) {
	t.Parallel()
	topic, group := names(t)
	r := newReader(t, topic, group)
	ctx := testenv.Context(t)
	const n = 12
	produce(t, topic, n)

	done := make(chan error, 1)
	go func() { done <- consumeAndCommit(ctx, topic, group, n) }()
	l, err := r.WaitCaughtUp(ctx, 30*time.Second)
	if err != nil {
		t.Fatalf("wait while the group consumes: %v", err)
	}
	if l.Total != 0 {
		t.Errorf("lag when caught up: got %+v, want 0", l)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNewNeedsTopicAndGroup(t *testing.T) {
	if _, err := lag.New(lag.Config{Brokers: "127.0.0.1:1", Topic: "t"}); err == nil {
		t.Error("no group: got no error")
	}
}
