// Package publish sends OrderPlaced events to Kafka and reports, per event,
// whether the broker acknowledged it. The gateway answers 202 only after that
// acknowledgement (acks=all, idempotent producer), never before.
package publish

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/kafkaconf"
)

// Publish failures come in two kinds, and the caller must tell them apart:
// only a definite one lets it give the reservation back without further ado.
var (
	// ErrNotPublished: the producer refused the event before taking it
	// (local queue full, producer closed or failed, message too large). No
	// copy of it exists anywhere; it never will.
	ErrNotPublished = errors.New("publish: event refused by the producer")
	// ErrUnconfirmed: the producer took the event but its delivery report
	// is an error (ERR__MSG_TIMED_OUT above all). The event may still be in
	// the topic: librdkafka reports a timeout also for a request in flight,
	// which the broker can append after the report (librdkafka
	// INTRODUCTION.md, idempotent producer; confluentinc/librdkafka#2188),
	// and librdkafka's per-message persistence status is not exposed by
	// confluent-kafka-go. The caller must settle the order another way.
	ErrUnconfirmed = errors.New("publish: event not acknowledged by the broker, and maybe written")
)

// Config of the producer.
type Config struct {
	Brokers string
	Topic   string
	// Timeout bounds the wait for an acknowledgement, retries included
	// (librdkafka's message.timeout.ms): the delivery report always comes
	// within it, with an error if the broker never acknowledged.
	Timeout time.Duration
	Linger  time.Duration
	// FailFastAfter deliveries to one partition failed in a row make the
	// next publishes of its items fail at once (ErrNotPublished) for
	// FailFastFor, then one trial delivery decides; 0 turns this off. See
	// breaker and breakers.
	FailFastAfter int
	FailFastFor   time.Duration
	// Spread puts one item's orders on every partition of the topic,
	// spreadStick on each in turn, instead of keying them by item (one
	// partition, one leader and one consumer per sale). See spreader.
	Spread bool
	// Security is TLS and SASL towards the brokers (pkg/kafkaconf).
	Security kafkaconf.Security
	// Log receives the producer's own decisions (a replaced client); nil:
	// slog.Default().
	Log *slog.Logger
}

// Producer publishes to one topic.
type Producer struct {
	client atomic.Pointer[kafka.Producer] // replaced by replaceClient
	// swap keeps Produce off a client being replaced: Produce holds it to
	// read, replaceClient to write (librdkafka's Produce racing its Close
	// crashes, and one after the final flush never gets its report).
	swap     sync.RWMutex
	conf     kafka.ConfigMap // every client's configuration
	topic    string
	inFlight atomic.Int64 // handed to librdkafka, delivery report not yet read
	breakers *breakers
	spread   *spreader // nil: orders keyed by item
	stuck    *stuckCheck
	log      *slog.Logger
	events   chan kafka.Event // every client's events, until Close
	stop     chan struct{}
	upkeep   sync.WaitGroup // the upkeep goroutine
	clients  sync.WaitGroup // each client's event forwarder, and a retired client's drain
	metrics  metrics
	now      func() time.Time
}

// spreadStick is how long a spreading producer stays on one partition. On
// the three-node cluster, 10 ms (librdkafka's sticky.partitioning.linger.ms)
// doubled the brokers' CPU per order against keyed orders and sold out in
// 5.1 s against 3.4 s; 100 ms cost what keyed orders cost (3.1 s; three
// selling-only demos each, benchmarks/README.md). A hot sale still visits
// every partition within a few seconds.
const spreadStick = 100 * time.Millisecond

// partitionsRefresh is how often a spreading producer reads the topic's
// partition count again (a topic can gain partitions), and partitionsRetry
// how soon after a failed read.
const (
	partitionsRefresh = 30 * time.Second
	partitionsRetry   = time.Second
)

// New creates the producer. It does not wait for the broker.
func New(cfg Config) (*Producer, error) {
	p, err := newProducer(cfg)
	if err != nil {
		return nil, err
	}
	p.upkeep.Add(1)
	go p.keepUp()
	return p, nil
}

// newProducer is New without the upkeep goroutine (tests drive it).
func newProducer(cfg Config) (*Producer, error) {
	cm := kafka.ConfigMap{
		"bootstrap.servers":                     cfg.Brokers,
		"acks":                                  "all",
		"enable.idempotence":                    true,
		"max.in.flight.requests.per.connection": 5,
		"linger.ms":                             lingerMS(cfg.Linger),
		"message.timeout.ms":                    int(cfg.Timeout / time.Millisecond),
		"request.timeout.ms":                    int(max(cfg.Timeout/2, time.Second) / time.Millisecond),
		"socket.keepalive.enable":               true,
		// Every produce request is small and a shopper waits on it: with
		// Nagle's algorithm (librdkafka's default) a request waits for the
		// acknowledgement of the previous segment.
		"socket.nagle.disable":   true,
		"go.logs.channel.enable": false,
		// Delivery reports go to each Produce call's own channel; nothing is
		// sent to Events() but errors, which the owner must drain.
		"go.delivery.reports": true,
		// A report is read for its error only: without this the client
		// copies each message's key and value back out of C into Go.
		"go.delivery.report.fields": "none",
		// The client's defaults buffer a million events and a million
		// messages for ProduceChannel (unused here): 23 MB of pointers,
		// two thirds of the gateway's heap, that every garbage collection
		// scanned. The owner reads the events as they come (Events).
		"go.events.channel.size":  1000,
		"go.produce.channel.size": 0,
		"client.id":               "flashsale-gateway",
		// Reconnect quickly after a broker outage: with librdkafka's 10 s
		// default, purchases kept failing for seconds after the broker was back.
		"reconnect.backoff.ms":     100,
		"reconnect.backoff.max.ms": 500,
		// KIP-714 client telemetry: nothing here collects it.
		"enable.metrics.push":  false,
		"log.connection.close": false,
	}
	cfg.Security.Apply(cm)
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	pr := &Producer{conf: cm, topic: cfg.Topic, now: time.Now, metrics: newMetrics(), log: log,
		events: make(chan kafka.Event, 16), stop: make(chan struct{}),
		breakers: newBreakers(int64(cfg.FailFastAfter), cfg.FailFastFor),
		stuck:    newStuckCheck(cfg.Timeout)}
	client, err := pr.newClient()
	if err != nil {
		return nil, err
	}
	pr.client.Store(client)
	if cfg.Spread {
		pr.spread = &spreader{stickFor: spreadStick}
	}
	return pr, nil
}

// lingerMS is librdkafka's linger.ms for d: a decimal number of
// milliseconds, so that 500µs is not cut to 0.
func lingerMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// newClient makes a librdkafka producer of p's configuration and forwards
// its events to p.events until it is closed; once Close has begun they
// are dropped, so a producer nobody drains still closes.
func (p *Producer) newClient() (*kafka.Producer, error) {
	c, err := kafka.NewProducer(&p.conf)
	if err != nil {
		return nil, fmt.Errorf("create kafka producer: %w", err)
	}
	p.clients.Add(1)
	go func() {
		defer p.clients.Done()
		for ev := range c.Events() {
			select {
			case p.events <- ev:
			case <-p.stop:
			}
		}
	}()
	return c, nil
}

// keepUp reads the topic's metadata until Close: a spreading producer's
// partition count, every partitionsRefresh (partitionsRetry after a failed
// read), and, while a partition has failed every delivery for a while,
// whether the cluster says it is served (see stuckCheck).
func (p *Producer) keepUp() {
	defer p.upkeep.Done()
	var nextCount time.Time
	tick := time.NewTicker(partitionsRetry)
	defer tick.Stop()
	for {
		now := p.now()
		if p.spread != nil && !now.Before(nextCount) {
			nextCount = now.Add(partitionsRetry)
			md, err := p.client.Load().GetMetadata(&p.topic, false, int(partitionsRetry/time.Millisecond))
			if t, ok := topicOf(md, p.topic); err == nil && ok && t.Error.Code() == kafka.ErrNoError {
				p.spread.setPartitions(len(t.Partitions))
				nextCount = now.Add(partitionsRefresh)
			}
		}
		p.checkStuck(now)
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

func topicOf(md *kafka.Metadata, topic string) (kafka.TopicMetadata, bool) {
	if md == nil {
		return kafka.TopicMetadata{}, false
	}
	t, ok := md.Topics[topic]
	return t, ok
}

// Publish sends value, keyed by item id or on the spreader's partition,
// and blocks until the broker acknowledged it (nil), the producer refused
// it (ErrNotPublished), or its delivery failed or timed out
// (ErrUnconfirmed). It does not return early on cancellation: a message
// already handed to the producer may still be delivered, and the caller
// must know which. While the deliveries to the item's partition keep
// failing (spreading: to every partition) it refuses at once (see
// breakers).
func (p *Producer) Publish(itemID int64, value []byte) error {
	start := p.now()
	part, b, trial, ok := p.choose(itemID, start)
	if !ok {
		p.metrics.refused.Inc()
		return errBrokerDown
	}
	reported, err := p.publish(itemID, part, value)
	if err != nil && !errors.Is(err, ErrUnconfirmed) {
		// Refused locally: says nothing about the broker.
		if trial {
			b.untried()
		}
		return err
	}
	rb := b
	if part == kafka.PartitionAny {
		rb = p.breakers.forReport(itemID, reported)
	}
	now := p.now()
	p.breakers.record(b, rb, trial, err == nil, now)
	if err != nil {
		p.metrics.failed.Inc()
		return err
	}
	p.metrics.ack.Observe(now.Sub(start).Seconds())
	return nil
}

// choose is the partition of an order of itemID published at now: the
// spreader's, or kafka.PartitionAny (keyed by item) when spreading is off or
// the partition count is not known yet. b is the breaker that allowed it
// (ok) or refused it, trial whether it is that breaker's trial.
func (p *Producer) choose(itemID int64, now time.Time) (part int32, b *breaker, trial, ok bool) {
	if p.spread != nil {
		if part, b, trial, ok, known := p.spread.pick(now, p.breakers); known {
			return part, b, trial, ok
		}
	}
	b = p.breakers.forItem(itemID)
	ok, trial = b.allow(now)
	return kafka.PartitionAny, b, trial, ok
}

// BrokersDown opens every partition's breaker at once: librdkafka reported
// that it reaches no broker (kafka.ErrAllBrokersDown on Events).
func (p *Producer) BrokersDown() { p.breakers.trip(p.now()) }

// FailingFast reports how many partitions' publishes are refused at once
// right now.
func (p *Producer) FailingFast() int { return p.breakers.open() }

// publish hands the event to librdkafka, on partition part or, for
// kafka.PartitionAny, keyed by item id, and waits for its delivery report.
// It returns the partition the report named (kafka.PartitionAny when there
// was none).
func (p *Producer) publish(itemID int64, part int32, value []byte) (int32, error) {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	done := make(chan kafka.Event, 1)
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &p.topic, Partition: part}, Value: value}
	if part == kafka.PartitionAny {
		var keyBuf [20]byte
		msg.Key = strconv.AppendInt(keyBuf[:0], itemID, 10)
	}
	p.swap.RLock()
	err := p.client.Load().Produce(msg, done) // never blocks: a full queue is an error
	p.swap.RUnlock()
	if err != nil {
		return kafka.PartitionAny, fmt.Errorf("%w: enqueue: %v", ErrNotPublished, err)
	}
	ev := <-done
	m, ok := ev.(*kafka.Message)
	if !ok {
		return kafka.PartitionAny, fmt.Errorf("%w: unexpected delivery event %v", ErrUnconfirmed, ev)
	}
	if m.TopicPartition.Error != nil {
		// Every delivery error counts as maybe written, including broker
		// refusals that look final: with retries, an earlier attempt of the
		// same message may have been appended before the one that failed,
		// and settling costs one PostgreSQL statement on a rare path.
		return m.TopicPartition.Partition, fmt.Errorf("%w: %v", ErrUnconfirmed, m.TopicPartition.Error)
	}
	return m.TopicPartition.Partition, nil
}

// Events is the producer's channel of client-level events (errors, stats),
// of every client it used; the owner must drain it. Close closes it.
func (p *Producer) Events() <-chan kafka.Event { return p.events }

// Close flushes what is queued (bounded by timeout) and closes the producer.
// It returns how many publishes were still waiting for their report. Every
// Publish waits for its own report, so once the HTTP server has drained
// there is nothing to flush, and Close does not wait on an unreachable
// broker for internal requests that carry no order. Publishes still
// waiting after timeout (the drain gave up on them) are purged: each gets
// its report, unconfirmed, and its caller settles the order as after any
// unconfirmed delivery, instead of waiting for ever on a closed producer.
func (p *Producer) Close(timeout time.Duration) int {
	close(p.stop)
	p.upkeep.Wait()
	c := p.client.Load()
	if p.inFlight.Load() > 0 {
		c.Flush(int(timeout / time.Millisecond))
	}
	// Counted under the lock: a publish that got its Produce in before the
	// lock is counted (and purged, so it gets its report instead of waiting
	// for ever on a client closed without one); a straggling Produce after
	// it meets a closed client: an error, not a crash.
	p.swap.Lock()
	left := int(p.inFlight.Load())
	closeClient(c, left > 0)
	p.swap.Unlock()
	p.clients.Wait() // a retired client's drain, and every forwarder
	close(p.events)
	return left
}

// closeClient closes c; with purge, the messages it still holds are purged
// first, so each waiting publish gets its report (unconfirmed) instead of
// waiting for ever on a closed client.
func closeClient(c *kafka.Producer, purge bool) {
	if purge {
		if err := c.Purge(kafka.PurgeQueue | kafka.PurgeInFlight); err == nil {
			c.Flush(int(purgeServe / time.Millisecond))
		}
	}
	c.Close()
}

// purgeServe bounds how long Close waits for the purged deliveries'
// reports to reach their publishes.
const purgeServe = time.Second
