package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/tools/kafkatopic"
	"flashsale/tools/testenv"
)

// bootstrap is the one-node Kafka of the local stack (make up), where
// tools/testenv says it is (deploy/stack.env).
func bootstrap() string { return testenv.KafkaBrokers() }

func TestProbe(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"probe", "-bootstrap", bootstrap()}, &out, io.Discard); err != nil {
		t.Fatalf("probe of the local broker: %v (is the stack up? make up)", err)
	}
	if !strings.Contains(out.String(), "ok: cluster") {
		t.Errorf("probe printed %q", out.String())
	}
	// one node cannot list three brokers: not ready, not a crash
	err := withAdmin(ctx, bootstrap(), 5*time.Second, func(ctx context.Context, ac *kafka.AdminClient) error {
		return probe(ctx, ac, ProbeConfig{Bootstrap: bootstrap(), Brokers: 3}, io.Discard)
	})
	if !errors.Is(err, errNotReady) {
		t.Errorf("probe wanting 3 brokers of one: %v, want errNotReady", err)
	}
	if err := run(ctx, []string{"probe", "-bootstrap", "127.0.0.1:1", "-timeout", "500ms"}, io.Discard, io.Discard); err == nil {
		t.Error("probe of a closed port succeeded")
	}
}

// The topics command creates the topics through tools/kafkatopic (whose
// tests cover a second run and a topic of another shape) and reports them.
func TestTopicsCommand(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("test-kafka-admin-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = withAdmin(context.Background(), bootstrap(), 10*time.Second, func(ctx context.Context, ac *kafka.AdminClient) error {
			return kafkatopic.Delete(ctx, ac, name, name+".dlq")
		})
	})
	var out bytes.Buffer
	err := run(ctx, []string{"topics", "-bootstrap", bootstrap(), "-topics", name + "," + name + ".dlq",
		"-partitions", "3", "-replication-factor", "1", "-min-insync-replicas", "1"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("kafka-admin topics: %v", err)
	}
	if got := out.String(); strings.Count(got, "created topic") != 2 || strings.Count(got, "ready: 3 partitions, replication factor 1") != 2 {
		t.Errorf("kafka-admin topics printed %q, want both topics created and ready", got)
	}
}

func TestParseTopicsFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults are production's", nil, ""},
		{"no topics", []string{"-topics", " , "}, "topics: none given"},
		// acks=all could never be satisfied
		{"min ISR above the replication factor", []string{"-replication-factor", "1", "-min-insync-replicas", "2"}, "min-insync-replicas"},
		{"zero partitions", []string{"-partitions", "0"}, "partitions: 0"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseTopics(tt.args, io.Discard)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("parseTopics(%q): %v", tt.args, err)
			case tt.wantErr == "" && (cfg.ReplicationFactor != 3 || cfg.MinInsyncReplicas != 2 || cfg.Partitions != 12):
				t.Errorf("defaults %+v, want RF 3, min ISR 2, 12 partitions", cfg)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("parseTopics(%q) error %v, want one naming %q", tt.args, err, tt.wantErr)
			}
		})
	}
}
