// Package consumer turns the OrderPlaced events of the orders topic into
// order rows. It reads in batches, persists each batch in one PostgreSQL
// transaction, dead-letters what can never become an active order, returns
// the units of rejected orders to Redis, and only then commits the batch's
// Kafka offsets: the offsets never run ahead of the database.
package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/event"
	"flashsale/pkg/kafkaconf"
	"flashsale/pkg/stock"
)

// ReasonInvalidPayload marks a message that does not decode as a valid
// OrderPlaced; it goes to the dead-letter topic as it came.
const ReasonInvalidPayload = "INVALID_PAYLOAD"

// ReasonNewerVersion marks an event of a schema version newer than this
// service knows (a gateway upgraded first). Its order may have been answered
// 202, so its unit stays reserved (the gateway's accepted record keeps the
// abandoned-reservation pass off it for a day): once this service is
// upgraded, produce the dead letter back onto the orders topic and it is
// persisted like any order.
const ReasonNewerVersion = "NEWER_VERSION"

// Dead-letter headers, added to the original message's headers.
const (
	HeaderReason          = "reason"
	HeaderOrderID         = "order-id"
	HeaderError           = "error"
	HeaderSourceTopic     = "source-topic"
	HeaderSourcePartition = "source-partition"
	HeaderSourceOffset    = "source-offset"
	// HeaderTruncatedFrom: the dead letter carries only the first
	// maxDeadValue bytes of the message's value, which had this many.
	HeaderTruncatedFrom = "truncated-from"
	// HeaderDropped: the dead letter lacks the message's key and headers
	// ("key-and-headers", over maxDeadExtra bytes together) or its key,
	// value and headers ("all": the dead-letter topic refused even the cut
	// dead letter as too large); the value names their sizes.
	HeaderDropped = "dropped"
)

// Backoff of a batch that PostgreSQL or the dead-letter topic refused.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Config is what the consumer needs from the service configuration.
type Config struct {
	Brokers         string
	Topic           string
	DLQTopic        string
	Group           string
	BatchSize       int
	BatchWait       time.Duration      // a batch's first message waits at most this for the rest
	FetchWait       time.Duration      // the broker holds a fetch with less than a batch at most this
	ShutdownTimeout time.Duration      // how long the in-flight batch may take after ctx ends
	Security        kafkaconf.Security // TLS and SASL towards the brokers
	// Lag is the service's periodic reading of the group's lag; the stall
	// check needs it (nil: no check).
	Lag *lag.Tracker
}

// Consumer is one member of the ordersvc consumer group.
type Consumer struct {
	cfg      Config
	store    *store.Store
	stock    *stock.Store
	relay    *relay.Relay
	log      *slog.Logger
	metrics  *metrics.Counters
	consumer *kafka.Consumer // replaced by replaceClient, in Run's goroutine only
	producer *kafka.Producer // replaced by replaceProducer, in Run's goroutine only
	// producerCfg makes a dead-letter producer (New, replaceProducer).
	producerCfg       kafka.ConfigMap
	producersReplaced atomic.Int64
	stall             *stallCheck
	logsDone          chan struct{} // the consumer's log forwarder has ended

	onPoll     func(*kafka.Consumer) // a test's look at the client before each poll (export_test.go)
	joined     atomic.Bool           // an assignment arrived since Run started
	lastPoll   atomic.Int64          // unix nanos of the last Poll return
	processing atomic.Bool
	closed     atomic.Bool
	leftInTime atomic.Bool // Close's close of the client returned within its bound
}

// New creates the group consumer and the dead-letter producer. librdkafka
// connects in the background; nothing is read before Run.
func New(cfg Config, st *store.Store, stk *stock.Store, rl *relay.Relay, log *slog.Logger, m *metrics.Counters) (*Consumer, error) {
	kc, err := newGroupClient(cfg)
	if err != nil {
		return nil, err
	}
	producerCfg := kafka.ConfigMap{
		"bootstrap.servers":      cfg.Brokers,
		"client.id":              clientID(),
		"acks":                   "all",
		"enable.idempotence":     true,
		"linger.ms":              5,
		"go.logs.channel.enable": true,
		// The client's defaults buffer a million events and a million
		// messages for ProduceChannel (unused here): 23 MB of pointers
		// that every garbage collection scanned. forwardLogs reads the
		// events.
		"go.events.channel.size":  1000,
		"go.produce.channel.size": 0,
		// A dead letter not delivered within this is reported failed
		// (librdkafka's default is 5 minutes), and deadLetter replaces
		// the producer: the batch waits for its dead letters.
		"message.timeout.ms": int(deadLetterTimeout / time.Millisecond),
	}
	cfg.Security.Apply(producerCfg)
	kp, err := kafka.NewProducer(&producerCfg)
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("create dead-letter producer: %w", err)
	}
	return &Consumer{cfg: cfg, store: st, stock: stk, relay: rl, log: log, metrics: m, consumer: kc, producer: kp,
		producerCfg: producerCfg, stall: newStallCheck()}, nil
}

// newGroupClient makes the librdkafka consumer of the group.
func newGroupClient(cfg Config) (*kafka.Consumer, error) {
	consumerCfg := kafka.ConfigMap{
		"bootstrap.servers": cfg.Brokers,
		"group.id":          cfg.Group,
		"client.id":         clientID(),
		// Offsets are stored only once their batch is committed in
		// PostgreSQL (StoreOffsets in commit), and librdkafka commits the
		// stored ones in the background and on revoke and close. A
		// synchronous commit (CommitOffsets) would be simpler, but
		// librdkafka waits for its result without a bound while the group
		// coordinator moves, and a consumer blocked there stops consuming
		// and cannot shut down (confluentinc/librdkafka#1605, #3740; seen
		// once here after a broker restart). Committed offsets are never
		// ahead of the database either way; a crash redelivers at most
		// auto.commit.interval.ms more, which the order id makes harmless.
		"enable.auto.commit":       true,
		"enable.auto.offset.store": false,
		"auto.commit.interval.ms":  200,
		"auto.offset.reset":        "earliest",
		"enable.partition.eof":     false,
		// A member killed without leaving gives its partitions back after
		// this, not librdkafka's 45 s default (a restart waited that long).
		"session.timeout.ms":    6000,
		"heartbeat.interval.ms": 2000,
		// A subscribed topic that does not exist yet (created by the
		// gateway's first publish) is otherwise noticed only at the next
		// metadata refresh, 5 minutes by default.
		"topic.metadata.refresh.interval.ms": 2000,
		// Longer than the worst batch retry we expect before someone acts;
		// past it the group moves our partitions and redelivery is harmless.
		"max.poll.interval.ms": 300000,
		// The broker holds a fetch until it has about a batch's worth of
		// events or the fetch wait has passed. librdkafka's default
		// (answer as soon as one byte is there) makes a fetch per handful
		// of orders while a sale streams in, and each costs the broker
		// and this service CPU the sale's purchases compete for. An idle
		// consumer fetches once per wait: on the local stack each empty
		// fetch cost the broker about a millisecond of CPU, 60 ms a second
		// at 20 ms (FLASHSALE_BATCH_WAIT, which this wait was until
		// FLASHSALE_FETCH_WAIT), 20 ms a second at 100 ms. A sale's last
		// orders wait for both at most: the fetch, then the batch.
		"fetch.min.bytes":        fetchMinBytes(cfg.BatchSize),
		"fetch.wait.max.ms":      max(1, int(cfg.FetchWait/time.Millisecond)),
		"go.logs.channel.enable": true,
	}
	cfg.Security.Apply(consumerCfg)
	kc, err := kafka.NewConsumer(&consumerCfg)
	if err != nil {
		return nil, fmt.Errorf("create kafka consumer: %w", err)
	}
	return kc, nil
}

// eventBytes is about what one OrderPlaced takes in a fetch response: its
// JSON (~170 bytes) and the record's framing in a batch.
const eventBytes = 180

// fetchMinBytes is the fetch size to wait for: a full batch of events,
// bounded to stay below librdkafka's per-partition fetch size (1 MiB).
func fetchMinBytes(batchSize int) int {
	return min(batchSize*eventBytes, 512<<10)
}

// clientID names this member in the broker's logs and the group's member
// list. Several instances share the group (the broker gives each its own
// member id and its share of the partitions); host and pid tell them apart
// to an operator, where librdkafka's default names them all "rdkafka".
func clientID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("ordersvc-%s-%d", host, os.Getpid())
}

// Ready reports whether the consumer is alive: subscribed and polling, or
// busy with a batch. It does not require partitions: a member may rightly
// hold none (more members than partitions), and the orders topic may not
// exist until the gateway's first publish, which must not keep the service
// that the gateway waits for unready.
func (c *Consumer) Ready() error {
	last := c.lastPoll.Load()
	switch {
	case c.closed.Load():
		return errors.New("consumer closed")
	case last == 0:
		return errors.New("consumer not started")
	case c.processing.Load():
		return nil
	case time.Since(time.Unix(0, last)) > 10*time.Second:
		return errors.New("consumer has not polled for 10s")
	}
	return nil
}

// Assigned reports whether the consumer has received an assignment since it
// started (tests use it to know the group has settled).
func (c *Consumer) Assigned() bool { return c.joined.Load() }

// Run consumes until ctx ends, then finishes the in-flight batch (within
// ShutdownTimeout), commits what is persisted, flushes the dead-letter
// producer and closes both clients. It returns an error only when the group
// cannot be joined, librdkafka reports a fatal error, or a batch could not
// be finished during shutdown.
func (c *Consumer) Run(ctx context.Context) error {
	defer c.forwardLogs()()
	// The in-flight batch outlives ctx by at most ShutdownTimeout, so a
	// signal does not throw away a batch that is one commit away.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(c.cfg.ShutdownTimeout, cancelWork) })
	defer stopTimer()

	var b polled
	flush := func() error {
		if msgs := b.take(); len(msgs) > 0 {
			return c.process(work, msgs)
		}
		return nil
	}
	var revokeErr error
	retired, err := c.subscribe(flush, &revokeErr)
	if err != nil {
		return err
	}
	c.log.Info("consumer started", "topic", c.cfg.Topic, "group", c.cfg.Group)
	for ctx.Err() == nil && revokeErr == nil {
		if err := c.pollInto(&b); err != nil {
			return err
		}
		if b.due(c.cfg.BatchSize) {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(b.msgs) > 0 {
			continue // a batch is open: the stall check waits for it
		}
		if now := time.Now(); c.stall.due(now) {
			if stuck := c.checkStall(now); len(stuck) > 0 {
				if retired, err = c.replaceClient(stuck, retired, flush, &revokeErr); err != nil {
					return err
				}
			}
		}
	}
	if revokeErr != nil {
		return revokeErr
	}
	return flush()
}

// forwardLogs forwards librdkafka's logs to the service log, and reads the
// dead-letter producer's events, until Close closes the clients' channels.
// Those events are errors only (each delivery report goes to its Produce
// call's own channel), which librdkafka logs as well; they are read so
// that the client never blocks on a full channel. Call the function it
// returns (it calls Close) to wait for the last line.
func (c *Consumer) forwardLogs() (closeAndWait func()) {
	c.logsDone = forwardLog(c.log, c.consumer.Logs())
	producerDone := forwardLog(c.log, c.producer.Logs())
	drained := make(chan struct{})
	go func(events chan kafka.Event) {
		defer close(drained)
		for range events {
		}
	}(c.producer.Events())
	return func() {
		c.Close()
		// A consumer whose close gave up is still closing, and its log
		// channel with it: waiting for that would hold the shutdown past
		// its grace (see Close).
		if c.leftInTime.Load() {
			<-c.logsDone
		}
		<-producerDone
		<-drained
	}
}

// subscribe subscribes the current client to the orders topic with its
// rebalance callback. Setting the returned flag retires the callback (its
// client is being replaced).
func (c *Consumer) subscribe(flush func() error, failed *error) (retired *atomic.Bool, err error) {
	retired = new(atomic.Bool)
	if err := c.consumer.SubscribeTopics([]string{c.cfg.Topic}, c.onRebalance(flush, failed, retired)); err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", c.cfg.Topic, err)
	}
	return retired, nil
}

// onRebalance is the callback Poll calls when the group moves partitions.
// Before librdkafka takes partitions away the batch read from them is
// finished and its offsets stored, which librdkafka commits as it lets
// them go, so the next owner does not redo it (it would be harmless, only
// slower). A flush that fails there is left in *failed for Run. Once
// retired (its client replaced and closing) it does nothing.
func (c *Consumer) onRebalance(flush func() error, failed *error, retired *atomic.Bool) kafka.RebalanceCb {
	return func(kc *kafka.Consumer, ev kafka.Event) error {
		if retired.Load() {
			return nil
		}
		now := time.Now()
		switch e := ev.(type) {
		case kafka.AssignedPartitions:
			c.joined.Store(true)
			c.stall.assigned(e.Partitions, now)
			c.log.Info("partitions assigned", "count", len(e.Partitions))
		case kafka.RevokedPartitions:
			if err := flush(); err != nil {
				*failed = err
			}
			lost := kc.AssignmentLost()
			c.stall.revoked(e.Partitions, lost, now)
			c.log.Info("partitions revoked", "count", len(e.Partitions), "lost", lost)
		}
		return nil
	}
}

// pollInto polls once, for at most what is left of b's wait, and adds a
// message to b. Only a fatal client error is returned.
func (c *Consumer) pollInto(b *polled) error {
	if c.onPoll != nil {
		c.onPoll(c.consumer)
	}
	ev := c.consumer.Poll(int(b.pollWait().Milliseconds()))
	c.lastPoll.Store(time.Now().UnixNano())
	switch e := ev.(type) {
	case *kafka.Message:
		if e.TopicPartition.Error != nil {
			c.log.Warn("consume error", "err", e.TopicPartition.Error)
			c.stall.read(e.TopicPartition.Partition, time.Unix(0, c.lastPoll.Load())) // not silent: not stuck
			return nil
		}
		b.add(e, c.cfg.BatchWait)
	case kafka.Error:
		if e.IsFatal() {
			return fmt.Errorf("kafka consumer: %w", e)
		}
		// Transport errors are retried by librdkafka; they are worth a
		// look only if they persist, which /readyz shows.
		c.log.Debug("kafka consumer error", "err", e, "code", e.Code())
	}
	return nil
}

// idlePoll is how long a poll waits when no batch is open.
const idlePoll = 100 * time.Millisecond

// polled collects polled messages until it holds BatchSize of them or its
// first one has waited BatchWait.
type polled struct {
	msgs     []*kafka.Message
	deadline time.Time
}

func (b *polled) add(m *kafka.Message, wait time.Duration) {
	if len(b.msgs) == 0 {
		b.deadline = time.Now().Add(wait)
	}
	b.msgs = append(b.msgs, m)
}

// pollWait is how long the next poll may wait: what is left of an open
// batch's wait, or idlePoll.
func (b *polled) pollWait() time.Duration {
	if len(b.msgs) == 0 {
		return idlePoll
	}
	return max(time.Until(b.deadline), 0)
}

// due reports whether the batch is full or has waited long enough.
func (b *polled) due(size int) bool {
	return len(b.msgs) >= size || (len(b.msgs) > 0 && !time.Now().Before(b.deadline))
}

// take empties the batch and returns what it held.
func (b *polled) take() []*kafka.Message {
	msgs := b.msgs
	b.msgs = nil
	return msgs
}

// Close flushes the dead-letter producer and closes both clients, leaving
// the group. Run calls it; call it only when Run never ran.
func (c *Consumer) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	if n := c.producer.Flush(int(c.cfg.ShutdownTimeout.Milliseconds())); n > 0 {
		c.log.Warn("dead-letter producer closed with undelivered messages", "count", n)
	}
	c.producer.Close()
	// Offsets are stored as batches finish, so a close that hangs (the
	// group coordinator moving) loses nothing; it must not hold the
	// shutdown past its grace.
	left, err := closeWithin(c.consumer, closeWait)
	c.leftInTime.Store(left)
	switch {
	case !left:
		c.log.Error("kafka consumer did not leave the group in time; its partitions move after its session timeout", "waited", closeWait)
	case err != nil:
		c.log.Warn("close kafka consumer", "err", err)
	}
}

// forwardLog writes a client's librdkafka logs to slog until the channel
// closes (the client's Close), then closes the channel it returns.
// librdkafka's info level is chatty (telemetry, metadata), so it maps to debug.
func forwardLog(log *slog.Logger, logs chan kafka.LogEvent) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for ev := range logs {
			writeLog(log, ev)
		}
	}()
	return done
}

func writeLog(log *slog.Logger, ev kafka.LogEvent) {
	level := slog.LevelDebug
	switch {
	case ev.Level <= 3:
		level = slog.LevelError
	case ev.Level == 4:
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "librdkafka", "client", ev.Name, "tag", ev.Tag, "msg", ev.Message)
}

// deadLetter is one message for the dead-letter topic.
type deadLetter struct {
	msg     *kafka.Message
	reason  string
	orderID string
	detail  string
}

// process handles one batch end to end and commits its offsets. It returns
// an error only when ctx ends before the batch is persisted and
// dead-lettered; then nothing of the batch is committed.
func (c *Consumer) process(ctx context.Context, msgs []*kafka.Message) error {
	c.processing.Store(true)
	defer c.processing.Store(false)
	start := time.Now()

	b := decodeBatch(msgs)
	if err := c.persist(ctx, b); err != nil {
		return err
	}
	for _, d := range b.dead {
		if d.reason == ReasonInvalidPayload || d.reason == ReasonNewerVersion {
			c.metrics.Reject(d.reason, 1)
		}
	}
	if err := c.deadLetter(ctx, b.dead); err != nil {
		return err
	}
	if err := c.release(ctx, b); err != nil {
		return err
	}
	// Only now, with the batch in PostgreSQL and its dead letters
	// delivered, may its offsets be stored.
	c.commit(msgs)
	c.metrics.OrdersPersisted.Add(float64(b.accepted))
	c.metrics.OrdersDuplicate.Add(float64(b.duplicates))
	c.metrics.ObserveBatch(time.Since(start))
	c.log.Debug("batch done", "messages", len(msgs), "accepted", b.accepted, "duplicates", b.duplicates,
		"dead", len(b.dead), "took", time.Since(start))
	return nil
}

// batch is what process learns of one batch of messages, step by step.
type batch struct {
	events    []event.OrderPlaced // decoded, for PersistBatch
	eventMsgs []*kafka.Message    // the message of each event
	dead      []deadLetter
	unknown   []event.OrderPlaced // no row possible: released directly after the dead letter
	rejected  []uuid.UUID         // REJECTED rows whose outbox release is drained after the commit
	accepted  int
	// duplicates counts events already stored, including those dead-lettered again.
	duplicates int
}

// decodeBatch decodes msgs; what does not decode is dead-lettered as it
// came.
func decodeBatch(msgs []*kafka.Message) *batch {
	b := &batch{
		events:    make([]event.OrderPlaced, 0, len(msgs)),
		eventMsgs: make([]*kafka.Message, 0, len(msgs)),
	}
	for _, m := range msgs {
		e, err := decode(m.Value)
		if errors.Is(err, event.ErrNewerVersion) {
			b.dead = append(b.dead, deadLetter{msg: m, reason: ReasonNewerVersion, detail: err.Error()})
			continue // never released: see ReasonNewerVersion
		}
		if err != nil {
			b.dead = append(b.dead, deadLetter{msg: m, reason: ReasonInvalidPayload, detail: err.Error()})
			if e.OrderID != uuid.Nil {
				// Decodable but not storable: its unit may be reserved.
				b.unknown = append(b.unknown, e)
			}
			continue
		}
		b.events = append(b.events, e)
		b.eventMsgs = append(b.eventMsgs, m)
	}
	return b
}

// persistAttempt bounds one attempt at writing a batch; a batch takes
// milliseconds. Without it an attempt whose connection went silent (no
// reset) waited for the client's TCP to give up, minutes, with the
// batch's item rows locked, while the consumer reported ready.
const persistAttempt = 30 * time.Second

// persist writes b's events, retrying until PostgreSQL takes them or ctx
// ends, and applies each event's outcome to b.
func (c *Consumer) persist(ctx context.Context, b *batch) error {
	if len(b.events) == 0 {
		return nil
	}
	var outcomes []store.Outcome
	err := retry(ctx, c.log, c.metrics, "persist batch", func() error {
		actx, cancel := context.WithTimeout(ctx, persistAttempt)
		defer cancel()
		var err error
		outcomes, err = c.store.PersistBatch(actx, b.events)
		return err
	})
	if err != nil {
		return fmt.Errorf("persist batch of %d events: %w", len(b.events), err)
	}
	for i, o := range outcomes {
		e := b.events[i]
		a := actionFor(o)
		switch {
		case a.accepted:
			b.accepted++
		case a.duplicate:
			b.duplicates++
		}
		if a.drain {
			b.rejected = append(b.rejected, e.OrderID)
		}
		if a.release {
			b.unknown = append(b.unknown, e)
		}
		if a.rejectMetric {
			c.metrics.Reject(o.Reason, 1)
		}
		if a.deadLetter {
			b.dead = append(b.dead, deadLetter{msg: b.eventMsgs[i], reason: o.Reason, orderID: e.OrderID.String()})
		}
	}
	return nil
}

// action is what process does for one persisted event.
type action struct {
	accepted     bool // a new PENDING row (OrdersPersisted)
	duplicate    bool // already stored (OrdersDuplicate)
	rejectMetric bool // counted under its reason in the reject metric
	deadLetter   bool
	drain        bool // its unit goes back through the stock_release outbox
	release      bool // no row, so no outbox row: its unit is released directly
}

// actionFor decides what an outcome of PersistBatch calls for.
func actionFor(o store.Outcome) action {
	switch {
	case o.Kind == store.Accepted:
		return action{accepted: true}
	case o.Kind == store.Rejected:
		return action{rejectMetric: true, deadLetter: true, drain: true}
	case o.Kind == store.Unpersistable:
		return action{rejectMetric: true, deadLetter: true, release: true}
	case o.Redead():
		// Rejected by an earlier delivery whose dead letter may have been
		// lost between commit and produce: the DLQ is at least once.
		return action{duplicate: true, deadLetter: true, drain: true}
	}
	return action{duplicate: true}
}

// deadLetterTimeout bounds a dead letter's delivery (message.timeout.ms).
const deadLetterTimeout = 15 * time.Second

// deadLetter produces dead, retrying until the dead-letter topic takes
// them all or ctx ends. A delivery that timed out replaces the producer
// before the next try: fault 6b caught one that, after the broker was
// fenced for a moment, never delivered again (confluentinc/librdkafka#5430),
// and the batch, every partition the member reads, waited for its dead
// letters for good.
func (c *Consumer) deadLetter(ctx context.Context, dead []deadLetter) error {
	if len(dead) == 0 {
		return nil
	}
	err := retry(ctx, c.log, c.metrics, "dead-letter", func() error {
		err := c.produceDead(ctx, dead)
		var kerr kafka.Error
		if errors.As(err, &kerr) && kerr.Code() == kafka.ErrMsgTimedOut {
			if rerr := c.replaceProducer(); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("dead-letter %d messages: %w", len(dead), err)
	}
	c.metrics.DLQ.Add(float64(len(dead)))
	return nil
}

// release gives back the units of b's rejected and unpersistable orders.
// Units go back after the commit. The rejected orders' outbox rows are
// durable, so a Redis failure only delays their release to the relay's
// next pass. An unpersistable order (unknown item, unstorable user id) has
// no row, hence no outbox row, and nothing else would ever release it: its
// release is retried (a Redis failure, a sharded repair's pause) before
// the batch's offsets are stored, as its dead letter is.
func (c *Consumer) release(ctx context.Context, b *batch) error {
	if len(b.rejected) > 0 {
		if _, err := c.relay.Drain(ctx, b.rejected); err != nil {
			c.log.Warn("release of rejected orders deferred to the relay", "count", len(b.rejected), "err", err)
		}
	}
	for _, e := range b.unknown {
		// Keyed by order id: it only returns a unit this order took. The
		// order never comes to exist, so the admission token its
		// reservation spent goes back with the unit (WriteOff).
		err := retry(ctx, c.log, c.metrics, "release unpersistable order", func() error {
			_, err := c.stock.WriteOff(ctx, e.SaleID, e.ItemID, e.UserID, e.OrderID.String())
			if errors.Is(err, stock.ErrNotLoaded) && !errors.Is(err, stock.ErrPaused) {
				return nil // no stock to give back to: a load or repair decides
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("release unpersistable order %s: %w", e.OrderID, err)
		}
	}
	return nil
}

// decode is event.Unmarshal plus what PostgreSQL would refuse forever: a
// NUL byte cannot be stored in text, and an event that can never be written
// must be dead-lettered rather than retried without end. When an invalid
// event still names an order, sale, item and user, it is returned with the
// error so its reservation can be released (the release is keyed by order
// id: it only gives back a unit that order took).
func decode(b []byte) (event.OrderPlaced, error) {
	e, err := event.Unmarshal(b)
	if err == nil && strings.IndexByte(e.UserID, 0) >= 0 {
		err = fmt.Errorf("%w: NUL byte in user id", event.ErrInvalid)
	}
	if err == nil {
		return e, nil
	}
	var raw event.OrderPlaced
	if json.Unmarshal(b, &raw) != nil || raw.OrderID == uuid.Nil || raw.SaleID <= 0 || raw.ItemID <= 0 || raw.UserID == "" {
		return event.OrderPlaced{}, err
	}
	return raw, err
}

// maxDeadValue bounds the part of a message's value a dead letter carries.
// A message near the topic's size limit, plus the dead letter's headers,
// exceeds the producer's: the producer refused it for ever, and the batch,
// which with orders spread over every partition is all the member reads,
// was retried without end. Our events are ~200 bytes; what is cut is
// garbage, and its size is in a header.
const maxDeadValue = 64 << 10

// maxDeadExtra bounds the message's key and headers a dead letter carries,
// together: a message whose bulk is its key or headers is as large as one
// whose bulk is its value. Over it, both are dropped (HeaderDropped).
const maxDeadExtra = 16 << 10

// produceDead sends the dead letters and waits for every delivery report.
// One the dead-letter topic refuses as too large (a topic whose
// max.message.bytes is below the orders topic's) is sent again bare: only
// the dead letter's own headers, which say where the message is. Retried
// whole, it would hold the batch, and every partition with it, for ever.
func (c *Consumer) produceDead(ctx context.Context, dead []deadLetter) error {
	tooLarge, err := c.sendDead(ctx, dead, false)
	if err != nil || len(tooLarge) == 0 {
		return err
	}
	c.log.Warn("dead letters refused as too large by the dead-letter topic; sent without the message's key, value and headers",
		"count", len(tooLarge), "topic", c.cfg.DLQTopic)
	still, err := c.sendDead(ctx, tooLarge, true)
	if err != nil {
		return err
	}
	if len(still) > 0 {
		return fmt.Errorf("dead letter of headers alone refused as too large by %s (order %s)", c.cfg.DLQTopic, still[0].orderID)
	}
	return nil
}

// sendDead produces dead (bare: with the dead letter's headers only) and
// waits for every delivery report. It returns those refused as too large.
func (c *Consumer) sendDead(ctx context.Context, dead []deadLetter, bare bool) (tooLarge []deadLetter, err error) {
	reports := make(chan kafka.Event, len(dead)) // room for every report: nothing blocks librdkafka
	sent := 0
	for i, d := range dead {
		dm := deadMessage(d, &c.cfg.DLQTopic, bare)
		dm.Opaque = i
		for {
			err := c.producer.Produce(dm, reports)
			if err == nil {
				sent++
				break
			}
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.Code() == kafka.ErrMsgSizeTooLarge {
				tooLarge = append(tooLarge, d)
				break
			}
			if !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull {
				return nil, fmt.Errorf("produce dead letter: %w", err)
			}
			c.producer.Flush(100)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	var firstErr error
	for range sent {
		select {
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			if !ok || m.TopicPartition.Error == nil {
				continue
			}
			var kerr kafka.Error
			if i, ok := m.Opaque.(int); ok && errors.As(m.TopicPartition.Error, &kerr) && kerr.Code() == kafka.ErrMsgSizeTooLarge {
				tooLarge = append(tooLarge, dead[i])
			} else if firstErr == nil {
				firstErr = fmt.Errorf("dead letter delivery: %w", m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return tooLarge, firstErr
}

// deadMessage is d's dead letter on topic: the message's key, value and
// headers, bounded (maxDeadValue, maxDeadExtra), or none of them when
// bare, plus the headers saying why and where from.
func deadMessage(d deadLetter, topic *string, bare bool) *kafka.Message {
	m := d.msg
	extra := len(m.Key)
	for _, h := range m.Headers {
		extra += len(h.Key) + len(h.Value)
	}
	keep := !bare && extra <= maxDeadExtra
	headers := make([]kafka.Header, 0, len(m.Headers)+8)
	if keep {
		headers = append(headers, m.Headers...)
	}
	headers = append(headers,
		kafka.Header{Key: HeaderReason, Value: []byte(d.reason)},
		kafka.Header{Key: HeaderOrderID, Value: []byte(d.orderID)},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(*m.TopicPartition.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(m.TopicPartition.Partition)))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(m.TopicPartition.Offset.String())},
	)
	if d.detail != "" {
		detail := d.detail
		if bare && len(detail) > 1024 {
			detail = detail[:1024]
		}
		headers = append(headers, kafka.Header{Key: HeaderError, Value: []byte(detail)})
	}
	dm := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: topic, Partition: kafka.PartitionAny}, Headers: headers}
	sizes := fmt.Sprintf("key %d bytes, headers %d bytes", len(m.Key), extra-len(m.Key))
	switch {
	case bare:
		dm.Headers = append(dm.Headers, kafka.Header{Key: HeaderDropped, Value: []byte("all: " + sizes + fmt.Sprintf(", value %d bytes", len(m.Value)))})
		return dm
	case !keep:
		dm.Headers = append(dm.Headers, kafka.Header{Key: HeaderDropped, Value: []byte("key-and-headers: " + sizes)})
	default:
		dm.Key = m.Key
	}
	dm.Value = m.Value
	if len(dm.Value) > maxDeadValue {
		dm.Headers = append(dm.Headers, kafka.Header{Key: HeaderTruncatedFrom, Value: []byte(strconv.Itoa(len(m.Value)))})
		dm.Value = dm.Value[:maxDeadValue]
	}
	return dm
}

// replaceProducer puts a new dead-letter producer in the place of the
// current one, whose deliveries time out. The old one is closed in the
// background (its logs and events forwarders end with it). Run's
// goroutine only.
func (c *Consumer) replaceProducer() error {
	kp, err := kafka.NewProducer(&c.producerCfg)
	if err != nil {
		return fmt.Errorf("replace the dead-letter producer: %w", err)
	}
	old := c.producer
	c.producer = kp
	forwardLog(c.log, kp.Logs())
	go func(events chan kafka.Event) {
		for range events {
		}
	}(kp.Events())
	go old.Close()
	c.producersReplaced.Add(1)
	c.log.Warn("replaced the dead-letter producer: its deliveries timed out (confluentinc/librdkafka#5430)", "timeout_ms", c.producerCfg["message.timeout.ms"])
	return nil
}

// commit stores offset+1 of the last message per partition for the
// background commit (see New). Call it only once msgs are in PostgreSQL.
func (c *Consumer) commit(msgs []*kafka.Message) {
	type tp struct {
		topic     string
		partition int32
	}
	last := map[tp]kafka.Offset{}
	for _, m := range msgs {
		k := tp{*m.TopicPartition.Topic, m.TopicPartition.Partition}
		if o, ok := last[k]; !ok || m.TopicPartition.Offset > o {
			last[k] = m.TopicPartition.Offset
		}
	}
	offsets := make([]kafka.TopicPartition, 0, len(last))
	now := time.Now()
	for k, o := range last {
		offsets = append(offsets, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition, Offset: o + 1})
		c.stall.read(k.partition, now) // the partition is read: not stalled
	}
	if _, err := c.consumer.StoreOffsets(offsets); err != nil {
		// The batch is persisted; an offset not stored only means a
		// redelivery, which is idempotent.
		var kerr kafka.Error
		if errors.As(err, &kerr) {
			switch kerr.Code() {
			case kafka.ErrState, kafka.ErrUnknownPartition, kafka.ErrAssignmentLost:
				c.log.Debug("offset not stored: partition no longer assigned", "err", err)
				return
			}
		}
		c.log.Warn("offset not stored; the batch will be redelivered", "err", err)
	}
}

// retry runs op until it succeeds or ctx ends, backing off exponentially
// from 100ms to 2s. Nothing is ever dropped or dead-lettered because a
// dependency is down.
func retry(ctx context.Context, log *slog.Logger, m *metrics.Counters, what string, op func() error) error {
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			if attempt > 1 {
				log.Info("recovered", "op", what, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: giving up at shutdown after %d attempts: %w", what, attempt, err)
		}
		m.BatchRetries.Add(1)
		switch {
		case errors.Is(err, store.ErrActiveConflict):
			log.Debug("retrying after a concurrent active order", "op", what, "attempt", attempt)
		case attempt < 10:
			log.Warn("retrying", "op", what, "attempt", attempt, "backoff", backoff, "err", err)
		case attempt%10 == 0:
			// About 20s of failure: the batch is stuck until someone acts.
			log.Error("still retrying", "op", what, "attempt", attempt, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: giving up at shutdown after %d attempts: %w", what, attempt, err)
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
