package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/stackctl"
	"flashsale/tools/testenv"
)

// PostgreSQL stopped and started in the middle of a sale: the gateway keeps
// selling (it needs Redis and the broker, not the database), the consumer
// backs off and resumes, nothing is dead-lettered because of the outage,
// and polling answers 503 while the database is away.
func TestPostgresStoppedMidSale(t *testing.T) {
	r := &row{Fault: "4. PostgreSQL stopped mid-sale",
		Injected: "deploy/stack/postgres.sh stop (pg_ctl -m fast) at ~1/4 sold, crowd 150 req/s then 40 req/s; 4s outage; polls of a persisted and of an unpersisted order; start postgres"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil)})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 400
	sl := openSale(t, s, qty)

	const (
		selling = 0
		down    = 1
		back    = 2
	)
	stop := sl.crowd(ctx, 150, 64)
	sl.waitAccepted(qty/4, 20*time.Second)
	stop()
	before := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, before, 30*time.Second)
	var oldOrder, oldUser string
	for oldOrder, oldUser = range before {
		break
	}

	retriesBefore, err := metric(ctx, s.AdminURL+"/metrics", "flashsale_ordersvc_batch_retries_total")
	if err != nil {
		t.Fatal(err)
	}
	stopServer(t, stackctl.Postgres)
	outage := time.Now()
	sl.setPhase(down)
	stop = sl.crowd(ctx, 40, 64) // slower: the sale must outlast the outage
	time.Sleep(time.Second)
	var newOrder, newUser string
	for o, u := range sl.acceptedCopy() {
		if _, old := before[o]; !old {
			newOrder, newUser = o, u
			break
		}
	}
	type pollResult struct {
		code   int
		status string
		took   time.Duration
	}
	var polls []pollResult
	for _, o := range [][2]string{{oldOrder, oldUser}, {newOrder, newUser}} {
		if o[0] == "" {
			t.Errorf("no order accepted during the outage to poll")
			continue
		}
		start := time.Now()
		code, status, err := poll(ctx, s, o[0], token(t, o[1]))
		p := pollResult{code, status, time.Since(start)}
		polls = append(polls, p)
		if err != nil || code != 503 {
			t.Errorf("poll of order %s with PostgreSQL down: %d %s %v, want 503", o[0], code, status, err)
		}
		if p.took > 4*time.Second {
			t.Errorf("poll with PostgreSQL down took %v", p.took)
		}
	}
	time.Sleep(3 * time.Second)
	stop()
	startServer(t, stackctl.Postgres)
	outageLasted := time.Since(outage)
	sl.setPhase(back)
	sl.untilSoldOut(ctx, 150, 64, 30*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)

	code, status, err := poll(ctx, s, newOrder, token(t, newUser))
	if err != nil || code != 200 || status != "PENDING" {
		t.Errorf("poll after the outage: %d %s %v, want 200 PENDING", code, status, err)
	}
	dead, err := readTopic(ctx, s.Env["FLASHSALE_DLQ_TOPIC"])
	if err != nil {
		t.Fatalf("read the dead-letter topic: %v", err)
	}
	if len(dead) != 0 {
		t.Errorf("%d messages dead-lettered during a PostgreSQL outage, want none", len(dead))
	}
	sl.checkOnly("purchases during the outage", within(down), outcome.Accepted)
	retries, err := metric(ctx, s.AdminURL+"/metrics", "flashsale_ordersvc_batch_retries_total")
	if err != nil {
		t.Fatal(err)
	}
	retries -= retriesBefore
	// Exponential backoff from 100ms to 2s: a handful of attempts per
	// outage, not one per poll loop.
	if retries == 0 || retries > outageLasted.Seconds()*2+6 {
		t.Errorf("%v batch retries during a %v outage, want a backed-off handful", retries, outageLasted.Round(100*time.Millisecond))
	}
	var pollText []string
	for _, p := range polls {
		pollText = append(pollText, fmt.Sprintf("%d %s in %v", p.code, p.status, p.took.Round(10*time.Millisecond)))
	}
	r.Answered = fmt.Sprintf("before: %s; purchases during the %v outage: %s; polls (persisted order, order accepted during the outage): %s; consumer batch retries: %v (backoff 100ms..2s); after: %s; poll after: %d %s; dead letters: %d",
		sl.summary(within(selling)), outageLasted.Round(100*time.Millisecond), sl.summary(within(down)), strings.Join(pollText, ", "), retries, sl.summary(within(back)), code, status, len(dead))
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
