package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
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

// toxic is one fault a netFault injects: toxiproxy's toxic type, its JSON
// attributes and the streams it acts on.
type toxic struct {
	name, kind string
	streams    []string
	attrs      string
}

// answerFaults are the faults of a service's link to a server that runs
// what it is sent: answers delayed by latencyMS, a black hole both ways,
// and answers lost (reset_peer on the server's side of the stream: the
// server ran the request, the service never hears so).
func answerFaults(latencyMS int) []toxic {
	return []toxic{
		{"latency", "latency", []string{"downstream"}, fmt.Sprintf(`{"latency":%d}`, latencyMS)},
		{"black hole", "timeout", []string{"upstream", "downstream"}, `{"timeout":0}`},
		{"answers lost", "reset_peer", []string{"downstream"}, `{"timeout":0}`},
	}
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

	faults := []toxic{
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
		// Reserve and release, a Redis timeout each, and a third: once in
		// CI (2026-12-05 07:13, not seen in 25 runs before or 7 after),
		// five purchases sent within 40 ms of each other 1.5 s into the
		// black hole all answered at one instant, 1.47-1.51 s later. The
		// client then had a connection to find dead and redial, and a
		// command that meets a dial under way waits for it (rueidis
		// singleconnect, bounded by the dialling command's deadline).
		if bound := 3*redisTimeout + 500*time.Millisecond; slowest > bound {
			t.Errorf("%s: slowest purchase took %v, want at most %v (reserve and release, %v each, and a redial): %s", f.name, slowest, bound, redisTimeout, sl.slowest(in, 5))
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

// Network faults between the order service and PostgreSQL, through
// toxiproxy: answers delayed past every timeout, a black hole, and answers
// lost (reset_peer on the server's side of the stream: PostgreSQL runs a
// statement, commits it, and the service never hears so). The gateway
// keeps selling (it needs Redis and the broker, not the database); the
// consumer retries its batch until it commits, and a batch committed
// unheard comes back as duplicates; polls and cancels answer 503. A cancel
// answered 503 may have committed: it is then CANCELLED with its outbox
// row, and the relay gives its unit back once the link heals. Every 202
// ends with one row, nothing is dead-lettered, the audit is clean.
func TestOrderServicePostgresNetworkFaults(t *testing.T) {
	r := &row{Fault: "6c. network order service ↔ PostgreSQL (toxiproxy)",
		Injected: "order service's PostgreSQL through an in-process toxiproxy; 2.5s each: latency 3000ms on answers, black hole (timeout toxic, both ways), reset_peer on answers (statements run, answers lost); 1.5s clean between; crowd 20 req/s; in each fault 4 cancels at once on connections warmed by 8 cancels just before, and 2 polls through the gateway"}
	record(t, r)
	ctx := testenv.Context(t)
	px := newNetFault(t, "postgres", testenv.PostgresAddr())
	dsn, err := url.Parse(testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	dsn.Host = px.addr
	s := harness.Start(t, harness.Options{
		Env:     baseEnv(nil),
		ProcEnv: map[string]map[string]string{"ordersvc": {"FLASHSALE_PG_DSN": dsn.String()}},
	})
	d := dial(t)
	const qty = 800
	sl := openSale(t, s, qty)
	stop := sl.crowd(ctx, 100, 64)
	sl.waitAccepted(120, 20*time.Second)
	stop()
	persisted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, persisted, 30*time.Second)
	// Orders persisted before the faults, as order id and user: the first
	// ten are polled, the rest cancelled.
	before := make([][2]string, 0, len(persisted))
	for o, u := range persisted {
		before = append(before, [2]string{o, u})
	}
	toCancel := before[10:]

	faults := answerFaults(3000) // past the 2 s query timeout
	type cancelled struct {
		fault, order, user string
		code               int
		took               time.Duration
	}
	var cancels []cancelled
	var parts []string
	for i, f := range faults {
		faultPhase, cleanPhase := int32(2*i+1), int32(2*i+2)
		// Cancel on the pool's connections just before the fault. pgxpool
		// pings a connection idle for over a second before handing it out,
		// and pgx prepares a statement on a connection's first use of it:
		// either round trip lost to the fault would keep the cancels below
		// from ever reaching PostgreSQL. With the connections warm, those
		// are sent, run and committed, and only their answers meet the
		// fault.
		var wg sync.WaitGroup
		for _, o := range toCancel[:8] {
			wg.Go(func() {
				if code, body, err := cancelOrder(ctx, t, s, o); err != nil || code != http.StatusOK {
					t.Errorf("cancel before the %s: %d %s %v", f.name, code, body, err)
				}
			})
		}
		wg.Wait()
		toCancel = toCancel[8:]
		px.inject(f.kind, f.attrs, f.streams...)
		began := time.Now()
		sl.setPhase(faultPhase)
		stop = sl.crowd(ctx, 20, 64)
		var mu sync.Mutex
		var pollCodes []string
		for _, o := range toCancel[:4] {
			wg.Go(func() {
				start := time.Now()
				code, body, err := cancelOrder(ctx, t, s, o)
				c := cancelled{fault: f.name, order: o[0], user: o[1], code: code, took: time.Since(start)}
				if err != nil || (code != http.StatusServiceUnavailable && code != http.StatusOK) {
					t.Errorf("%s: cancel of %s: %d %s %v, want 503 (or 200 before the fault took hold)", f.name, o[0], code, body, err)
				}
				if c.took > 4*time.Second {
					t.Errorf("%s: cancel took %v", f.name, c.took)
				}
				mu.Lock()
				cancels = append(cancels, c)
				mu.Unlock()
			})
		}
		toCancel = toCancel[4:]
		time.Sleep(200 * time.Millisecond)
		for _, o := range before[8:10] {
			wg.Go(func() {
				start := time.Now()
				code, status, err := poll(ctx, s, o[0], token(t, o[1]))
				took := time.Since(start)
				mu.Lock()
				pollCodes = append(pollCodes, fmt.Sprintf("%d in %v", code, took.Round(10*time.Millisecond)))
				mu.Unlock()
				if err != nil || code != http.StatusServiceUnavailable || took > 4*time.Second {
					t.Errorf("%s: poll of %s: %d %s %v after %v, want 503 within 4s", f.name, o[0], code, status, err, took)
				}
			})
		}
		wg.Wait()
		time.Sleep(time.Until(began.Add(2500 * time.Millisecond)))
		stop()
		px.heal()
		sl.setPhase(cleanPhase)
		stop = sl.crowd(ctx, 20, 64)
		time.Sleep(1500 * time.Millisecond)
		stop()
		sl.checkOnly(f.name+": purchases", within(faultPhase), outcome.Accepted)
		parts = append(parts, fmt.Sprintf("%s: purchases %s, polls %s", f.name, sl.summary(within(faultPhase)), strings.Join(pollCodes, ", ")))
	}

	sl.setPhase(100)
	sl.untilSoldOut(ctx, 150, 64, 60*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	// A cancel answered 503 ended the order or left it PENDING, and one
	// that ended it queued its unit: the relay returns it once the link
	// is back, without an operator.
	var unheard, refused int
	var unheardIDs []string
	for _, c := range cancels {
		var status string
		if err := d.pool.QueryRow(ctx, `SELECT status FROM flash_sale_order WHERE id = $1`, c.order).Scan(&status); err != nil {
			t.Fatal(err)
		}
		switch {
		case c.code == http.StatusOK && status != "CANCELLED":
			t.Errorf("%s: cancel of %s answered 200, order %s", c.fault, c.order, status)
		case c.code != http.StatusOK && status == "CANCELLED":
			unheard++
			unheardIDs = append(unheardIDs, c.order)
		case c.code != http.StatusOK && status != "PENDING":
			t.Errorf("%s: cancel of %s answered %d, order %s, want PENDING or CANCELLED", c.fault, c.order, c.code, status)
		case c.code != http.StatusOK:
			refused++
		}
	}
	if unheard == 0 {
		t.Errorf("no cancel during the faults committed unheard: the case this test is for did not happen")
	}
	// Their units come back without anyone asking again: the relay drains
	// the outbox rows their commits wrote.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var pending int
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE order_id = ANY($1::uuid[]) AND released_at IS NULL`, unheardIDs).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d units of cancels committed unheard still queued 15s after the link healed", pending)
		}
	}
	// The shopper told 503 tries again: the cancel that committed unheard
	// answers as the repeat it is, the refused one cancels now.
	for _, c := range cancels {
		if c.code == http.StatusOK {
			continue
		}
		code, body, err := cancelOrder(ctx, t, s, [2]string{c.order, c.user})
		if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"CANCELLED"`) {
			t.Errorf("cancel of %s again after the %s: %d %s %v, want 200 CANCELLED", c.order, c.fault, code, body, err)
		}
	}
	d.waitReleased(t, sl.id, 15*time.Second)
	// Units given back went on sale again: sell them.
	sl.setPhase(101)
	sl.untilSoldOut(ctx, 150, 64, 30*time.Second)
	accepted = sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	dead, err := readTopic(ctx, s.Env["FLASHSALE_DLQ_TOPIC"])
	if err != nil {
		t.Fatalf("read the dead-letter topic: %v", err)
	}
	if len(dead) != 0 {
		t.Errorf("%d messages dead-lettered during the network faults, want none", len(dead))
	}
	r.Answered = strings.Join(parts, "; ") + fmt.Sprintf("; %d cancels during the faults: %d answered 200, %d refused and PENDING, %d answered 503 and CANCELLED (committed unheard; unit back by the relay); each 503 cancelled again: 200 CANCELLED; %d accepted in all, dead letters %d",
		len(cancels), len(cancels)-unheard-refused, refused, unheard, len(accepted), len(dead))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// cancelOrder sends the shopper's cancel of an order (order id, user) to
// the order service's public listener.
func cancelOrder(ctx context.Context, t *testing.T, s *harness.Stack, o [2]string) (int, []byte, error) {
	code, body, _, err := harness.Do(ctx, "POST", s.OrdersURL+"/api/flash-sales/orders/"+o[0]+"/cancel", token(t, o[1]), nil)
	return code, body, err
}

// waitReleased waits until no outbox row of the sale is pending: every
// unit its ended orders queued is back in Redis.
func (d *deps) waitReleased(t *testing.T, saleID int64, bound time.Duration) {
	t.Helper()
	ctx := testenv.Context(t)
	deadline := time.Now().Add(bound)
	for {
		var pending int
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, saleID).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sale %d: %d units of ended orders still queued after %v", saleID, pending, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Network faults between the order service and Redis, through toxiproxy:
// answers delayed past the Redis timeout, a black hole, and answers reset
// (Redis runs the release, the service never hears). The order service
// needs Redis only to give units back: a cancel commits in PostgreSQL and
// answers 200 by its 2 s deadline at the latest, its release left to go
// on in the background or queued in the outbox; the gateway, with a Redis
// link of its own, keeps selling. Once the link heals the relay gives every queued unit back, a release
// that ran unheard is found done (not_held), and no unit comes back
// twice: the audit's stock count would show it.
func TestOrderServiceRedisNetworkFaults(t *testing.T) {
	r := &row{Fault: "6d. network order service ↔ Redis (toxiproxy)",
		Injected: "order service's Redis through an in-process toxiproxy; FLASHSALE_REDIS_TIMEOUT=500ms; 2.5s each: latency 1500ms on answers, black hole (timeout toxic, both ways), reset_peer on answers (commands run, answers lost); 1.5s clean between; crowd 20 req/s; 4 cancels at once in each fault"}
	record(t, r)
	ctx := testenv.Context(t)
	px := newNetFault(t, "ordersvc-redis", testenv.RedisAddr())
	s := harness.Start(t, harness.Options{
		Env:     baseEnv(nil),
		ProcEnv: map[string]map[string]string{"ordersvc": {"FLASHSALE_REDIS_ADDR": px.addr}},
	})
	d := dial(t)
	const qty = 600
	sl := openSale(t, s, qty)
	stop := sl.crowd(ctx, 100, 64)
	sl.waitAccepted(60, 20*time.Second)
	stop()
	persisted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, persisted, 30*time.Second)
	var toCancel [][2]string // order id, user
	for o, u := range persisted {
		toCancel = append(toCancel, [2]string{o, u})
	}

	faults := answerFaults(1500)
	var cancelled []string
	var parts []string
	for i, f := range faults {
		faultPhase, cleanPhase := int32(2*i+1), int32(2*i+2)
		px.inject(f.kind, f.attrs, f.streams...)
		began := time.Now()
		sl.setPhase(faultPhase)
		stop = sl.crowd(ctx, 20, 64)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var slowest time.Duration
		for _, o := range toCancel[:4] {
			cancelled = append(cancelled, o[0])
			wg.Go(func() {
				start := time.Now()
				code, body, err := cancelOrder(ctx, t, s, o)
				took := time.Since(start)
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
				if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"CANCELLED"`) {
					t.Errorf("%s: cancel of %s: %d %s %v, want 200 CANCELLED: the commit needs PostgreSQL only", f.name, o[0], code, body, err)
				}
			})
		}
		toCancel = toCancel[4:]
		wg.Wait()
		if slowest > 2500*time.Millisecond {
			t.Errorf("%s: the slowest cancel took %v, want at most the order service's 2s request deadline (its release then goes on in the background) and a little more", f.name, slowest)
		}
		time.Sleep(time.Until(began.Add(2500 * time.Millisecond)))
		stop()
		px.heal()
		sl.setPhase(cleanPhase)
		stop = sl.crowd(ctx, 20, 64)
		time.Sleep(1500 * time.Millisecond)
		stop()
		sl.checkOnly(f.name+": purchases", within(faultPhase), outcome.Accepted)
		parts = append(parts, fmt.Sprintf("%s: purchases %s, slowest cancel %v", f.name, sl.summary(within(faultPhase)), slowest.Round(10*time.Millisecond)))
	}

	d.waitReleased(t, sl.id, 15*time.Second)
	outcomes := map[string]int{}
	rows, err := d.pool.Query(ctx, `SELECT outcome FROM stock_release WHERE order_id = ANY($1::uuid[])`, cancelled)
	if err != nil {
		t.Fatal(err)
	}
	var o string
	if _, err := pgx.ForEachRow(rows, []any{&o}, func() error { outcomes[o]++; return nil }); err != nil {
		t.Fatal(err)
	}
	held, err := d.stock.Holders(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range cancelled {
		for u, h := range held {
			if h == id {
				t.Errorf("cancelled order %s still holds %s's unit in Redis", id, u)
			}
		}
	}
	sl.setPhase(100)
	sl.untilSoldOut(ctx, 150, 64, 30*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	r.Answered = strings.Join(parts, "; ") + fmt.Sprintf("; %d cancels answered 200 CANCELLED; their outbox rows: %v (not_held: the release ran in Redis unheard, and the next pass found the unit back); %d accepted in all",
		len(cancelled), outcomes, len(accepted))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
