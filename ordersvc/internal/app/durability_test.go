package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/lag"
	"flashsale/tools/testenv"
)

// The start-up check of the orders topic: the local one-node topic
// (replication factor 1) is fine on loopback, refused for brokers elsewhere
// unless the operator allows it, and a missing topic is only a warning.
func TestCheckDurability(t *testing.T) {
	ctx := testenv.Context(t)
	existing := "test-durability-" + uuid.NewString()[:8]
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	// the one-node stack's shape: replication factor 1
	if res, err := ac.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: existing, NumPartitions: 1, ReplicationFactor: 1}}); err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create %s: %v %v", existing, err, res)
	}
	t.Cleanup(func() { ac.DeleteTopics(context.Background(), []string{existing}) })
	// CreateTopics returns when the controller has the topic; the broker
	// answering metadata knows it a moment later.
	probe, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: existing, Group: existing})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := probe.Durability(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("topic %s not described within 10s: %v", existing, err)
		}
	}
	tests := []struct {
		name    string
		topic   string
		brokers string // what the configuration names; the reader always reads the local broker
		allow   bool
		wantErr bool
		wantLog string
	}{
		{name: "local stack", topic: existing, brokers: testenv.KafkaBrokers(), wantLog: "local stack"},
		{name: "remote brokers, weak topic", topic: existing, brokers: "kafka-1.example:9092", wantErr: true},
		{name: "remote brokers, operator allows it", topic: existing, brokers: "kafka-1.example:9092", allow: true, wantLog: "running anyway"},
		{name: "topic missing", topic: "test-durability-missing-" + uuid.NewString()[:8], brokers: "kafka-1.example:9092", wantLog: "does not exist yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: tt.topic, Group: tt.topic})
			if err != nil {
				t.Fatal(err)
			}
			defer lr.Close()
			var logs bytes.Buffer
			err = checkDurability(ctx, config.Config{OrdersTopic: tt.topic, KafkaBrokers: tt.brokers, KafkaAllowWeakTopic: tt.allow},
				lr, slog.New(slog.NewTextHandler(&logs, nil)))
			if (err != nil) != tt.wantErr {
				t.Errorf("checkDurability error %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "replication factor 1") {
				t.Errorf("error %q does not name the replication factor", err)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q lacks %q", logs.String(), tt.wantLog)
			}
		})
	}
}
