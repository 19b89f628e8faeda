package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// errNotReady means the cluster answered but is not what was asked for yet
// (too few brokers); the caller may retry.
var errNotReady = errors.New("not ready")

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
