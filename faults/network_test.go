package faults

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"flashsale/tools/audit"
	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/testenv"
)

// netFault is a toxiproxy TCP proxy run in the test process on loopback.
// A fault is healed by replacing the proxy on the same address (closing
// every connection through it) rather than by removing the toxic:
// toxiproxy 2.5.0's RemoveToxic can deadlock against a connection being
// torn down at the same moment (Shopify/toxiproxy#412, #558), which is
// exactly what a client timing out does.
type netFault struct {
	t        *testing.T
	srv      *toxiproxy.ApiServer
	name     string
	upstream string
	addr     string
	p        *toxiproxy.Proxy
}

func newNetFault(t *testing.T, name, upstream string) *netFault {
	t.Helper()
	return newNetFaultAt(t, name, "127.0.0.1:0", upstream)
}

// newNetFaultAt is newNetFault on a fixed address: where a Kafka node
// advertises its PROXIED listener (deploy/stack/kafka-node.sh), so that a client
// bootstrapped through the proxy keeps using it for that broker.
func newNetFaultAt(t *testing.T, name, addr, upstream string) *netFault {
	t.Helper()
	n := &netFault{t: t, srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		name: name, upstream: upstream, addr: addr}
	n.start()
	n.addr = n.p.Listen
	t.Cleanup(func() { n.p.Stop() })
	return n
}

func (n *netFault) start() {
	n.t.Helper()
	n.p = toxiproxy.NewProxy(n.srv, n.name, n.addr, n.upstream)
	var err error
	for range 50 { // the old listener's port may take a moment to free
		if err = n.p.Start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("start proxy %s on %s: %v", n.name, n.addr, err)
}

// inject adds a toxic (toxiproxy's JSON attributes) on each stream.
func (n *netFault) inject(kind, attrs string, streams ...string) {
	n.t.Helper()
	for _, st := range streams {
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, kind+"-"+st, kind, st, attrs)
		done := make(chan error, 1)
		go func() {
			_, err := n.p.Toxics.AddToxicJson(strings.NewReader(js))
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				n.t.Fatalf("add toxic %s: %v", js, err)
			}
		case <-time.After(10 * time.Second):
			n.t.Fatalf("toxiproxy did not add toxic %s within 10s", js)
		}
	}
}

// heal replaces the proxy with a clean one on the same address.
func (n *netFault) heal() {
	n.t.Helper()
	n.p.Stop()
	n.start()
}

// Network faults between the gateway and Redis, through toxiproxy: answers
// delayed past the Redis timeout, a black hole that swallows every byte,
// and connections reset by the peer. Every purchase in a fault answers 503
// within the bound of its two Redis calls (reserve, then release), the sale
// recovers when the network does, and nothing stays reserved for nobody.
func TestRedisNetworkFaults(t *testing.T) {
	r := &row{Fault: "6a. network gateway ↔ Redis (toxiproxy)",
		Injected: "gateway's Redis through an in-process toxiproxy; FLASHSALE_REDIS_TIMEOUT=500ms; 2s each: latency 1500ms on replies, black hole (timeout toxic, both ways), reset_peer; 1.5s clean between; crowd 100 req/s"}
	record(t, r)
	ctx := testenv.Context(t)
	px := newNetFault(t, "redis", testenv.RedisAddr())
	s := harness.Start(t, harness.Options{
		Env:     baseEnv(nil),
		ProcEnv: map[string]map[string]string{"gateway": {"FLASHSALE_REDIS_ADDR": px.addr}},
	})
	d := dial(t)
	const qty = 600
	const redisTimeout = 500 * time.Millisecond
	sl := openSale(t, s, qty)

	faults := []struct {
		name, kind string
		streams    []string
		attrs      string
	}{
		{"latency", "latency", []string{"downstream"}, `{"latency":1500}`},
		{"black hole", "timeout", []string{"upstream", "downstream"}, `{"timeout":0}`},
		{"reset", "reset_peer", []string{"upstream"}, `{"timeout":0}`},
	}
	stop := sl.crowd(ctx, 100, 64)
	sl.waitAccepted(60, 20*time.Second)
	stop()
	var parts []string
	var stranded int
	for i, f := range faults {
		faultPhase, cleanPhase := int32(2*i+1), int32(2*i+2)
		px.inject(f.kind, f.attrs, f.streams...)
		sl.setPhase(faultPhase)
		stop = sl.crowd(ctx, 100, 64)
		time.Sleep(2 * time.Second)
		stop() // purchases in flight finish under the fault
		px.heal()
		// With nobody buying, a holder without a 202 is a reservation
		// whose release failed too.
		held, err := d.stock.Holders(ctx, sl.id)
		if err != nil {
			t.Fatal(err)
		}
		leaked := len(held) - len(sl.acceptedCopy()) - stranded
		stranded += leaked
		if leaked > 0 {
			// harness.Stack.Log keeps the tail of the log: a lower bound.
			t.Logf("%s: %d reservations leaked; the gateway log's tail has %d ERROR lines %q", f.name, leaked,
				strings.Count(s.Log("gateway"), "reservation not released"), "reservation not released")
		}
		sl.setPhase(cleanPhase)
		stop = sl.crowd(ctx, 100, 64)
		time.Sleep(1500 * time.Millisecond)
		stop()

		in := within(faultPhase)
		sl.checkOnly(f.name, in, outcome.Unavailable)
		sl.checkUnavailable(f.name, in)
		var slowest time.Duration
		for _, a := range sl.where(in) {
			slowest = max(slowest, a.took)
		}
		if bound := 2*redisTimeout + 500*time.Millisecond; slowest > bound {
			t.Errorf("%s: slowest purchase took %v, want at most %v (reserve and release, %v each): %s", f.name, slowest, bound, redisTimeout, sl.slowest(in, 5))
		}
		back, ok := sl.recovery(cleanPhase)
		if !ok {
			t.Errorf("%s: no purchase accepted within 1.5s of the network healing (%s)", f.name, sl.summary(within(cleanPhase)))
		}
		parts = append(parts, fmt.Sprintf("%s: %s, %d units left reserved for nobody, first 202 %v after healing",
			f.name, sl.summary(in), leaked, back.Round(time.Millisecond)))
	}
	// Nothing may stay held forever: once the network is back, a unit
	// reserved for nobody must come back without an operator.
	var strandedLater int
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := d.stock.Holders(ctx, sl.id)
		if err != nil {
			t.Fatal(err)
		}
		strandedLater = len(held) - len(sl.acceptedCopy())
		if strandedLater <= 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strandedLater > 0 {
		t.Errorf("%d units still reserved for purchases answered 503, 10s after the network healed: only an operator's reconcile returns them, and until then shoppers are told SOLD_OUT while they are unsold", strandedLater)
	}
	sl.setPhase(100)
	sl.untilSoldOut(ctx, 150, 64, 30*time.Second)
	d.waitPersisted(t, sl.id, sl.acceptedCopy(), 60*time.Second)
	soldOutAt := len(sl.acceptedCopy())
	rec := sl.reconcile(ctx)
	if rec.Leaked != stranded {
		t.Errorf("reconcile returned %d leaked reservations, the test counted %d", rec.Leaked, stranded)
	}
	// The units reconcile returned are on sale again: sell them.
	if rec.Leaked > 0 {
		sl.setPhase(101)
		sl.untilSoldOut(ctx, 150, 64, 30*time.Second)
		d.waitPersisted(t, sl.id, sl.acceptedCopy(), 60*time.Second)
	}
	r.Answered = strings.Join(parts, "; ") + fmt.Sprintf("; 10s after healing still %d stranded; first SOLD_OUT after %d of %d units; after reconcile: %s; %d accepted in all",
		strandedLater, soldOutAt, qty, sl.summary(within(101)), len(sl.acceptedCopy()))
	r.Audit = fmt.Sprintf("reconcile: %s; audit %s", rec, sl.audit(d))
}

// Network faults between the gateway and the broker. The Kafka protocol
// tells clients in its metadata where the brokers are, so a TCP proxy in
// front of the bootstrap address alone changes nothing; the local node
// therefore has a second listener, PROXIED, that advertises the proxy's
// address (deploy/stack/kafka-node.sh): a client bootstrapped through the proxy keeps
// using it. The test black-holes that proxy (every byte swallowed both
// ways: a partition between the gateway and the broker, the broker itself
// healthy), then freezes the broker (SIGSTOP keeps its sockets open and
// answers nothing). Purchases answer 503 within the publish timeout and
// give their units back; after each fault the sale goes on; every 202 has
// its row and no row exists for a purchase that was refused.
func TestBrokerNetworkFaults(t *testing.T) {
	r := &row{Fault: "6b. network gateway ↔ broker",
		Injected: "gateway's Kafka through toxiproxy on the broker's PROXIED listener: black hole (timeout toxic, both ways) for 2s; then the broker frozen with SIGSTOP for 3s (a black hole that acknowledges nothing), SIGCONT; FLASHSALE_PUBLISH_TIMEOUT=1s; crowd 100 req/s"}
	record(t, r)
	ctx := testenv.Context(t)
	px := newNetFaultAt(t, "kafka", fmt.Sprintf("127.0.0.1:%d", testenv.KafkaProxiedPort()),
		fmt.Sprintf("127.0.0.1:%d", testenv.KafkaProxiedUpstream()))
	advertised, err := brokers(ctx, px.addr)
	if err != nil {
		t.Fatalf("metadata through the proxy: %v", err)
	}
	if !slices.Equal(advertised, []string{px.addr}) {
		t.Fatalf("through the proxy %s the broker advertises %v: a client would leave the proxy after the bootstrap", px.addr, advertised)
	}
	s := harness.Start(t, harness.Options{
		Env:     baseEnv(nil),
		ProcEnv: map[string]map[string]string{"gateway": {"FLASHSALE_KAFKA_BROKERS": px.addr}},
	})
	d := dial(t)
	const qty = 500
	const publishTimeout = time.Second
	sl := openSale(t, s, qty)

	const (
		selling = 0
		cut     = 1 // black hole on the proxy
		healed  = 2
		frozen  = 3 // broker SIGSTOPped
		thawed  = 4
	)
	stop := sl.crowd(ctx, 100, 64)
	sl.waitAccepted(60, 20*time.Second)
	sl.setPhase(cut)
	px.inject("timeout", `{"timeout":0}`, "upstream", "downstream")
	time.Sleep(2 * time.Second)
	px.heal()
	sl.setPhase(healed)
	time.Sleep(2 * time.Second)
	inCut := within(cut)
	sl.checkOnly("purchases with the broker cut off", inCut, outcome.Unavailable)
	sl.checkUnavailable("broker cut off", inCut)
	if bound := outageBound(publishTimeout); sl.slowestTook(inCut) > bound {
		t.Errorf("slowest purchase with the broker cut off took %v, want at most %v: %s", sl.slowestTook(inCut), bound, sl.slowest(inCut, 5))
	}
	healedAfter, ok := sl.recovery(healed)
	if !ok {
		t.Errorf("no purchase accepted within 2s of the network healing (%s)", sl.summary(within(healed)))
	}

	thaw := freezeBroker(t)
	sl.setPhase(frozen)
	time.Sleep(3 * time.Second)
	stop()
	held, err := d.stock.Holders(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	acceptedBefore := len(sl.acceptedCopy())
	if len(held) != acceptedBefore {
		t.Errorf("with the broker frozen and nobody buying, Redis holds %d units for %d accepted orders", len(held), acceptedBefore)
	}
	thaw()
	sl.setPhase(thawed)
	sl.untilSoldOut(ctx, 100, 64, 60*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	time.Sleep(2 * time.Second) // let any late record reach PostgreSQL before the audit looks

	in := within(frozen)
	sl.checkOnly("purchases with the broker frozen", in, outcome.Unavailable)
	sl.checkUnavailable("broker frozen", in)
	if bound := outageBound(publishTimeout); sl.slowestTook(in) > bound {
		t.Errorf("slowest purchase with the broker frozen took %v, want at most %v", sl.slowestTook(in), bound)
	}
	back, ok := sl.recovery(thawed)
	if !ok {
		t.Errorf("no purchase accepted after SIGCONT (%s)", sl.summary(within(thawed)))
	}
	// A publish that timed out while its request was in flight may still
	// be written by the broker (librdkafka: "the in-flight messages may be
	// written to the topic log by the broker, even though a delivery report
	// with error ERR__MSG_TIMED_OUT will be raised"). The gateway answered
	// 503 and gave the unit back; the order must not appear anyway.
	phantom, err := d.unannounced(ctx, sl.id, accepted)
	if err != nil {
		t.Fatal(err)
	}
	if phantom > 0 {
		t.Errorf("%d orders were persisted for purchases answered 503 (their publish timed out in flight, the unit was released, the broker wrote the record after SIGCONT)", phantom)
	}
	// The gateway settles such a publish by writing the order REJECTED
	// (PUBLISH_FAILED) before it answers 503; those rows are the refusals,
	// and the rejected count below is of the others.
	var tombstones, rejected int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE reject_reason = $2), count(*) FILTER (WHERE reject_reason IS DISTINCT FROM $2)
		FROM flash_sale_order WHERE sale_id = $1 AND status = 'REJECTED'`, sl.id, audit.PublishFailed).Scan(&tombstones, &rejected); err != nil {
		t.Fatal(err)
	}
	r.Answered = fmt.Sprintf("broker advertises %v through the proxy; cut off: %s, first 202 %v after healing; broker frozen: %s, Redis then held %d units for %d accepted; after SIGCONT: %s, first 202 %v after; %d orders persisted for purchases answered 503 (%d settled REJECTED PUBLISH_FAILED by the gateway), %d shoppers told 202 then REJECTED",
		advertised, sl.summary(inCut), healedAfter.Round(time.Millisecond), sl.summary(in), len(held), acceptedBefore,
		sl.summary(func(a answer) bool { return a.phase == thawed }), back.Round(time.Millisecond), phantom, tombstones, rejected)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
