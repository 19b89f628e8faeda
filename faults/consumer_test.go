package faults

import (
	"fmt"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/testenv"
)

// A stalled consumer: the item row is locked by another transaction, so the
// order service's batch waits on PostgreSQL while its HTTP side runs. The
// gateway keeps selling at full speed, polling shows PROCESSING for every
// accepted order (the gateway's accepted-order record), and PENDING once the
// lock goes and the batch commits.
func TestConsumerStalled(t *testing.T) {
	r := &row{Fault: "5a. consumer stalled (item row locked)",
		Injected: "a test transaction holds SELECT ... FOR UPDATE on the item row for the whole sale (200 units, 300 shoppers); every accepted order polled; lock released"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil)})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 200
	sl := openSale(t, s, qty)

	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM flash_sale_item WHERE id = $1 FOR UPDATE`, sl.item); err != nil {
		t.Fatal(err)
	}
	sl.wave(ctx, 300, 64)
	accepted := sl.acceptedCopy()
	sl.checkOnly("purchases with the consumer stalled", func(answer) bool { return true }, outcome.Accepted, outcome.SoldOut)
	if len(accepted) != qty {
		t.Errorf("%d accepted with the consumer stalled, want %d", len(accepted), qty)
	}
	time.Sleep(500 * time.Millisecond) // more than a batch wait: the consumer is blocked, not slow
	polled := map[string]int{}
	for o, u := range accepted {
		code, status, err := poll(ctx, s, o, token(t, u))
		if err != nil {
			t.Fatal(err)
		}
		polled[fmt.Sprintf("%d %s", code, status)]++
	}
	if polled["200 PROCESSING"] != len(accepted) {
		t.Errorf("polls with the consumer stalled: %v, want all %d 200 PROCESSING", polled, len(accepted))
	}
	rows, _, _, err := d.rows(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	d.waitPersisted(t, sl.id, accepted, 30*time.Second)
	lag := time.Since(released)
	after := map[string]int{}
	for o, u := range accepted {
		code, status, err := poll(ctx, s, o, token(t, u))
		if err != nil {
			t.Fatal(err)
		}
		after[fmt.Sprintf("%d %s", code, status)]++
	}
	if after["200 PENDING"] != len(accepted) {
		t.Errorf("polls after the lock went: %v, want all %d 200 PENDING", after, len(accepted))
	}
	r.Answered = fmt.Sprintf("purchases: %s; rows while stalled: %d; polls while stalled: %v; all persisted %v after the lock went; polls after: %v",
		sl.summary(nil), rows, polled, lag.Round(10*time.Millisecond), after)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
