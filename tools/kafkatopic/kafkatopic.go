// Package kafkatopic creates Kafka topics with the settings a sale needs and
// waits until every partition's leader serves it, so the first produce or
// offsets read does not meet LEADER_NOT_AVAILABLE or NOT_LEADER_OR_FOLLOWER.
// kafka-admin (deploy/kafka) runs it for the stack's orders topics,
// tools/harness for each test's own topics.
package kafkatopic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ErrNotReady means the cluster answered but a topic is not what was asked
// for yet (a partition without a leader); the caller may retry.
var ErrNotReady = errors.New("not ready")

// ErrMismatch means a topic exists with a shape this package will not
// change on its own (fewer partitions or another replication factor): an
// operator decides, since repartitioning moves every key.
var ErrMismatch = errors.New("topic differs from its specification")

// Spec is a set of topics and the settings each must have.
type Spec struct {
	Topics            []string
	Partitions        int
	ReplicationFactor int
	// MinInsyncReplicas is how many replicas must have a record before an
	// acks=all write is acknowledged.
	MinInsyncReplicas int
	// Retention of the topics: long enough to replay a sale after an
	// incident, short enough not to keep shoppers' ids forever.
	Retention time.Duration
}

// Config is the per-topic configuration every topic of s gets.
func (s Spec) Config() map[string]string {
	return map[string]string{
		"min.insync.replicas":            strconv.Itoa(s.MinInsyncReplicas),
		"unclean.leader.election.enable": "false",
		"retention.ms":                   strconv.FormatInt(s.Retention.Milliseconds(), 10),
		"cleanup.policy":                 "delete",
	}
}

// defaultOpTimeout bounds each broker-side operation when ctx has no
// deadline.
const defaultOpTimeout = 30 * time.Second

func opTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return defaultOpTimeout
}

// Ensure creates each missing topic of s, checks the shape of those that
// exist (partitions, replication factor), sets their configuration, and
// waits until every partition's leader serves it. Running it twice changes
// nothing. It reports what it created and what is ready on out.
func Ensure(ctx context.Context, ac *kafka.AdminClient, s Spec, out io.Writer) error {
	conf := s.Config()
	specs := make([]kafka.TopicSpecification, 0, len(s.Topics))
	for _, t := range s.Topics {
		specs = append(specs, kafka.TopicSpecification{
			Topic: t, NumPartitions: s.Partitions, ReplicationFactor: s.ReplicationFactor, Config: conf,
		})
	}
	res, err := ac.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(opTimeout(ctx)))
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	var existing []string
	for _, r := range res {
		switch r.Error.Code() {
		case kafka.ErrNoError:
			fmt.Fprintf(out, "created topic %s: %d partitions, replication factor %d, min.insync.replicas %d\n",
				r.Topic, s.Partitions, s.ReplicationFactor, s.MinInsyncReplicas)
		case kafka.ErrTopicAlreadyExists:
			existing = append(existing, r.Topic)
		default:
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Error)
		}
	}
	if len(existing) > 0 {
		if err := alterConfig(ctx, ac, existing, conf); err != nil {
			return err
		}
	}
	return waitLeaders(ctx, ac, s, out)
}

// alterConfig sets conf on existing topics, key by key, leaving the others.
func alterConfig(ctx context.Context, ac *kafka.AdminClient, topics []string, conf map[string]string) error {
	var entries []kafka.ConfigEntry
	for k, v := range conf {
		entries = append(entries, kafka.ConfigEntry{Name: k, Value: v, IncrementalOperation: kafka.AlterConfigOpTypeSet})
	}
	resources := make([]kafka.ConfigResource, 0, len(topics))
	for _, t := range topics {
		resources = append(resources, kafka.ConfigResource{Type: kafka.ResourceTopic, Name: t, Config: entries})
	}
	res, err := ac.IncrementalAlterConfigs(ctx, resources)
	if err != nil {
		return fmt.Errorf("set topic configuration of %s: %w", strings.Join(topics, ", "), err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("set topic configuration of %s: %w", r.Name, r.Error)
		}
	}
	return nil
}

// waitLeaders describes the topics until each has its partitions, each with
// a leader, checks the shape against s, then asks every leader for its
// partition's end offset until all of them answer. A described leader is
// not yet a serving one: the metadata names it as soon as the controller
// elects it, and the broker answers NOT_LEADER_OR_FOLLOWER until it has
// applied that election and opened the partition's log, which on a busy
// machine took longer than a client's retries (a consumer-lag read failed
// on it in CI).
func waitLeaders(ctx context.Context, ac *kafka.AdminClient, s Spec, out io.Writer) error {
	var last error
	for {
		d, err := ac.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(s.Topics))
		if err == nil {
			last = checkShape(d.TopicDescriptions, s)
			if errors.Is(last, ErrMismatch) {
				return last
			}
			if last == nil {
				last = checkServing(ctx, ac, d.TopicDescriptions)
			}
			if last == nil {
				for _, t := range d.TopicDescriptions {
					fmt.Fprintf(out, "topic %s ready: %d partitions, replication factor %d\n", t.Name, len(t.Partitions), len(t.Partitions[0].Replicas))
				}
				return nil
			}
		} else {
			last = fmt.Errorf("describe topics: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %s not ready: %w (%w)", strings.Join(s.Topics, ", "), last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkServing asks the leader of every partition of ds for its end offset:
// ErrNotReady until each answers.
func checkServing(ctx context.Context, ac *kafka.AdminClient, ds []kafka.TopicDescription) error {
	specs := make(map[kafka.TopicPartition]kafka.OffsetSpec)
	for _, t := range ds {
		for _, p := range t.Partitions {
			specs[kafka.TopicPartition{Topic: &t.Name, Partition: int32(p.Partition)}] = kafka.LatestOffsetSpec
		}
	}
	res, err := ac.ListOffsets(ctx, specs)
	if err != nil {
		return fmt.Errorf("list end offsets: %w (%w)", ErrNotReady, err)
	}
	return notServing(res, len(specs))
}

// notServing is checkServing's verdict on one ListOffsets answer for want
// partitions: nil when every partition has an offset, else ErrNotReady
// naming the first partition (by topic, then number) still refusing.
func notServing(res kafka.ListOffsetsResult, want int) error {
	if len(res.ResultInfos) != want {
		return fmt.Errorf("%d of %d partitions answered their end offset: %w", len(res.ResultInfos), want, ErrNotReady)
	}
	var bad []kafka.TopicPartition
	for tp, info := range res.ResultInfos {
		if info.Error.Code() != kafka.ErrNoError {
			tp.Error = info.Error
			bad = append(bad, tp)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.SortFunc(bad, func(a, b kafka.TopicPartition) int {
		return cmp.Or(strings.Compare(*a.Topic, *b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return fmt.Errorf("%d of %d partitions do not serve yet, first %s[%d]: %w (%v)",
		len(bad), want, *bad[0].Topic, bad[0].Partition, ErrNotReady, bad[0].Error)
}

// checkShape compares described topics with s: ErrMismatch for a shape that
// waiting does not change, ErrNotReady for a partition without leader.
func checkShape(ds []kafka.TopicDescription, s Spec) error {
	var errs []error
	if len(ds) != len(s.Topics) {
		errs = append(errs, fmt.Errorf("%d of %d topics described: %w", len(ds), len(s.Topics), ErrNotReady))
	}
	for _, t := range ds {
		if t.Error.Code() != kafka.ErrNoError {
			errs = append(errs, fmt.Errorf("topic %s: %w (%v)", t.Name, ErrNotReady, t.Error))
			continue
		}
		if len(t.Partitions) != s.Partitions {
			errs = append(errs, fmt.Errorf("topic %s has %d partitions, want %d (on the local stack deploy/stack.sh wipe recreates it, losing its messages; on a cluster Kafka's bin/kafka-topics.sh --alter --partitions can only add some, and keys move): %w",
				t.Name, len(t.Partitions), s.Partitions, ErrMismatch))
			continue
		}
		for _, p := range t.Partitions {
			if len(p.Replicas) != s.ReplicationFactor {
				errs = append(errs, fmt.Errorf("topic %s partition %d has %d replicas, want %d (on the local stack deploy/stack.sh wipe recreates it, losing its messages; on a cluster Kafka's bin/kafka-reassign-partitions.sh changes it): %w",
					t.Name, p.Partition, len(p.Replicas), s.ReplicationFactor, ErrMismatch))
				break
			}
			if p.Leader == nil || p.Leader.ID < 0 {
				errs = append(errs, fmt.Errorf("topic %s partition %d has no leader: %w", t.Name, p.Partition, ErrNotReady))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Delete removes topics; one that does not exist is not an error.
func Delete(ctx context.Context, ac *kafka.AdminClient, topics ...string) error {
	res, err := ac.DeleteTopics(ctx, topics, kafka.SetAdminOperationTimeout(opTimeout(ctx)))
	if err != nil {
		return fmt.Errorf("delete topics %s: %w", strings.Join(topics, ", "), err)
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrUnknownTopicOrPart {
			return fmt.Errorf("delete topic %s: %w", r.Topic, r.Error)
		}
	}
	return nil
}
