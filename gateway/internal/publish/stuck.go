package publish

import (
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/kafkastuck"
)

// stuckCheck replaces a librdkafka client that lost partitions the cluster
// serves (pkg/kafkastuck: confluentinc/librdkafka#5430). Fault scenario 6b
// caught a gateway answering 503 to every purchase for a minute after the
// broker had been fenced for a moment.
//
// The check is cheap when nothing fails: it looks only at partitions whose
// breaker has been open for after (several publish timeouts: many trials
// failed) and that failed a delivery in that time, on the current client
// (a partition nobody publishes to keeps its breaker open after an outage
// without a trial, and says nothing about the client), and asks the
// cluster about them, once a second. When the
// cluster has served such a partition for the watch's grace (time for
// trials to reach it and fail) and its breaker is still open, the fault is
// the client's: a new client takes the next publishes, and the old one is
// closed once its deliveries in flight have their reports (no publish is
// failed for it). A partition the cluster reports leaderless or short of
// replicas, or a cluster that does not answer, is an outage the breakers
// already handle; a client that recovers by itself closes the breaker with
// its next trial.
type stuckCheck struct {
	mu      sync.Mutex    // keepUp's goroutine, and tests calling checkStuck
	after   time.Duration // a partition failing this long is a suspect
	timeout time.Duration // the publish timeout: a retired client's drain
	watch   kafkastuck.Watch
}

func newStuckCheck(publishTimeout time.Duration) *stuckCheck {
	return &stuckCheck{after: max(3*publishTimeout, 5*time.Second), timeout: publishTimeout,
		watch: kafkastuck.Watch{Grace: 2*publishTimeout + time.Second, Every: 30 * time.Second}}
}

// checkStuck replaces the client when a partition failing since before
// now-after is one the cluster has served for the grace (see stuckCheck).
func (p *Producer) checkStuck(now time.Time) {
	p.stuck.mu.Lock()
	defer p.stuck.mu.Unlock()
	if !p.stuck.watch.Due(now) {
		return
	}
	var served []int32
	if suspects := p.breakers.failingSince(now.Add(-p.stuck.after), now.Add(-p.stuck.after)); len(suspects) > 0 {
		if t, ok := p.clusterTopic(); ok {
			served = kafkastuck.Served(t, suspects)
		}
	}
	if stuck := p.stuck.watch.Stuck(now, served); len(stuck) > 0 {
		p.replaceClient(stuck)
	}
}

// clusterTopic is what the cluster says of the topic, through the current
// client or a fresh one (kafkastuck.ClusterTopic).
func (p *Producer) clusterTopic() (kafka.TopicMetadata, bool) {
	fresh := func() (kafkastuck.MetadataSource, func(), error) {
		c, err := kafka.NewProducer(&p.conf)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	}
	return kafkastuck.ClusterTopic(p.client.Load(), p.topic, partitionsRetry, fresh, partitionsRetry)
}

// replaceClient makes a new client take the next publishes, and closes
// the old one in the background once its deliveries have their reports
// (within the publish timeout; Close waits for it).
func (p *Producer) replaceClient(partitions []int32) {
	if p.swapClient("stuck", "partitions", partitions) {
		p.log.Warn("replaced the kafka producer: the cluster serves partitions it has failed every delivery to (confluentinc/librdkafka#5430)",
			"partitions", partitions, "failing_for_at_least", p.stuck.after)
	}
}

// Fatal replaces the client after librdkafka reported a fatal error (an
// idempotent producer's sequence lost, say): such a client refuses every
// produce from then on, locally, which no breaker counts and the stuck
// check does not see, so every purchase was answered 503 until a restart.
// Its deliveries still in flight are purged and settled as on any
// replacement.
func (p *Producer) Fatal(err error) {
	if p.swapClient("fatal", "err", err) {
		p.log.Error("replaced the kafka producer after a fatal error", "err", err)
	}
}

// swapClient is replaceClient's and Fatal's change of client; it reports
// whether a new client took over (logging why not otherwise).
func (p *Producer) swapClient(why string, args ...any) bool {
	c, err := p.newClient()
	if err != nil {
		p.log.Error("kafka producer "+why+", and no new one", append(args, "err", err)...)
		return false
	}
	p.swap.Lock()
	old := p.client.Swap(c)
	p.swap.Unlock()
	p.breakers.replacedAt.Store(p.now().UnixNano())
	p.metrics.replaced.Inc()
	p.clients.Add(1)
	go func() {
		defer p.clients.Done()
		left := old.Flush(int((p.stuck.timeout + purgeServe) / time.Millisecond))
		closeClient(old, left > 0)
	}()
	return true
}
