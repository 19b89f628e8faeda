package harness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// testPartitions is the partition count of a test's own topics: the
// production count (deploy/stack.env), so a test sees the spread a sale
// does.
const testPartitions = 12

// createTopics creates a test's orders and dead-letter topics before any
// service starts, as an operator does before a sale (auto-creation would
// leave the first purchases waiting for a leader election). On a cluster
// they get the production settings: replication factor 3,
// min.insync.replicas 2.
func createTopics(ctx context.Context, brokers string, topics ...string) error {
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
	if err != nil {
		return fmt.Errorf("admin client for %s: %w", brokers, err)
	}
	defer ac.Close()
	d, err := ac.DescribeCluster(ctx)
	if err != nil {
		return fmt.Errorf("describe cluster %s: %w", brokers, err)
	}
	rf := min(3, len(d.Nodes))
	isr := min(2, rf)
	specs := make([]kafka.TopicSpecification, 0, len(topics))
	for _, t := range topics {
		specs = append(specs, kafka.TopicSpecification{Topic: t, NumPartitions: testPartitions, ReplicationFactor: rf,
			Config: map[string]string{"min.insync.replicas": strconv.Itoa(isr)}})
	}
	res, err := ac.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Error)
		}
	}
	// CreateTopics returns once the controller created them; wait until
	// every partition has a leader the brokers know.
	for {
		desc, err := ac.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(topics))
		if err == nil && allLed(desc.TopicDescriptions, len(topics)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v have no leader for every partition: %w", topics, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func allLed(ds []kafka.TopicDescription, want int) bool {
	if len(ds) != want {
		return false
	}
	for _, t := range ds {
		if t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
			return false
		}
		for _, p := range t.Partitions {
			if p.Leader == nil || p.Leader.ID < 0 {
				return false
			}
		}
	}
	return true
}

// deleteTopics removes a test's topics when it ends, so the local brokers
// do not collect hundreds of partitions over many runs (each costs files
// and start-up time). Errors are reported, not fatal: the test is over.
func deleteTopics(brokers string, topics ...string) error {
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
	if err != nil {
		return fmt.Errorf("admin client for %s: %w", brokers, err)
	}
	defer ac.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := ac.DeleteTopics(ctx, topics, kafka.SetAdminOperationTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrUnknownTopicOrPart {
			return fmt.Errorf("delete topic %s: %w", r.Topic, r.Error)
		}
	}
	return nil
}
