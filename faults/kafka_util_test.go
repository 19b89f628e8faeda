package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// askAgain calls f until it succeeds, or fails with other than a retriable
// Kafka error or one of the transient codes, or the deadline or ctx ends
// the retries, pausing 200 ms between calls; it returns f's last error.
func askAgain(ctx context.Context, deadline time.Time, f func() error, transient ...kafka.ErrorCode) error {
	for {
		err := f()
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || !(kerr.IsRetriable() || slices.Contains(transient, kerr.Code())) ||
			time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// outageBound is how long a purchase may wait for its answer while the
// broker acknowledges nothing: the publish timeout (message.timeout.ms),
// up to a second more for librdkafka to notice that the request in flight
// timed out (it scans its requests in flight once a second,
// rd_kafka_broker_serve), up to a second more to fail the message (queued
// messages are scanned once a second too), and half a second for the
// gateway's settlement on a loaded machine. 7b's slowest answers were
// 2.86–2.89 s against a 1 s timeout once, where 1.8–2.0 s was usual.
func outageBound(publishTimeout time.Duration) time.Duration {
	return publishTimeout + 2500*time.Millisecond
}

// quiet keeps librdkafka's own logging out of the test output.
func quiet(m kafka.ConfigMap) *kafka.ConfigMap {
	m["log_level"] = 0
	return &m
}

func pingKafka(ctx context.Context) error {
	_, err := brokers(ctx, testenv.KafkaBrokers())
	return err
}

// pingKafkaCluster succeeds once all three nodes of the local Kafka cluster
// are registered brokers again.
func pingKafkaCluster(ctx context.Context) error {
	bs, err := brokers(ctx, testenv.KafkaClusterBrokers())
	if err != nil {
		return err
	}
	if len(bs) != testenv.KafkaClusterNodes {
		return fmt.Errorf("%d of %d kafka cluster brokers registered: %v", len(bs), testenv.KafkaClusterNodes, bs)
	}
	return nil
}

// brokers returns the broker addresses a bootstrap server advertises in its
// metadata: where librdkafka connects after the bootstrap.
func brokers(ctx context.Context, bootstrap string) ([]string, error) {
	ac, err := kafka.NewAdminClient(quiet(kafka.ConfigMap{"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000}))
	if err != nil {
		return nil, err
	}
	defer ac.Close()
	timeout := 3 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	md, err := ac.GetMetadata(nil, false, int(timeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(md.Brokers))
	for _, b := range md.Brokers {
		out = append(out, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	return out, nil
}

// message is one message of a topic.
type message struct {
	partition int32
	offset    int64
	orderID   string
	err       error // the payload did not decode
}

// readTopic reads every message of topic from the beginning, without a
// consumer group, up to the high watermarks seen when it starts. A topic
// that does not exist has no messages.
func readTopic(ctx context.Context, topic string) ([]message, error) {
	return readTopicFrom(ctx, testenv.KafkaBrokers(), topic)
}

// readTopicFrom is readTopic on the cluster that bootstrap names.
func readTopicFrom(ctx context.Context, bootstrap, topic string) ([]message, error) {
	c, err := kafka.NewConsumer(quiet(kafka.ConfigMap{
		"bootstrap.servers":    bootstrap,
		"group.id":             "faults-reader", // required by librdkafka, never joined: Assign, no commits
		"enable.auto.commit":   false,
		"enable.partition.eof": true,
	}))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 5000)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	tm, ok := md.Topics[topic]
	if !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic {
		return nil, nil
	}
	if tm.Error.Code() != kafka.ErrNoError {
		return nil, fmt.Errorf("metadata of %s: %w", topic, tm.Error)
	}
	var assign []kafka.TopicPartition
	left := 0
	for _, p := range tm.Partitions {
		lo, hi, err := c.QueryWatermarkOffsets(topic, p.ID, 5000)
		if err != nil {
			return nil, fmt.Errorf("watermarks of %s/%d: %w", topic, p.ID, err)
		}
		if hi > lo {
			assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(lo)})
			left++
		}
	}
	if left == 0 {
		return nil, nil
	}
	if err := c.Assign(assign); err != nil {
		return nil, err
	}
	var out []message
	for left > 0 {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			r := message{partition: e.TopicPartition.Partition, offset: int64(e.TopicPartition.Offset)}
			ev, err := event.Unmarshal(e.Value)
			r.orderID, r.err = ev.OrderID.String(), err
			out = append(out, r)
		case kafka.PartitionEOF:
			left--
		case kafka.Error:
			if e.IsFatal() {
				return out, e
			}
		}
	}
	return out, nil
}

// committed returns the consumer group's committed offset per partition of
// topic (partitions without a commit are absent). It does not join the group.
func committed(topic, group string) (map[int32]int64, error) {
	c, err := kafka.NewConsumer(quiet(kafka.ConfigMap{
		"bootstrap.servers":  testenv.KafkaBrokers(),
		"group.id":           group,
		"enable.auto.commit": false,
	}))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 5000)
	if err != nil {
		return nil, err
	}
	tm, ok := md.Topics[topic]
	if !ok {
		return nil, errors.New("topic not found")
	}
	var tps []kafka.TopicPartition
	for _, p := range tm.Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID})
	}
	// Right after a broker restart the group's coordinator answers
	// NOT_COORDINATOR (or is loading) for a moment: ask again.
	var got []kafka.TopicPartition
	err = askAgain(context.Background(), time.Now().Add(15*time.Second), func() (err error) {
		got, err = c.Committed(tps, 5000)
		return err
	}, kafka.ErrNotCoordinator, kafka.ErrCoordinatorLoadInProgress, kafka.ErrCoordinatorNotAvailable)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, tp := range got {
		if tp.Offset >= 0 {
			out[tp.Partition] = int64(tp.Offset)
		}
	}
	return out, nil
}

// partitionState is one partition's leader and in-sync replicas (node ids).
type partitionState struct {
	leader int
	isr    []int
	// replicas are every node that holds a copy, in sync or not.
	replicas []int
}

// describePartition asks the cluster for one partition's leader and ISR.
// A leader of -1 means none (no live replica may take over).
func describePartition(ctx context.Context, bootstrap, topic string, partition int32) (partitionState, error) {
	ac, err := kafka.NewAdminClient(quiet(kafka.ConfigMap{"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000}))
	if err != nil {
		return partitionState{}, err
	}
	defer ac.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := ac.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames([]string{topic}))
	if err != nil {
		return partitionState{}, fmt.Errorf("describe %s: %w", topic, err)
	}
	if len(d.TopicDescriptions) != 1 || d.TopicDescriptions[0].Error.Code() != kafka.ErrNoError {
		return partitionState{}, fmt.Errorf("describe %s: %v", topic, d.TopicDescriptions)
	}
	for _, p := range d.TopicDescriptions[0].Partitions {
		if int32(p.Partition) != partition {
			continue
		}
		st := partitionState{leader: -1}
		if p.Leader != nil {
			st.leader = p.Leader.ID
		}
		for _, n := range p.Isr {
			st.isr = append(st.isr, n.ID)
		}
		for _, n := range p.Replicas {
			st.replicas = append(st.replicas, n.ID)
		}
		return st, nil
	}
	return partitionState{}, fmt.Errorf("topic %s has no partition %d", topic, partition)
}

// busiestPartition is the partition of topic with the most messages (its
// high watermark), with that count: where a sale's orders go.
func busiestPartition(ctx context.Context, bootstrap, topic string, partitions int) (int32, int64, error) {
	offsets, err := partitionOffsets(ctx, bootstrap, topic, partitions)
	if err != nil {
		return 0, 0, err
	}
	best, most := int32(-1), int64(0)
	for p, n := range offsets {
		if n > most {
			best, most = p, n
		}
	}
	if best < 0 {
		return 0, 0, fmt.Errorf("topic %s has no message", topic)
	}
	return best, most, nil
}

// partitionOffsets is each partition's high watermark.
func partitionOffsets(ctx context.Context, bootstrap, topic string, partitions int) (map[int32]int64, error) {
	ac, err := kafka.NewAdminClient(quiet(kafka.ConfigMap{"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000}))
	if err != nil {
		return nil, err
	}
	defer ac.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := make(map[kafka.TopicPartition]kafka.OffsetSpec, partitions)
	for p := range partitions {
		req[kafka.TopicPartition{Topic: &topic, Partition: int32(p)}] = kafka.LatestOffsetSpec
	}
	// A new admin client's first request can time out while the machine
	// is busy ("Failed to query partition leaders: Local: Timed out", its
	// metadata request cut by socket.timeout.ms): ask again within ctx.
	var res kafka.ListOffsetsResult
	deadline, _ := ctx.Deadline()
	err = askAgain(ctx, deadline, func() (err error) {
		res, err = ac.ListOffsets(ctx, req)
		return err
	}, kafka.ErrTimedOut)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	offsets := make(map[int32]int64, partitions)
	for tp, info := range res.ResultInfos {
		if info.Error.Code() != kafka.ErrNoError {
			return nil, fmt.Errorf("list offsets of %s[%d]: %w", topic, tp.Partition, info.Error)
		}
		offsets[tp.Partition] = int64(info.Offset)
	}
	return offsets, nil
}
