package faults

import (
	"fmt"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/testenv"
)

// The repair step run while purchases are between their reservation and
// the broker's acknowledgement. Such a purchase holds a unit in Redis, has
// no row yet, and has no accepted-order record yet (the gateway writes it
// after the ack): reconcile must not take it for a leaked reservation and
// give its unit back, or the unit is sold twice in Redis and one of the two
// shoppers told 202 ends REJECTED. The broker is slowed (frozen for less
// than the publish timeout) so that many purchases sit in that window.
func TestReconcileDuringSlowPublish(t *testing.T) {
	r := &row{Fault: "7. reconcile during slow publishes",
		Injected: "broker frozen (SIGSTOP) for 1.5s, under the 3s publish timeout, crowd 100 req/s; reconcile?repair=true 0.7s into the freeze; SIGCONT; sale sold out; no second reconcile"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "3s"})})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 300
	sl := openSale(t, s, qty)

	const (
		selling = 0
		slow    = 1
		after   = 2
	)
	stop := sl.crowd(ctx, 100, 64)
	sl.waitAccepted(50, 20*time.Second)
	thaw := freezeBroker(t)
	sl.setPhase(slow)
	time.Sleep(700 * time.Millisecond)
	rec := sl.reconcile(ctx)
	time.Sleep(800 * time.Millisecond)
	thaw()
	stop()
	sl.setPhase(after)
	sl.untilSoldOut(ctx, 100, 64, 15*time.Second)
	accepted := sl.acceptedCopy()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	time.Sleep(time.Second) // let the relay return the units of any REJECTED order

	sl.checkOnly("purchases during the slow publishes", func(a answer) bool { return a.phase == slow }, outcome.Accepted)
	_, active, rejected, err := d.rows(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Leaked > 0 {
		t.Errorf("reconcile took %d reservations whose publish was still waiting for the broker for leaked, and gave their units back", rec.Leaked)
	}
	if rejected > 0 {
		t.Errorf("%d shoppers were told 202 and their order then ended REJECTED", rejected)
	}
	r.Answered = fmt.Sprintf("before: %s; during the slow publishes: %s; reconcile in the middle: %s; after: %s; %d accepted, %d active rows, %d REJECTED",
		sl.summary(within(selling)), sl.summary(func(a answer) bool { return a.phase == slow }), rec,
		sl.summary(within(after)), len(accepted), active, rejected)
	r.Audit = "no second reconcile; audit " + sl.audit(d)
}
