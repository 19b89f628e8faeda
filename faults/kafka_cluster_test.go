package faults

// Faults of the three-node Kafka cluster (make up CLUSTER=1: replication
// factor 3, min.insync.replicas 2, no unclean leader election; nodes are
// fenced 4 s after their last heartbeat, deploy/stack/kafka-node.sh). The services
// use the one-node Redis: these tests are about the broker.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/stackctl"
	"flashsale/tools/testenv"
)

// topicPartitions is the partition count of a test's topics (tools/harness).
const topicPartitions = 12

// hotPartition is the partition most of the sale's orders went to so far,
// and its state: the partition whose leader matters to the sale.
func hotPartition(t *testing.T, ctx context.Context, bootstrap, topic string) (int32, partitionState) {
	t.Helper()
	p, _, err := busiestPartition(ctx, bootstrap, topic, topicPartitions)
	if err != nil {
		t.Fatal(err)
	}
	st, err := describePartition(ctx, bootstrap, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	if st.leader < 1 || len(st.isr) != testenv.KafkaClusterNodes {
		t.Fatalf("partition %d of %s: leader %d, ISR %v; want a leader and all %d replicas in sync before the fault",
			p, topic, st.leader, st.isr, testenv.KafkaClusterNodes)
	}
	return p, st
}

// midSale starts a crowd of rate purchases/s, pauses it once 60 are
// accepted while it finds the sale's partition and its leader (reading the
// offsets takes a moment, during which the sale would sell out), then buys
// again until n are accepted, so a fault injected next lands mid-sale. It
// returns the partition, its state and the running crowd's stop.
func (sl *sale) midSale(ctx context.Context, bootstrap string, rate, n int) (int32, partitionState, func()) {
	sl.t.Helper()
	stop := sl.crowd(ctx, rate, 64)
	sl.waitAccepted(60, 20*time.Second)
	stop()
	part, st := hotPartition(sl.t, ctx, bootstrap, sl.s.Topic)
	stop = sl.crowd(ctx, rate, 64)
	sl.waitAccepted(n, 20*time.Second)
	return part, st, stop
}

// bystander opens sales on s until one's orders go to a partition that a
// node other than leader leads, buying five units of each to find out
// (hot is the partition the fault is about; a sale that lands there is
// passed over). It returns that sale, its partition and the partition's
// state.
func bystander(t *testing.T, ctx context.Context, s *harness.Stack, bootstrap string, hot int32, leader, quantity int) (*sale, int32, partitionState) {
	t.Helper()
	const attempts, probe = 8, 5
	for range attempts {
		sl := openSale(t, s, quantity)
		before, err := partitionOffsets(ctx, bootstrap, s.Topic, topicPartitions)
		if err != nil {
			t.Fatal(err)
		}
		sl.wave(ctx, probe, probe)
		if n := len(sl.acceptedCopy()); n != probe {
			t.Fatalf("bystander sale %d: %d of %d probing purchases accepted (%s)", sl.id, n, probe, sl.summary(nil))
		}
		after, err := partitionOffsets(ctx, bootstrap, s.Topic, topicPartitions)
		if err != nil {
			t.Fatal(err)
		}
		part := int32(-1)
		for p, n := range after {
			if n-before[p] >= probe {
				part = p
			}
		}
		if part < 0 || part == hot {
			t.Logf("bystander: sale %d (item %d) went to partition %d, the fault's", sl.id, sl.item, part)
			continue
		}
		st, err := describePartition(ctx, bootstrap, s.Topic, part)
		if err != nil {
			t.Fatal(err)
		}
		if st.leader >= 1 && st.leader != leader {
			return sl, part, st
		}
		t.Logf("bystander: sale %d (item %d) went to partition %d, which node %d leads too", sl.id, sl.item, part, st.leader)
	}
	t.Fatalf("none of %d sales went to a partition another node than %d leads", attempts, leader)
	return nil, 0, partitionState{}
}

// killKafkaNode SIGKILLs one node of the cluster; the cluster is whole again
// when the test ends, whatever happens.
func killKafkaNode(t *testing.T, id int) {
	t.Helper()
	ensureStarted(t, stackctl.KafkaCluster)
	if _, err := stackctl.KillKafkaNode(testenv.Context(t), id); err != nil {
		t.Fatal(err)
	}
}

// waitRecovery waits until a purchase sent in phase p was accepted.
func (sl *sale) waitRecovery(p int32, bound time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(bound)
	for {
		if d, ok := sl.recovery(p); ok {
			return d, true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finish sells the rest of the sale, waits until every 202 is a row and
// checks that no row exists for a refused purchase.
func (sl *sale) finish(ctx context.Context, d *deps, phase int32) {
	sl.t.Helper()
	sl.setPhase(phase)
	sl.untilSoldOut(ctx, 150, 64, 60*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(sl.t, sl.id, accepted, 60*time.Second)
	time.Sleep(2 * time.Second) // a late record of a timed-out publish reaches PostgreSQL before the audit looks
	phantom, err := d.unannounced(ctx, sl.id, accepted)
	if err != nil {
		sl.t.Fatal(err)
	}
	if phantom > 0 {
		sl.t.Errorf("%d orders were persisted for purchases answered 503", phantom)
	}
}

// The leader of the sale's partition is SIGKILLed mid-sale. The controller
// fences it once its heartbeats stop and makes an in-sync follower leader;
// librdkafka finds the new leader and the idempotent producer resumes.
// Meanwhile purchases answer 503 (their publish times out or fails fast)
// and give their units back. Every 202 is a row, nothing is written twice.
func TestKafkaLeaderKilled(t *testing.T) {
	r := &row{Fault: "7a. Kafka partition leader SIGKILLed (3 nodes)",
		Injected: "SIGKILL of the node leading the sale's partition at ~120 accepted, crowd 150 req/s; restarted after the sale resumed; RF 3, min.insync.replicas 2; FLASHSALE_PUBLISH_TIMEOUT=1s"}
	record(t, r)
	ctx := testenv.Context(t)
	bootstrap := testenv.RequireKafkaCluster(t)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil), KafkaBrokers: bootstrap})
	d := dial(t)
	sl := openSale(t, s, 1500)
	const (
		selling   = 0
		killed    = 1
		restarted = 2
		rest      = 3
	)
	part, before, stop := sl.midSale(ctx, bootstrap, 150, 120)
	killKafkaNode(t, before.leader)
	sl.setPhase(killed) // after the kill: a purchase sent before it may be acknowledged by the old leader
	pause, resumed := sl.waitRecovery(killed, 40*time.Second)
	time.Sleep(2 * time.Second) // sell on two nodes for a while
	after, err := describePartition(ctx, bootstrap, s.Topic, part)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if !resumed {
		t.Errorf("no purchase accepted within 40s of the leader's death (%s)", sl.summary(within(killed)))
	}
	if after.leader == before.leader || after.leader < 1 {
		t.Errorf("partition %d: leader %d after node %d died, want another node", part, after.leader, before.leader)
	}
	if slices.Contains(after.isr, before.leader) {
		t.Errorf("partition %d: ISR %v still holds the dead node %d", part, after.isr, before.leader)
	}
	sl.checkOnly("answers with the leader dead", within(killed), outcome.Accepted, outcome.Unavailable)
	sl.checkUnavailable("leader dead", within(killed))
	startServer(t, stackctl.KafkaCluster)
	sl.setPhase(restarted)
	sl.finish(ctx, d, rest)

	unavailable := sl.count(func(a answer) bool { return a.phase == killed && a.kind == outcome.Unavailable })
	r.Answered = fmt.Sprintf("partition %d: leader %d killed, new leader %d with ISR %v; with the leader dead: %s; first 202 %v after the kill (%d purchases answered 503 meanwhile); after the restart: %s",
		part, before.leader, after.leader, after.isr, sl.summary(within(killed)), pause.Round(time.Millisecond), unavailable,
		sl.summary(func(a answer) bool { return a.phase >= restarted }))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// proxiedCluster puts a toxiproxy in front of each node's PROXIED listener
// and checks that a client bootstrapped through them is told only of
// proxies. It returns the proxies by node id and the bootstrap list for
// the gateway.
func proxiedCluster(t *testing.T, ctx context.Context) (map[int]*netFault, string) {
	t.Helper()
	proxies := map[int]*netFault{}
	var proxied []string
	for id := 1; id <= testenv.KafkaClusterNodes; id++ {
		px := newNetFaultAt(t, fmt.Sprintf("kafka-%d", id), fmt.Sprintf("127.0.0.1:%d", testenv.KafkaClusterProxiedPort(id)),
			fmt.Sprintf("127.0.0.1:%d", testenv.KafkaClusterProxiedUpstream(id)))
		proxies[id] = px
		proxied = append(proxied, px.addr)
	}
	advertised, err := brokers(ctx, strings.Join(proxied, ","))
	if err != nil {
		t.Fatalf("metadata through the proxies: %v", err)
	}
	sort.Strings(advertised)
	if !slices.Equal(advertised, proxied) {
		t.Fatalf("through the proxies the cluster advertises %v, want %v", advertised, proxied)
	}
	return proxies, strings.Join(proxied, ",")
}

// Each node advertises a PROXIED listener at a port where the test puts a
// toxiproxy (deploy/stack/kafka-node.sh); the gateway bootstraps through the three
// proxies, so every byte between it and each broker crosses one. First the
// partition's leader is cut off from the gateway (a black hole both ways:
// the broker itself healthy, still leader): purchases answer 503 within the
// publish timeout and the sale resumes when the network heals. Then a
// follower is cut off: the producer only talks to leaders, so nothing
// changes. Then that follower dies: once the controller fences it the
// leader acknowledges with the two replicas left, which is what
// min.insync.replicas=2 allows, and the sale goes on. All along a second
// sale, whose partition another node leads, keeps selling: the gateway
// fails fast per partition, so the cut-off leader's failures stop only
// the sales on its partitions.
func TestKafkaBrokerCutOff(t *testing.T) {
	r := &row{Fault: "7b. Kafka broker cut off from the gateway (toxiproxy, 3 nodes)",
		Injected: "gateway's Kafka through a toxiproxy per broker (PROXIED listeners); black hole (timeout toxic, both ways) on the leader's proxy for 3s, 2s healed; the same on a follower's proxy for 3s; then that follower SIGKILLed for 8s; crowd 100 req/s; a second sale on a partition another node leads, 40 req/s, until the leader has healed; FLASHSALE_PUBLISH_TIMEOUT=1s"}
	record(t, r)
	ctx := testenv.Context(t)
	bootstrap := testenv.RequireKafkaCluster(t)
	proxies, proxied := proxiedCluster(t, ctx)
	// Keyed by item whatever the environment says: the test is about the
	// sales on a cut-off leader's partitions (TestKafkaBrokerCutOffSpread
	// is the spread one).
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{"FLASHSALE_PUBLISH_SPREAD": "false"}), KafkaBrokers: bootstrap,
		ProcEnv: map[string]map[string]string{"gateway": {"FLASHSALE_KAFKA_BROKERS": proxied}}})
	d := dial(t)
	const publishTimeout = time.Second
	sl := openSale(t, s, 2500)
	const (
		selling        = 0
		leaderCut      = 1
		leaderHealed   = 2
		followerCut    = 3
		followerHealed = 4
		followerDead   = 5
		restarted      = 6
		rest           = 7
	)
	part, st, stop := sl.midSale(ctx, bootstrap, 100, 80)
	defer func() { stop() }()
	// The crowd pauses while the bystander is found, so the sale keeps
	// enough stock for every phase.
	stop()
	by, byPart, bySt := bystander(t, ctx, s, bootstrap, part, st.leader, 1000)
	stop = sl.crowd(ctx, 100, 64)
	stopBy := by.crowd(ctx, 40, 16)
	defer func() { stopBy() }()
	phase := func(p int32) {
		sl.setPhase(p)
		by.setPhase(p)
	}
	follower := st.isr[0]
	if follower == st.leader {
		follower = st.isr[1]
	}

	phase(leaderCut)
	proxies[st.leader].inject("timeout", `{"timeout":0}`, "upstream", "downstream")
	time.Sleep(3 * time.Second)
	proxies[st.leader].heal()
	phase(leaderHealed)
	leaderBack, leaderOK := sl.waitRecovery(leaderHealed, 5*time.Second)
	time.Sleep(time.Second)
	// The follower about to be cut off and killed may lead the bystander's
	// partition: its part ends here.
	stopBy()
	stopBy = func() {}

	phase(followerCut)
	proxies[follower].inject("timeout", `{"timeout":0}`, "upstream", "downstream")
	time.Sleep(3 * time.Second)
	proxies[follower].heal()
	phase(followerHealed)
	time.Sleep(time.Second)

	killKafkaNode(t, follower)
	phase(followerDead)
	deadPause, deadOK := sl.waitRecovery(followerDead, 20*time.Second)
	time.Sleep(8*time.Second - deadPause)
	shrunk, err := describePartition(ctx, bootstrap, s.Topic, part)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop = func() {}

	inCut := within(leaderCut)
	sl.checkOnly("leader cut off", inCut, outcome.Unavailable)
	sl.checkUnavailable("leader cut off", inCut)
	if bound := outageBound(publishTimeout); sl.slowestTook(inCut) > bound {
		t.Errorf("slowest purchase with the leader cut off took %v, want at most %v: %s", sl.slowestTook(inCut), bound, sl.slowest(inCut, 5))
	}
	if !leaderOK {
		t.Errorf("no purchase accepted within 5s of the leader's network healing (%s)", sl.summary(within(leaderHealed)))
	}
	sl.checkOnly("follower cut off", within(followerCut), outcome.Accepted)
	byWhat := fmt.Sprintf("sale %d on partition %d (leader %d) while node %d, leading partition %d, was cut off", by.id, byPart, bySt.leader, st.leader, part)
	by.checkOnly(byWhat, inCut, outcome.Accepted)
	if by.count(inCut) == 0 {
		t.Errorf("%s: no purchase sent", byWhat)
	}
	if !deadOK {
		t.Errorf("no purchase accepted within 20s of the follower's death (%s)", sl.summary(within(followerDead)))
	}
	if shrunk.leader != st.leader || len(shrunk.isr) != 2 || slices.Contains(shrunk.isr, follower) {
		t.Errorf("partition %d with follower %d dead: leader %d ISR %v, want leader %d and the two live replicas", part, follower, shrunk.leader, shrunk.isr, st.leader)
	}
	acceptedOnTwo := sl.count(func(a answer) bool { return a.phase == followerDead && a.kind == outcome.Accepted })
	startServer(t, stackctl.KafkaCluster)
	sl.setPhase(restarted)
	sl.finish(ctx, d, rest)
	by.finish(ctx, d, rest)

	r.Answered = fmt.Sprintf("partition %d, leader %d, follower %d; leader cut off: %s, first 202 %v after healing, meanwhile a sale on partition %d (leader %d): %s; follower cut off: %s; follower dead: %s, first 202 %v after the kill, ISR then %v, %d accepted on two replicas",
		part, st.leader, follower, sl.summary(inCut), leaderBack.Round(time.Millisecond), byPart, bySt.leader, by.summary(inCut),
		sl.summary(within(followerCut)), sl.summary(within(followerDead)), deadPause.Round(time.Millisecond), shrunk.isr, acceptedOnTwo)
	r.Audit = "no reconcile; audit " + sl.audit(d) + "; the other sale's " + by.audit(d)
}

// With FLASHSALE_PUBLISH_SPREAD the sale's orders go to every partition in
// turn. One node is cut off from the gateway (a black hole both ways, the
// broker itself healthy and still leading its partitions): the orders in
// flight to its partitions time out, their breakers open, and the
// spreader passes over them, so the sale goes on selling on the two other
// leaders' partitions. Keyed by item (the default) the same cut stops the
// sale whose partition the node leads (TestKafkaBrokerCutOff).
func TestKafkaBrokerCutOffSpread(t *testing.T) {
	r := &row{Fault: "7d. Kafka broker cut off, orders spread over every partition (toxiproxy, 3 nodes)",
		Injected: "FLASHSALE_PUBLISH_SPREAD=true; gateway's Kafka through a toxiproxy per broker; black hole (timeout toxic, both ways) on the proxy of partition 0's leader for 5s; crowd 100 req/s; FLASHSALE_PUBLISH_TIMEOUT=1s, fail fast after 5 failed deliveries to a partition for 1s"}
	record(t, r)
	ctx := testenv.Context(t)
	bootstrap := testenv.RequireKafkaCluster(t)
	proxies, proxied := proxiedCluster(t, ctx)
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{"FLASHSALE_PUBLISH_SPREAD": "true"}), KafkaBrokers: bootstrap,
		ProcEnv: map[string]map[string]string{"gateway": {"FLASHSALE_KAFKA_BROKERS": proxied}}})
	d := dial(t)
	const publishTimeout = time.Second
	sl := openSale(t, s, 2000)
	const (
		selling = 0
		cut     = 1
		healed  = 2
		rest    = 3
	)
	stop := sl.crowd(ctx, 100, 64)
	defer func() { stop() }()
	sl.waitAccepted(100, 20*time.Second)
	// The spreader stays 100 ms on a partition: within a few seconds the
	// sale's orders are on every one.
	spread := map[int32]int64{}
	for deadline := time.Now().Add(15 * time.Second); len(spread) < topicPartitions && time.Now().Before(deadline); {
		counts, err := partitionOffsets(ctx, bootstrap, s.Topic, topicPartitions)
		if err != nil {
			t.Fatal(err)
		}
		for p, n := range counts {
			if n > 0 {
				spread[p] = n
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(spread) != topicPartitions {
		t.Errorf("15 s into the sale its orders were on %d partitions (%v), want all %d", len(spread), spread, topicPartitions)
	}
	st, err := describePartition(ctx, bootstrap, s.Topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	accBefore := len(sl.acceptedCopy())

	sl.setPhase(cut)
	proxies[st.leader].inject("timeout", `{"timeout":0}`, "upstream", "downstream")
	time.Sleep(5 * time.Second)
	proxies[st.leader].heal()
	sl.setPhase(healed)
	time.Sleep(time.Second)
	stop()
	stop = func() {}

	inCut := within(cut)
	sl.checkOnly("node cut off", inCut, outcome.Accepted, outcome.Unavailable)
	sl.checkUnavailable("node cut off", inCut)
	// Once the cut-off leader's partitions have failed their deliveries,
	// the orders go to the others: only the breakers' trials still meet the
	// black hole. A failure is reported a publish timeout (and up to ~0.35 s
	// more) after its order was sent, and the spreader comes back to a
	// partition 1.2 s after it left it (12 partitions, 100 ms each), so a
	// dead partition may take a second visit's orders before its breaker
	// opens: by 2.5 s every dead partition has had its five failures.
	settled := 2*publishTimeout + publishTimeout/2
	late := func(a answer) bool { return inCut(a) && a.sent.Sub(sl.phaseAt(cut)) > settled }
	lateAll, lateAccepted := sl.count(late), sl.count(func(a answer) bool { return late(a) && a.kind == outcome.Accepted })
	if lateAll == 0 {
		t.Errorf("no purchase was sent later than %v into the cut", settled)
	} else if lateAccepted*10 < lateAll*9 {
		t.Errorf("purchases sent %v or more into the cut: %d of %d accepted, want at least 90 %%: the spreader kept sending to the cut-off leader (%s)",
			settled, lateAccepted, lateAll, sl.summary(late))
	}
	sl.finish(ctx, d, rest)

	r.Answered = fmt.Sprintf("orders on %d partitions before the cut (%d accepted); node %d (partition 0's leader) cut off: %s; sent %v or more into the cut: %s; after healing: %s",
		len(spread), accBefore, st.leader, sl.summary(inCut), settled, sl.summary(late), sl.summary(within(healed)))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// Two of the three nodes die: the controller quorum is lost (one voter of
// three) and no acks=all write can be acknowledged. After the first
// deliveries time out the gateway fails fast (503 at once, the unit given
// back, flashsale_gateway_publish_failing_fast 1) instead of holding every
// shopper for the publish timeout. When one node comes back the quorum and
// two in-sync replicas are there again and the sale resumes.
func TestKafkaTwoBrokersDown(t *testing.T) {
	r := &row{Fault: "7c. two of three Kafka nodes SIGKILLed",
		Injected: "SIGKILL of the sale partition's two followers at ~120 accepted, 5s down, one restarted, then the other; crowd 150 req/s; FLASHSALE_PUBLISH_TIMEOUT=1s, fail fast after 5 failed deliveries for 1s"}
	record(t, r)
	ctx := testenv.Context(t)
	bootstrap := testenv.RequireKafkaCluster(t)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil), KafkaBrokers: bootstrap})
	d := dial(t)
	const publishTimeout = time.Second
	sl := openSale(t, s, 1500)
	const (
		selling = 0
		down    = 1
		oneBack = 2
		allBack = 3
		rest    = 4
	)
	_, st, stop := sl.midSale(ctx, bootstrap, 150, 120)
	var followers []int
	for _, id := range st.isr {
		if id != st.leader {
			followers = append(followers, id)
		}
	}
	for _, id := range followers {
		killKafkaNode(t, id)
	}
	sl.setPhase(down)
	time.Sleep(3 * time.Second)
	failingFast, err := metric(ctx, s.GatewayAdminURL+"/metrics", "flashsale_gateway_publish_failing_fast")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	sl.setPhase(oneBack)
	if err := stackctl.StartKafkaNode(ctx, followers[0]); err != nil {
		t.Fatal(err)
	}
	back, ok := sl.waitRecovery(oneBack, 60*time.Second)
	stop()

	in := within(down)
	sl.checkOnly("two nodes down", in, outcome.Unavailable)
	sl.checkUnavailable("two nodes down", in)
	if failingFast < 1 {
		t.Errorf("3s into the outage flashsale_gateway_publish_failing_fast = %v, want at least 1 (the sale's partition)", failingFast)
	}
	// Once the first deliveries failed, refusals come at once: the answers
	// sent after twice the publish timeout did not wait for it.
	var late []time.Duration
	for _, a := range sl.where(func(a answer) bool { return in(a) && a.sent.Sub(sl.phaseAt(down)) > 2*publishTimeout }) {
		late = append(late, a.took)
	}
	slices.Sort(late)
	if len(late) == 0 {
		t.Errorf("no purchase was sent later than %v into the outage", 2*publishTimeout)
	} else if median := late[len(late)/2]; median >= publishTimeout/2 {
		t.Errorf("purchases sent %v into the outage took %v (median) to be refused: the gateway waited out the publish timeout instead of failing fast", 2*publishTimeout, median)
	}
	if !ok {
		t.Errorf("no purchase accepted within 60s of one node coming back (%s)", sl.summary(within(oneBack)))
	}
	startServer(t, stackctl.KafkaCluster)
	sl.setPhase(allBack)
	sl.finish(ctx, d, rest)

	median := time.Duration(0)
	if len(late) > 0 {
		median = late[len(late)/2]
	}
	r.Answered = fmt.Sprintf("nodes %v killed (leader %d kept): %s, failing fast %v, median refusal after the first %v: %v; one node back: first 202 %v after its start (%s); after all back: %s",
		followers, st.leader, sl.summary(in), failingFast >= 1, 2*publishTimeout, median.Round(time.Millisecond), back.Round(time.Millisecond),
		sl.summary(within(oneBack)), sl.summary(func(a answer) bool { return a.phase >= allBack }))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
