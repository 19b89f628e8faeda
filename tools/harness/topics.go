package harness

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/tools/kafkatopic"
	"flashsale/tools/testenv"
)

// createTopics creates the stack's orders and dead-letter topics before any
// service starts, as an operator does before a sale (auto-creation would
// leave the first purchases waiting for a leader election), and deletes
// them once the test is over and every process stopped (cleanups run last
// in, first out), so the local brokers do not collect hundreds of
// partitions over many runs. They get the stack's partition count
// (deploy/stack.env) and, on a cluster, the production settings:
// replication factor 3, min.insync.replicas 2.
func (s *Stack) createTopics(brokers string) {
	s.t.Helper()
	topics := []string{s.Topic, s.Topic + ".dlq"}
	err := withAdmin(brokers, 60*time.Second, func(ctx context.Context, ac *kafka.AdminClient) error {
		spec, err := testSpec(ctx, ac, topics)
		if err != nil {
			return err
		}
		return kafkatopic.Ensure(ctx, ac, spec, io.Discard)
	})
	if err != nil {
		s.t.Fatal(err)
	}
	kafkatopic.DeleteAtCleanup(s.t, brokers, topics...)
}

// withAdmin runs f with an admin client of brokers, closed when f returns
// (one left open would log every broker a fault test stops), the whole
// bounded by timeout.
func withAdmin(brokers string, timeout time.Duration, f func(context.Context, *kafka.AdminClient) error) error {
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
	if err != nil {
		return fmt.Errorf("admin client for %s: %w", brokers, err)
	}
	defer ac.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return f(ctx, ac)
}

// testSpec is the shape of a test's topics on the cluster behind ac.
func testSpec(ctx context.Context, ac *kafka.AdminClient, topics []string) (kafkatopic.Spec, error) {
	d, err := ac.DescribeCluster(ctx)
	if err != nil {
		return kafkatopic.Spec{}, fmt.Errorf("describe cluster: %w", err)
	}
	partitions, err := testenv.KafkaPartitions()
	if err != nil {
		return kafkatopic.Spec{}, err
	}
	rf := min(3, len(d.Nodes))
	return kafkatopic.Spec{Topics: topics, Partitions: partitions, ReplicationFactor: rf,
		MinInsyncReplicas: min(2, rf), Retention: 7 * 24 * time.Hour}, nil
}
