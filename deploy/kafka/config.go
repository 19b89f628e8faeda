package main

import (
	"errors"
	"flag"
	"flashsale/tools/kafkatopic"
	"fmt"
	"io"
	"strings"
	"time"
)

// ProbeConfig is what `probe` needs.
type ProbeConfig struct {
	Bootstrap string
	// Brokers is how many brokers the metadata must list.
	Brokers int
	Timeout time.Duration
}

// TopicsConfig is what `topics` needs: the topics and the settings they must
// have. The defaults are production's for the orders topic (see
// deploy/README.md): deploy/stack/kafka.sh passes a replication factor of 1 and
// min.insync.replicas of 1 for the one-node stack.
type TopicsConfig struct {
	Bootstrap string
	kafkatopic.Spec
	Timeout time.Duration
}

func parseProbe(args []string, out io.Writer) (ProbeConfig, error) {
	cfg := ProbeConfig{Bootstrap: "127.0.0.1:19092", Brokers: 1, Timeout: 2 * time.Second}
	fs := flag.NewFlagSet("kafka-admin probe", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "bootstrap.servers of the cluster")
	fs.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers the metadata must list")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "maximum time the probe may take")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	if cfg.Bootstrap == "" {
		errs = append(errs, errors.New("bootstrap: empty"))
	}
	if cfg.Brokers < 1 {
		errs = append(errs, fmt.Errorf("brokers: %d must be at least 1", cfg.Brokers))
	}
	if cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %v must be positive", cfg.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("invalid flags: %w", err)
	}
	return cfg, nil
}

func parseTopics(args []string, out io.Writer) (TopicsConfig, error) {
	cfg := TopicsConfig{
		Bootstrap: "127.0.0.1:19092",
		Spec: kafkatopic.Spec{
			Topics:            []string{"flash-sale-orders", "flash-sale-orders.dlq"},
			Partitions:        12,
			ReplicationFactor: 3,
			MinInsyncReplicas: 2,
			Retention:         7 * 24 * time.Hour,
		},
		Timeout: 30 * time.Second,
	}
	topics := strings.Join(cfg.Topics, ",")
	fs := flag.NewFlagSet("kafka-admin topics", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "bootstrap.servers of the cluster")
	fs.StringVar(&topics, "topics", topics, "comma-separated topics: the orders topic, then its dead-letter topic")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of each topic")
	fs.IntVar(&cfg.ReplicationFactor, "replication-factor", cfg.ReplicationFactor, "replicas of each partition")
	fs.IntVar(&cfg.MinInsyncReplicas, "min-insync-replicas", cfg.MinInsyncReplicas, "replicas that must have a record before an acks=all write is acknowledged")
	fs.DurationVar(&cfg.Retention, "retention", cfg.Retention, "retention.ms of the topics")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "maximum time creating and checking may take")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.Topics = nil
	for _, t := range strings.Split(topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Topics = append(cfg.Topics, t)
		}
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	if len(cfg.Topics) == 0 {
		errs = append(errs, errors.New("topics: none given"))
	}
	if cfg.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d must be at least 1", cfg.Partitions))
	}
	if cfg.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("replication-factor: %d must be at least 1", cfg.ReplicationFactor))
	}
	if cfg.MinInsyncReplicas < 1 || cfg.MinInsyncReplicas > cfg.ReplicationFactor {
		errs = append(errs, fmt.Errorf("min-insync-replicas: %d must be between 1 and the replication factor %d", cfg.MinInsyncReplicas, cfg.ReplicationFactor))
	}
	if cfg.Retention <= 0 {
		errs = append(errs, fmt.Errorf("retention: %v must be positive", cfg.Retention))
	}
	if cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %v must be positive", cfg.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("invalid flags: %w", err)
	}
	return cfg, nil
}
