package lag_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"flashsale/ordersvc/internal/lag"
	"flashsale/tools/testenv"
)

func TestDurable(t *testing.T) {
	tests := []struct {
		name string
		d    lag.Durability
		want bool
	}{
		{"production settings", lag.Durability{ReplicationFactor: 3, MinInsyncReplicas: 2}, true},
		// one broker: its loss loses every acknowledged order on it
		{"one replica", lag.Durability{ReplicationFactor: 1, MinInsyncReplicas: 1}, false},
		// acks=all is satisfied by the leader alone once the others lag
		{"min.insync.replicas 1", lag.Durability{ReplicationFactor: 3, MinInsyncReplicas: 1}, false},
		// an out-of-sync replica may become leader and drop acked writes
		{"unclean election", lag.Durability{ReplicationFactor: 3, MinInsyncReplicas: 2, UncleanElection: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Durable(); got != tt.want {
				t.Errorf("%v Durable() = %v, want %v", tt.d, got, tt.want)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	tests := []struct {
		brokers string
		want    bool
	}{
		{"127.0.0.1:19092", true},
		{"127.0.0.1:19101,127.0.0.1:19102,localhost:19103", true},
		{"[::1]:9092", true},
		{"127.0.0.1:19092,kafka-1.prod:9092", false},
		{"10.0.0.5:9092", false},
		{"kafka:9092", false},
		{"garbage", false},
	}
	for _, tt := range tests {
		if got := lag.Loopback(tt.brokers); got != tt.want {
			t.Errorf("Loopback(%q) = %v, want %v", tt.brokers, got, tt.want)
		}
	}
}

// The topic's real settings as the broker reports them: on the local
// one-node stack replication factor 1, on the cluster (when it is up) the
// production settings deploy/stack/kafka-node.sh gives.
func TestReadDurability(t *testing.T) {
	ctx := testenv.Context(t)
	check := func(t *testing.T, brokers string, rf, isr int, want bool) {
		topic := "test-durability-" + uuid.NewString()[:8]
		ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers, "log_level": 3})
		if err != nil {
			t.Fatal(err)
		}
		defer ac.Close()
		r, err := lag.New(lag.Config{Brokers: brokers, Topic: topic, Group: topic})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Durability(ctx); !errors.Is(err, lag.ErrTopicMissing) {
			t.Errorf("before the topic exists: %v, want ErrTopicMissing", err)
		}
		res, err := ac.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 3, ReplicationFactor: rf,
			Config: map[string]string{"min.insync.replicas": strconv.Itoa(isr)}}})
		if err != nil || res[0].Error.Code() != kafka.ErrNoError {
			t.Fatalf("create %s: %v %v", topic, err, res)
		}
		defer ac.DeleteTopics(context.Background(), []string{topic})
		var d lag.Durability
		deadline := time.Now().Add(10 * time.Second)
		for {
			d, err = r.Durability(ctx)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		if d.Partitions != 3 || d.ReplicationFactor != rf || d.MinInsyncReplicas != isr || d.UncleanElection || d.Durable() != want {
			t.Errorf("durability %v (durable %v), want 3 partitions, RF %d, min ISR %d, durable %v", d, d.Durable(), rf, isr, want)
		}
	}
	t.Run("one node", func(t *testing.T) { check(t, testenv.KafkaBrokers(), 1, 1, false) })
	t.Run("three nodes", func(t *testing.T) { check(t, testenv.RequireKafkaCluster(t), 3, 2, true) })
}
