package main

import (
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

// errNotReady means the cluster answered but is not what was asked for yet
// (too few brokers, a partition without a leader); the caller may retry.
var errNotReady = errors.New("not ready")

// errMismatch means a topic exists with a shape this tool will not change on
// its own (fewer partitions or another replication factor): an operator
// decides, since repartitioning moves every key.
var errMismatch = errors.New("topic differs from its specification")

// withAdmin runs f with an admin client of bootstrap, the whole bounded by
// timeout.
func withAdmin(ctx context.Context, bootstrap string, timeout time.Duration, f func(context.Context, *kafka.AdminClient) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ac, err := newAdmin(bootstrap, timeout)
	if err != nil {
		return err
	}
	defer ac.Close()
	return f(ctx, ac)
}

func newAdmin(bootstrap string, timeout time.Duration) (*kafka.AdminClient, error) {
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{
		"bootstrap.servers":        bootstrap,
		"client.id":                "flashsale-kafka-admin",
		"socket.timeout.ms":        int(max(timeout, time.Second) / time.Millisecond),
		"reconnect.backoff.ms":     100,
		"reconnect.backoff.max.ms": 500,
		"log_level":                3, // errors only: a probe of a starting broker refuses connections
		"log.connection.close":     false,
		"enable.metrics.push":      false,
	})
	if err != nil {
		return nil, fmt.Errorf("admin client for %s: %w", bootstrap, err)
	}
	return ac, nil
}

// probe succeeds once the cluster lists cfg.Brokers brokers and names a
// controller: a node that answers metadata before it has caught up with the
// quorum lists fewer.
func probe(ctx context.Context, ac *kafka.AdminClient, cfg ProbeConfig, stdout io.Writer) error {
	d, err := ac.DescribeCluster(ctx)
	if err != nil {
		return fmt.Errorf("probe %s: describe cluster: %w", cfg.Bootstrap, err)
	}
	if len(d.Nodes) < cfg.Brokers {
		return fmt.Errorf("probe %s: %d of %d brokers registered: %w", cfg.Bootstrap, len(d.Nodes), cfg.Brokers, errNotReady)
	}
	ids := make([]string, 0, len(d.Nodes))
	for _, n := range d.Nodes {
		ids = append(ids, fmt.Sprintf("%d@%s:%d", n.ID, n.Host, n.Port))
	}
	slices.Sort(ids)
	cluster := "?"
	if d.ClusterID != nil {
		cluster = *d.ClusterID
	}
	fmt.Fprintf(stdout, "kafka %s ok: cluster %s, brokers %s\n", cfg.Bootstrap, cluster, strings.Join(ids, " "))
	return nil
}

// topicConfig is the per-topic configuration every topic of cfg gets.
func topicConfig(cfg TopicsConfig) map[string]string {
	return map[string]string{
		"min.insync.replicas":            strconv.Itoa(cfg.MinInsyncReplicas),
		"unclean.leader.election.enable": "false",
		"retention.ms":                   strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
		"cleanup.policy":                 "delete",
	}
}

// ensureTopics creates each missing topic, checks the shape of those that
// exist (partitions, replication factor), sets their configuration, and
// waits until every partition has a leader, so the first produce after it
// returns does not meet LEADER_NOT_AVAILABLE. Running it twice changes
// nothing.
func ensureTopics(ctx context.Context, ac *kafka.AdminClient, cfg TopicsConfig, stdout io.Writer) error {
	conf := topicConfig(cfg)
	specs := make([]kafka.TopicSpecification, 0, len(cfg.Topics))
	for _, t := range cfg.Topics {
		specs = append(specs, kafka.TopicSpecification{
			Topic: t, NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor, Config: conf,
		})
	}
	res, err := ac.CreateTopics(ctx, specs, kafka.SetAdminOperationTimeout(cfg.Timeout))
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	var existing []string
	for _, r := range res {
		switch r.Error.Code() {
		case kafka.ErrNoError:
			fmt.Fprintf(stdout, "created topic %s: %d partitions, replication factor %d, min.insync.replicas %d\n",
				r.Topic, cfg.Partitions, cfg.ReplicationFactor, cfg.MinInsyncReplicas)
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
	return waitLeaders(ctx, ac, cfg, stdout)
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
// a leader, and checks the shape against cfg.
func waitLeaders(ctx context.Context, ac *kafka.AdminClient, cfg TopicsConfig, stdout io.Writer) error {
	var last error
	for {
		d, err := ac.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(cfg.Topics))
		if err == nil {
			last = checkShape(d.TopicDescriptions, cfg)
			if last == nil {
				for _, t := range d.TopicDescriptions {
					fmt.Fprintf(stdout, "topic %s ready: %d partitions, replication factor %d\n", t.Name, len(t.Partitions), len(t.Partitions[0].Replicas))
				}
				return nil
			}
			if errors.Is(last, errMismatch) {
				return last
			}
		} else {
			last = fmt.Errorf("describe topics: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics not ready within %v: %w", cfg.Timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkShape compares described topics with cfg: errMismatch for a shape
// that waiting does not change, errNotReady for a partition without leader.
func checkShape(ds []kafka.TopicDescription, cfg TopicsConfig) error {
	var errs []error
	for _, t := range ds {
		if t.Error.Code() != kafka.ErrNoError {
			errs = append(errs, fmt.Errorf("topic %s: %w (%v)", t.Name, errNotReady, t.Error))
			continue
		}
		if len(t.Partitions) != cfg.Partitions {
			errs = append(errs, fmt.Errorf("topic %s has %d partitions, want %d (kafka-topics --alter --partitions adds some; keys move): %w",
				t.Name, len(t.Partitions), cfg.Partitions, errMismatch))
			continue
		}
		for _, p := range t.Partitions {
			if len(p.Replicas) != cfg.ReplicationFactor {
				errs = append(errs, fmt.Errorf("topic %s partition %d has %d replicas, want %d (kafka-reassign-partitions changes it): %w",
					t.Name, p.Partition, len(p.Replicas), cfg.ReplicationFactor, errMismatch))
				break
			}
			if p.Leader == nil || p.Leader.ID < 0 {
				errs = append(errs, fmt.Errorf("topic %s partition %d has no leader: %w", t.Name, p.Partition, errNotReady))
				break
			}
		}
	}
	return errors.Join(errs...)
}
