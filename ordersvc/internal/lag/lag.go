// Package lag reads how far the ordersvc consumer group trails the orders
// topic: per partition, the group's committed offset against the
// partition's high watermark. A repair that computes Redis stock from
// PostgreSQL waits until the group has caught up (WaitCaughtUp), because an
// accepted order still in Kafka has no row yet, and after a Redis loss
// nothing else remembers it.
package lag

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/adminapi"
	"flashsale/pkg/kafkaconf"
)

// ErrLagging: the consumer group did not reach the high watermarks read at
// the start of a wait within its bound. The error is a *LaggingError, which
// carries the lag left.
var ErrLagging = errors.New("consumer group has not caught up with the orders topic")

// LaggingError is the ErrLagging outcome of WaitCaughtUp.
type LaggingError struct {
	Group, Topic string
	Waited       time.Duration
	Lag          Lag // against the high watermarks read when the wait started
}

func (e *LaggingError) Error() string {
	parts := make([]string, 0, len(e.Lag.Partitions))
	for _, p := range e.Lag.Partitions {
		if p.Lag > 0 {
			parts = append(parts, fmt.Sprintf("partition %d: committed %d, end %d", p.Partition, p.Committed, p.End))
		}
	}
	return fmt.Sprintf("consumer group %q is still %d messages behind topic %q after waiting %s (%s); "+
		"orders in Kafka have no row yet, so stock computed from PostgreSQL now would sell their units again: "+
		"retry once the consumer has caught up", e.Group, e.Lag.Total, e.Topic, e.Waited.Round(time.Millisecond), strings.Join(parts, "; "))
}

func (e *LaggingError) Unwrap() error { return ErrLagging }

// Lag is the group's lag over every partition of the topic; PartitionLag
// is one partition (pkg/adminapi: the admin API answers them).
type (
	Lag          = adminapi.Lag
	PartitionLag = adminapi.PartitionLag
)

// Config names the group and topic, and bounds each broker request.
type Config struct {
	Brokers        string
	Topic          string
	Group          string
	RequestTimeout time.Duration      // one metadata, offsets or watermark request; default 5s
	PollInterval   time.Duration      // between readings while waiting; default 100ms
	Security       kafkaconf.Security // TLS and SASL towards the brokers
}

// Reader reads the lag through one librdkafka handle. It never joins the
// group: its consumer handle is only used for metadata and watermark
// queries, and the committed offsets come from the admin API.
type Reader struct {
	cfg      Config
	consumer *kafka.Consumer
	admin    *kafka.AdminClient
}

// New creates the reader; librdkafka connects in the background.
func New(cfg Config) (*Reader, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.Topic == "" || cfg.Group == "" {
		return nil, errors.New("lag reader: topic and group are required")
	}
	cm := kafka.ConfigMap{
		"bootstrap.servers": cfg.Brokers,
		// librdkafka requires a group id for a consumer handle; this one
		// never subscribes, so it never joins (or disturbs) any group.
		"group.id":                 cfg.Group + ".lag-reader",
		"enable.auto.commit":       false,
		"allow.auto.create.topics": false, // reading the lag must not create the topic
		"log_level":                3,
	}
	cfg.Security.Apply(cm)
	kc, err := kafka.NewConsumer(&cm)
	if err != nil {
		return nil, fmt.Errorf("create lag reader: %w", err)
	}
	admin, err := kafka.NewAdminClientFromConsumer(kc)
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("create lag reader admin client: %w", err)
	}
	return &Reader{cfg: cfg, consumer: kc, admin: admin}, nil
}

// Close releases the handle.
func (r *Reader) Close() {
	r.admin.Close()
	_ = r.consumer.Close() // never subscribed: nothing to leave or commit
}

// partition is one partition's raw offsets.
type partition struct {
	id        int32
	committed int64 // -1: none
	low, high int64
}

// Lag reads the current lag: committed offsets against the high watermarks.
// A topic that does not exist yet has no partitions and no lag.
func (r *Reader) Lag(ctx context.Context) (Lag, error) {
	ps, err := r.read(ctx, time.Now().Add(r.cfg.RequestTimeout))
	if err != nil {
		return Lag{}, err
	}
	return against(ps, endsOf(ps)), nil
}

// endsOf maps each partition to its high watermark.
func endsOf(ps []partition) map[int32]int64 {
	ends := make(map[int32]int64, len(ps))
	for _, p := range ps {
		ends[p.id] = p.high
	}
	return ends
}

// WaitCaughtUp reads the high watermarks once, then polls the committed
// offsets until every partition's reaches its watermark. Messages produced
// after the first reading are not waited for. Past timeout it returns a
// *LaggingError (errors.Is ErrLagging) with the lag left. A transient
// broker error (a leader not serving yet, a coordinator loading) is retried
// until the same bound, for the first reading as for the later ones, then
// returned as it is; any other failure of the first reading at once.
func (r *Reader) WaitCaughtUp(ctx context.Context, timeout time.Duration) (Lag, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	ps, err := r.read(ctx, deadline)
	if err != nil {
		return Lag{}, err
	}
	ends := endsOf(ps)
	cur := against(ps, ends)
	for cur.Total > 0 {
		if !time.Now().Before(deadline) {
			if err != nil {
				return cur, err
			}
			return cur, &LaggingError{Group: r.cfg.Group, Topic: r.cfg.Topic, Waited: time.Since(start), Lag: cur}
		}
		t := time.NewTimer(min(r.cfg.PollInterval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return cur, fmt.Errorf("wait for consumer group %q to catch up: %w", r.cfg.Group, ctx.Err())
		case <-t.C:
		}
		ps, err = r.read(ctx, time.Now().Add(r.cfg.RequestTimeout))
		if err == nil {
			cur = against(ps, ends)
		}
		// On a failed reading the last good one stands; the bound decides.
	}
	return cur, nil
}

// against computes the lag of ps up to ends (partitions absent from ends
// appeared after the reading that set them, and are not waited for).
func against(ps []partition, ends map[int32]int64) Lag {
	l := Lag{Partitions: make([]PartitionLag, 0, len(ps))}
	for _, p := range ps {
		end, ok := ends[p.id]
		if !ok {
			continue
		}
		from := max(p.committed, p.low) // nothing committed, or below retention: the group starts at low
		pl := PartitionLag{Partition: p.id, Committed: p.committed, End: end, Lag: max(end-from, 0)}
		l.Total += pl.Lag
		l.Partitions = append(l.Partitions, pl)
	}
	return l
}

// read is readOnce retried while the broker answers with a transient
// error, until the deadline: on Apache Kafka a new group's coordinator
// answers NOT_COORDINATOR until it has loaded, and a partition that just
// moved (a new topic, a failover) answers NOT_LEADER until its leader has
// taken it over and the client's metadata has caught up.
func (r *Reader) read(ctx context.Context, deadline time.Time) ([]partition, error) {
	return retryTransient(ctx, deadline, retryInterval, r.readOnce)
}

// retryInterval is the pause between two attempts of a transient failure.
const retryInterval = 100 * time.Millisecond

// retryTransient calls f until it succeeds, fails with an error that is not
// transient, or the deadline (or ctx) ends the retries; then it returns
// f's last answer. f is always called at least once.
func retryTransient[T any](ctx context.Context, deadline time.Time, pause time.Duration, f func(context.Context) (T, error)) (T, error) {
	for {
		v, err := f(ctx)
		if err == nil || !transient(err) || !time.Now().Add(pause).Before(deadline) {
			return v, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// transient reports whether a broker error goes away by asking again.
func transient(err error) bool {
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return false
	}
	switch kerr.Code() {
	case kafka.ErrNotCoordinator, kafka.ErrCoordinatorLoadInProgress, kafka.ErrCoordinatorNotAvailable,
		kafka.ErrNotLeaderForPartition, kafka.ErrLeaderNotAvailable, kafka.ErrUnknownTopicOrPart,
		kafka.ErrRequestTimedOut, kafka.ErrTimedOut, kafka.ErrTransport, kafka.ErrAllBrokersDown:
		return true
	}
	return kerr.IsRetriable()
}

// readOnce fetches the topic's partitions, the group's committed offsets and
// every partition's watermarks.
func (r *Reader) readOnce(ctx context.Context) ([]partition, error) {
	timeoutMs := func() int {
		d := r.cfg.RequestTimeout
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		return max(int(d.Milliseconds()), 1)
	}
	topic := r.cfg.Topic
	md, err := r.admin.GetMetadata(&topic, false, timeoutMs())
	if err != nil {
		return nil, fmt.Errorf("read metadata of topic %q: %w", topic, err)
	}
	tm, ok := md.Topics[topic]
	if !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic {
		return nil, nil // not created yet: nothing was ever produced
	}
	if tm.Error.Code() != kafka.ErrNoError {
		return nil, fmt.Errorf("read metadata of topic %q: %w", topic, tm.Error)
	}
	tps := make([]kafka.TopicPartition, 0, len(tm.Partitions))
	for _, p := range tm.Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID})
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].Partition < tps[j].Partition })

	actx, cancel := context.WithTimeout(ctx, time.Duration(timeoutMs())*time.Millisecond)
	defer cancel()
	res, err := r.admin.ListConsumerGroupOffsets(actx, []kafka.ConsumerGroupTopicPartitions{{Group: r.cfg.Group, Partitions: tps}})
	var kerr kafka.Error
	if errors.As(err, &kerr) && kerr.Code() == kafka.ErrGroupIDNotFound {
		// A group that never committed anything: some brokers answer
		// this instead of offsets of -1.
		res, err = kafka.ListConsumerGroupOffsetsResult{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read committed offsets of group %q: %w", r.cfg.Group, err)
	}
	committed := make(map[int32]int64, len(tps))
	for _, g := range res.ConsumerGroupsTopicPartitions {
		for _, tp := range g.Partitions {
			if tp.Error != nil {
				return nil, fmt.Errorf("read committed offset of group %q, partition %d: %w", r.cfg.Group, tp.Partition, tp.Error)
			}
			committed[tp.Partition] = int64(tp.Offset)
		}
	}

	out := make([]partition, 0, len(tps))
	for _, tp := range tps {
		low, high, err := r.consumer.QueryWatermarkOffsets(topic, tp.Partition, timeoutMs())
		if err != nil {
			return nil, fmt.Errorf("read watermarks of %s[%d]: %w", topic, tp.Partition, err)
		}
		c, ok := committed[tp.Partition]
		if !ok || c < 0 {
			c = -1 // kafka.OffsetInvalid and friends: nothing committed
		}
		out = append(out, partition{id: tp.Partition, committed: c, low: low, high: high})
	}
	return out, nil
}
