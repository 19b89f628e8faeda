package faults

import (
	"fmt"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/stackctl"
	"flashsale/tools/testenv"
)

// The broker stopped in the middle of a sale: every purchase during the
// outage answers 503 within the publish timeout and gives its unit back; no
// 202 without the broker's acknowledgement; after the restart the sale goes
// on, and everything accepted before the outage is in PostgreSQL (the
// broker persists acknowledged records in its DataDir).
func TestBrokerStoppedMidSale(t *testing.T) {
	r := &row{Fault: "2. Kafka broker stopped mid-sale",
		Injected: "deploy/stack/kafka.sh stop (SIGTERM) at ~1/4 sold, crowd 150 req/s; 3s outage; start kafka; FLASHSALE_PUBLISH_TIMEOUT=1s"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil)})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 400
	const publishTimeout = time.Second
	sl := openSale(t, s, qty)

	const (
		selling = 0
		down    = 1
		back    = 2
	)
	stop := sl.crowd(ctx, 150, 64)
	sl.waitAccepted(qty/4, 20*time.Second)
	stopping := time.Now()
	stopServer(t, stackctl.Kafka)
	t.Logf("deploy/stack/kafka.sh stop took %v", time.Since(stopping))
	sl.setPhase(down)
	time.Sleep(3 * time.Second)
	stop()

	// With nobody buying, Redis must hold exactly the units of the 202s:
	// every refused purchase gave its reservation back.
	before := sl.acceptedCopy()
	left, err := d.stock.Left(ctx, sl.id, sl.item)
	if err != nil {
		t.Fatal(err)
	}
	holders, err := d.stock.Holders(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	if int(left)+len(before) != qty || len(holders) != len(before) {
		t.Errorf("after the outage Redis has %d left and %d holders for %d accepted of %d: reservations of refused purchases were not all released",
			left, len(holders), len(before), qty)
	}

	startServer(t, stackctl.Kafka)
	sl.setPhase(back)
	sl.untilSoldOut(ctx, 150, 64, 60*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)

	sl.checkOnly("answers during the outage", within(down), outcome.Unavailable)
	sl.checkUnavailable("broker outage", func(a answer) bool { return a.phase == down })
	if n := sl.count(within(down)); n == 0 {
		t.Errorf("no purchase was sent during the outage")
	}
	var slowest time.Duration
	for _, a := range sl.where(within(down)) {
		slowest = max(slowest, a.took)
	}
	if bound := outageBound(publishTimeout); slowest > bound {
		t.Errorf("slowest answer during the outage took %v, want at most %v (publish timeout %v): %s", slowest, bound, publishTimeout, sl.slowest(within(down), 8))
	}
	phantom, err := d.unannounced(ctx, sl.id, accepted)
	if err != nil {
		t.Fatal(err)
	}
	if phantom > 0 {
		t.Errorf("%d orders were persisted for purchases answered 503", phantom)
	}
	recovered, ok := sl.recovery(back)
	if !ok {
		t.Errorf("the sale did not continue after the broker came back (%s)", sl.summary(within(back)))
	}
	r.Answered = fmt.Sprintf("before: %s; outage: %s; Redis after the outage: %d left + %d holders for %d accepted; after restart: %s, first 202 %v after the broker answered; %d orders persisted for refused purchases",
		sl.summary(within(selling)), sl.summary(within(down)), left, len(holders), len(before),
		sl.summary(func(a answer) bool { return a.phase == back }), recovered.Round(time.Millisecond), phantom)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// The broker stopped before a sale's first purchase, on a gateway that
// spreads orders and already knows the topic's partitions: librdkafka's
// all-brokers-down must make the sale's purchases fail fast, though no
// partition's breaker existed when it came. On the gateway before the fix
// the first pick made closed breakers and every purchase waited out the
// publish timeout.
func TestBrokerStoppedBeforeTheSale(t *testing.T) {
	const publishTimeout = 3 * time.Second
	r := &row{Fault: "2b. Kafka broker stopped before the sale's first purchase",
		Injected: "gateway up and the topic's partitions known; deploy/stack/kafka.sh stop; 2 s later a crowd of 50 req/s for 4 s; start kafka; FLASHSALE_PUBLISH_TIMEOUT=3s, orders spread"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{
		"FLASHSALE_PUBLISH_TIMEOUT": publishTimeout.String(),
		"FLASHSALE_PUBLISH_SPREAD":  "true",
	})})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 200
	sl := openSale(t, s, qty)

	const (
		down = 1
		back = 2
	)
	time.Sleep(time.Second) // the gateway reads the partition count at start
	stopServer(t, stackctl.Kafka)
	time.Sleep(2 * time.Second) // librdkafka notices every broker gone
	sl.setPhase(down)
	stop := sl.crowd(ctx, 50, 32)
	time.Sleep(4 * time.Second)
	stop()

	// Each partition's breaker lets one trial through per cooldown, and the
	// trial waits out the publish timeout; everything else is refused at once.
	sent := func(a answer) bool { return a.phase == down }
	fast := sl.count(func(a answer) bool { return sent(a) && a.took < 500*time.Millisecond })
	all := sl.count(sent)
	if all == 0 {
		t.Fatal("no purchase was sent during the outage")
	}
	if fast*10 < all*8 {
		t.Errorf("%d of %d purchases sent with every broker down were answered within 500 ms, want at least 80 %%: %s",
			fast, all, sl.slowest(sent, 8))
	}
	sl.checkOnly("answers during the outage", sent, outcome.Unavailable)

	startServer(t, stackctl.Kafka)
	sl.setPhase(back)
	sl.untilSoldOut(ctx, 150, 64, 60*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	recovered, ok := sl.recovery(back)
	if !ok {
		t.Errorf("the sale did not go on after the broker came back (%s)", sl.summary(within(back)))
	}
	r.Answered = fmt.Sprintf("outage: %d of %d answered within 500 ms (%s); after restart: %s, first 202 %v after the broker answered",
		fast, all, sl.summary(sent), sl.summary(within(back)), recovered.Round(time.Millisecond))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
