package kafkatopic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/tools/testenv"
)

func admin(t *testing.T) *kafka.AdminClient {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	ac, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ac.Close)
	return ac
}

// Topics are created with their settings and a leader for every partition,
// a second run changes nothing, and a topic of another shape is reported,
// not altered.
func TestEnsure(t *testing.T) {
	ac := admin(t)
	ctx, cancel := context.WithTimeout(testenv.Context(t), time.Minute)
	defer cancel()
	name := fmt.Sprintf("test-kafkatopic-%d", time.Now().UnixNano())
	spec := Spec{Topics: []string{name, name + ".dlq"}, Partitions: 3, ReplicationFactor: 1, MinInsyncReplicas: 1, Retention: time.Hour}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := Delete(ctx, ac, spec.Topics...); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	if err := Ensure(ctx, ac, spec, &out); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if got := out.String(); strings.Count(got, "created topic") != 2 || strings.Count(got, "ready: 3 partitions, replication factor 1") != 2 {
		t.Errorf("first run printed %q, want both topics created and ready", got)
	}
	out.Reset()
	if err := Ensure(ctx, ac, spec, &out); err != nil || strings.Contains(out.String(), "created") {
		t.Errorf("second run: %q, %v; want nothing created, no error", out.String(), err)
	}
	res, err := ac.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range spec.Config() {
		if got := res[0].Config[k].Value; got != want {
			t.Errorf("topic %s: %s = %q, want %q", name, k, got, want)
		}
	}
	wider := spec
	wider.Partitions = 6
	if err := Ensure(ctx, ac, wider, &out); !errors.Is(err, ErrMismatch) {
		t.Errorf("asking 6 partitions of a 3-partition topic: %v, want ErrMismatch", err)
	}
}

// Deleting a topic that does not exist is not an error (a test's cleanup
// may run after the topic was never created).
func TestDeleteMissing(t *testing.T) {
	ac := admin(t)
	ctx, cancel := context.WithTimeout(testenv.Context(t), 15*time.Second)
	defer cancel()
	if err := Delete(ctx, ac, fmt.Sprintf("test-kafkatopic-missing-%d", time.Now().UnixNano())); err != nil {
		t.Errorf("delete of a missing topic: %v", err)
	}
}

// A topic is ready only when every partition's leader answered its end
// offset: a partition missing from the answer or answering
// NOT_LEADER_OR_FOLLOWER keeps Ensure waiting, and the error names it.
func TestNotServing(t *testing.T) {
	a, b := "orders", "orders.dlq"
	ok := kafka.ListOffsetsResultInfo{Offset: 0}
	notLeader := kafka.ListOffsetsResultInfo{Offset: -1, Error: kafka.NewError(kafka.ErrNotLeaderForPartition, "Broker: Not leader for partition", false)}
	tp := func(topic *string, p int32) kafka.TopicPartition {
		return kafka.TopicPartition{Topic: topic, Partition: p}
	}
	for _, c := range []struct {
		name  string
		infos map[kafka.TopicPartition]kafka.ListOffsetsResultInfo
		want  string // "" ready, else a fragment of the error
	}{
		{"every partition answers", map[kafka.TopicPartition]kafka.ListOffsetsResultInfo{tp(&a, 0): ok, tp(&a, 1): ok, tp(&b, 0): ok}, ""},
		{"one leader not serving yet", map[kafka.TopicPartition]kafka.ListOffsetsResultInfo{tp(&a, 0): ok, tp(&a, 1): notLeader, tp(&b, 0): notLeader},
			"2 of 3 partitions do not serve yet, first orders[1]"},
		{"a partition missing from the answer", map[kafka.TopicPartition]kafka.ListOffsetsResultInfo{tp(&a, 0): ok, tp(&b, 0): ok}, "2 of 3 partitions answered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := notServing(kafka.ListOffsetsResult{ResultInfos: c.infos}, 3)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want ready, got %v", err)
			case c.want != "" && (!errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("want ErrNotReady with %q, got %v", c.want, err)
			}
		})
	}
}
