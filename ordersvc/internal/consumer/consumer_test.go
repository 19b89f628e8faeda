package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/consumer"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/kafkatopic"
	"flashsale/tools/testenv"
)

// env is one test's private slice of the stack: its own topics, group and sale.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	store  *store.Store
	stock  *stock.Store
	topic  string
	dlq    string
	group  string
	prod   *kafka.Producer
	logger *slog.Logger
}

const partitions = 3

func newEnv(t *testing.T) *env {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr(), testenv.KafkaBrokers())
	pool := testdb.Pool(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("connect redis: %v", err)
	}
	t.Cleanup(rc.Close)
	return newEnvOn(t, pool, rc)
}

// ownEnv is newEnv on a database and a Redis of the test's own (testdb.Own).
func ownEnv(t *testing.T) *env {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	pool, rc := testdb.Own(t)
	return newEnvOn(t, pool, rc)
}

// newEnvOn is newEnv on the given database and Redis.
func newEnvOn(t *testing.T, pool *pgxpool.Pool, rc rueidis.Client) *env {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	suffix := uuid.NewString()[:8]
	e := &env{
		t: t, pool: pool, store: store.New(pool), stock: stock.New(rc),
		topic: "test-" + name + "-" + suffix, dlq: "test-" + name + "-" + suffix + ".dlq",
		group:  "test-" + name + "-" + suffix,
		logger: testLogger(t),
	}
	ctx := testenv.Context(t)
	adm, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kafkatopic.DeleteAtCleanup(t, testenv.KafkaBrokers(), e.topic, e.dlq)
	res, err := adm.CreateTopics(ctx, []kafka.TopicSpecification{
		{Topic: e.topic, NumPartitions: partitions, ReplicationFactor: 1},
		{Topic: e.dlq, NumPartitions: 1, ReplicationFactor: 1},
	})
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("create topic %s: %v", r.Topic, r.Error)
		}
	}
	e.prod, err = kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "acks": "all", "enable.idempotence": true, "linger.ms": 1, "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prod.Close)
	return e
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// publish produces raw values keyed like the gateway (by item id) and waits for the acks.
func (e *env) publish(key string, values ...[]byte) {
	e.t.Helper()
	reports := make(chan kafka.Event, len(values))
	for _, v := range values {
		if err := e.prod.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &e.topic, Partition: kafka.PartitionAny},
			Key: []byte(key), Value: v}, reports); err != nil {
			e.t.Fatal(err)
		}
	}
	for range values {
		m := (<-reports).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			e.t.Fatalf("publish: %v", m.TopicPartition.Error)
		}
	}
}

// publishSpread produces raw values without a key over every partition in
// turn, as the gateway spreads a hot item's orders, and waits for the acks.
func (e *env) publishSpread(values ...[]byte) {
	e.t.Helper()
	reports := make(chan kafka.Event, len(values))
	for i, v := range values {
		if err := e.prod.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &e.topic, Partition: int32(i % partitions)},
			Value: v}, reports); err != nil {
			e.t.Fatal(err)
		}
	}
	for range values {
		m := (<-reports).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			e.t.Fatalf("publish: %v", m.TopicPartition.Error)
		}
	}
}

func (e *env) publishEvents(evs ...event.OrderPlaced) {
	e.t.Helper()
	for _, ev := range evs {
		b, err := ev.Marshal()
		if err != nil {
			e.t.Fatal(err)
		}
		e.publish(fmt.Sprint(ev.ItemID), b)
	}
}

// running is a consumer under test.
type running struct {
	c       *consumer.Consumer
	metrics *metrics.Counters
	cancel  context.CancelFunc
	done    chan error
}

// start runs a consumer of the env's topic and group persisting to st.
func (e *env) start(st *store.Store, shutdown time.Duration) *running {
	e.t.Helper()
	return e.startWith(st, shutdown, nil, nil)
}

// startWith is start with the consumer's configuration changed by
// configure, and prepare called on it before it runs (either may be nil).
func (e *env) startWith(st *store.Store, shutdown time.Duration, configure func(*consumer.Config), prepare func(*consumer.Consumer)) *running {
	e.t.Helper()
	m := metrics.New()
	rl := relay.New(e.store, e.stock, e.logger, m)
	cfg := consumer.Config{
		Brokers: testenv.KafkaBrokers(), Topic: e.topic, DLQTopic: e.dlq, Group: e.group,
		BatchSize: 100, BatchWait: 20 * time.Millisecond, ShutdownTimeout: shutdown,
	}
	if configure != nil {
		configure(&cfg)
	}
	c, err := consumer.New(cfg, st, e.stock, rl, e.logger, m)
	if err != nil {
		e.t.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	ctx, cancel := context.WithCancel(testenv.Context(e.t))
	r := &running{c: c, metrics: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	e.t.Cleanup(func() { r.stop() })
	return r
}

func (r *running) stop() error {
	r.cancel()
	err, ok := <-r.done
	if ok {
		close(r.done)
	}
	return err
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last state: %s", what, within, state)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// committed sums the group's committed offsets over the topic's partitions
// (a partition with no commit counts as 0).
func (e *env) committed() int64 {
	e.t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "group.id": e.group, "log_level": 3})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	var tps []kafka.TopicPartition
	for p := range int32(partitions) {
		tps = append(tps, kafka.TopicPartition{Topic: &e.topic, Partition: p})
	}
	got, err := c.Committed(tps, 5000)
	var kerr kafka.Error
	if errors.As(err, &kerr) && kerr.Code() == kafka.ErrGroupIDNotFound {
		return 0 // nothing committed yet
	}
	if err != nil {
		e.t.Fatalf("read committed offsets: %v", err)
	}
	var sum int64
	for _, tp := range got {
		if tp.Offset >= 0 {
			sum += int64(tp.Offset)
		}
	}
	return sum
}

// waitCommitted waits until n messages of the topic are committed.
func (e *env) waitCommitted(n int64) {
	e.t.Helper()
	eventually(e.t, 20*time.Second, fmt.Sprintf("%d offsets committed", n), func() (bool, string) {
		got := e.committed()
		return got >= n, fmt.Sprintf("%d committed", got)
	})
}

// readDLQ reads the dead-letter topic from the start until n messages arrived.
func (e *env) readDLQ(n int) []*kafka.Message {
	e.t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "group.id": e.group + "-dlq-reader",
		"enable.auto.commit": false, "log_level": 3})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &e.dlq, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		e.t.Fatal(err)
	}
	var got []*kafka.Message
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		m, err := c.ReadMessage(200 * time.Millisecond)
		var kerr kafka.Error
		if errors.As(err, &kerr) && kerr.IsTimeout() {
			continue
		}
		if err != nil {
			e.t.Fatalf("read dead letters: %v", err)
		}
		got = append(got, m)
	}
	if len(got) < n {
		e.t.Fatalf("dead letters: got %d, want %d", len(got), n)
	}
	return got
}

func header(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func orderEvent(sale store.Sale, item int, user string) event.OrderPlaced {
	return event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: sale.ID, ItemID: sale.Items[item].ID, UserID: user,
		PlacedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

func (e *env) status(id uuid.UUID) (string, string) {
	e.t.Helper()
	o, err := e.store.GetOrder(testenv.Context(e.t), id)
	if errors.Is(err, store.ErrNotFound) {
		return "", ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return o.Status, o.RejectReason
}

func (e *env) sold(saleID int64) int64 {
	e.t.Helper()
	s, err := e.store.GetSale(testenv.Context(e.t), saleID)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for _, it := range s.Items {
		n += it.Sold
	}
	return n
}
