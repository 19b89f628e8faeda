package lag

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ErrTopicMissing: the orders topic does not exist (yet).
var ErrTopicMissing = errors.New("orders topic does not exist")

// Durability is how well the orders topic keeps an acknowledged order when
// brokers die: the settings deploy/README.md asks production for.
type Durability struct {
	Partitions        int
	ReplicationFactor int // the smallest of any partition
	MinInsyncReplicas int
	UncleanElection   bool
}

// Durable reports whether an acks=all write survives the loss of any one
// broker and no out-of-sync replica can become leader: replication factor
// 3 or more, min.insync.replicas 2 or more, no unclean leader election.
func (d Durability) Durable() bool {
	return d.ReplicationFactor >= 3 && d.MinInsyncReplicas >= 2 && !d.UncleanElection
}

func (d Durability) String() string {
	return fmt.Sprintf("%d partitions, replication factor %d, min.insync.replicas %d, unclean.leader.election.enable %v",
		d.Partitions, d.ReplicationFactor, d.MinInsyncReplicas, d.UncleanElection)
}

// Durability reads the orders topic's replication and durability settings.
func (r *Reader) Durability(ctx context.Context) (Durability, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	topic := r.cfg.Topic
	d, err := r.admin.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames([]string{topic}))
	if err != nil {
		return Durability{}, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	if len(d.TopicDescriptions) != 1 {
		return Durability{}, fmt.Errorf("describe topic %q: %d descriptions", topic, len(d.TopicDescriptions))
	}
	td := d.TopicDescriptions[0]
	switch td.Error.Code() {
	case kafka.ErrNoError:
	case kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic:
		return Durability{}, fmt.Errorf("%w: %q", ErrTopicMissing, topic)
	default:
		return Durability{}, fmt.Errorf("describe topic %q: %w", topic, td.Error)
	}
	out := Durability{Partitions: len(td.Partitions)}
	for i, p := range td.Partitions {
		if i == 0 || len(p.Replicas) < out.ReplicationFactor {
			out.ReplicationFactor = len(p.Replicas)
		}
	}
	res, err := r.admin.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil {
		return out, fmt.Errorf("describe configuration of topic %q: %w", topic, err)
	}
	if len(res) != 1 || res[0].Error.Code() != kafka.ErrNoError {
		return out, fmt.Errorf("describe configuration of topic %q: %v", topic, res)
	}
	if e, ok := res[0].Config["min.insync.replicas"]; ok {
		out.MinInsyncReplicas, _ = strconv.Atoi(e.Value)
	}
	if e, ok := res[0].Config["unclean.leader.election.enable"]; ok {
		out.UncleanElection = e.Value == "true"
	}
	return out, nil
}

// Loopback reports whether every bootstrap server is on this machine: the
// local development stack, where one broker without replicas is expected.
func Loopback(brokers string) bool {
	for _, b := range strings.Split(brokers, ",") {
		host, _, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil {
			return false
		}
		if host == "localhost" {
			continue
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}
