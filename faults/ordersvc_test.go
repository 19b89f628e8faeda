package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// The order service killed with SIGKILL in the middle of its backlog and
// started again: the committed offsets never run ahead of the database
// (every message below a committed offset has its row at the instant of the
// kill), and the restarted service takes the backlog up within seconds.
func TestOrderServiceKilledMidStream(t *testing.T) {
	r := &row{Fault: "3a. ordersvc SIGKILL mid-stream",
		Injected: "ordersvc SIGSTOPped while 1,200 units sell to 1,500 shoppers (backlog in Kafka), SIGCONT, SIGKILL once ~1/3 of the rows are written, restart; FLASHSALE_BATCH_SIZE=25"}
	record(t, r)
	killMidStream(t, r, false)
}

// The order service and the broker crash together inside the millisecond
// between a batch's commit in PostgreSQL and its offset commit: that batch
// is delivered again after the restart, and must write nothing twice.
func TestOrderServiceAndBrokerCrashInCommitWindow(t *testing.T) {
	r := &row{Fault: "3b. ordersvc and broker crash between DB commit and offset commit",
		Injected: "as 3a, but the next batch is held on a row lock, the broker frozen, the lock released (the batch commits, its offset commit sits unread in the frozen broker), ordersvc SIGKILLed, the broker SIGKILLed (that offset commit is lost) and started, ordersvc restarted"}
	record(t, r)
	killMidStream(t, r, true)
}

// killMidStream is 3a, or 3b with inCommitWindow.
func killMidStream(t *testing.T, r *row, inCommitWindow bool) {
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{"FLASHSALE_BATCH_SIZE": "25"})})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 1200
	sl := openSale(t, s, qty)

	if err := s.Signal("ordersvc", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = s.Signal("ordersvc", syscall.SIGCONT) }
	t.Cleanup(cont)
	sl.wave(ctx, 1500, 64)
	accepted := sl.acceptedCopy()
	if len(accepted) != qty {
		t.Fatalf("%d accepted, want %d (%s)", len(accepted), qty, sl.summary(nil))
	}
	cont()
	deadline := time.Now().Add(30 * time.Second)
	for {
		total, _, _, err := d.rows(ctx, sl.id)
		if err != nil {
			t.Fatal(err)
		}
		if total >= qty/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d rows 30s after the consumer was continued", total)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if inCommitWindow {
		// Between a batch's commit in PostgreSQL and its offset commit
		// there is about a millisecond. To kill inside it every time: hold
		// the next batch on a lock of the item row, freeze the broker, let
		// the batch commit (its offset commit now sits unread in the frozen
		// broker's socket), kill ordersvc, then kill the broker so that
		// commit is lost. The batch's rows are in PostgreSQL, its offsets
		// are not.
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT 1 FROM flash_sale_item WHERE id = $1 FOR UPDATE`, sl.item); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the consumer reaches the lock with its next batch
		thaw := freezeBroker(t)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		s.Kill("ordersvc")
		crashBroker(t)
		thaw() // the process is gone; this only disarms the cleanup
	} else {
		s.Kill("ordersvc")
	}
	rowsAtKill, _, _, err := d.rows(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}

	// Offsets never ahead of the database: with the consumer dead, every
	// message below its partition's committed offset must have its row.
	offsets, err := committed(s.Topic, s.Env["FLASHSALE_CONSUMER_GROUP"])
	if err != nil {
		t.Fatalf("committed offsets: %v", err)
	}
	msgs, err := readTopic(ctx, s.Topic)
	if err != nil {
		t.Fatalf("read %s: %v", s.Topic, err)
	}
	var below, above []string
	for _, m := range msgs {
		if m.offset < offsets[m.partition] {
			below = append(below, m.orderID)
		} else {
			above = append(above, m.orderID)
		}
	}
	var persisted, redone int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE id = ANY($1::uuid[])`, below).Scan(&persisted); err != nil {
		t.Fatal(err)
	}
	if persisted != len(below) {
		t.Errorf("offsets ahead of the database: %d messages below the committed offsets, only %d of them have a row", len(below), persisted)
	}
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE id = ANY($1::uuid[])`, above).Scan(&redone); err != nil {
		t.Fatal(err)
	}
	if inCommitWindow && redone == 0 {
		t.Errorf("no row above the committed offsets after the crash: the redelivery of persisted messages was not exercised")
	}

	restarted := time.Now()
	s.Restart("ordersvc")
	d.waitPersisted(t, sl.id, accepted, 90*time.Second)
	caughtUp := time.Since(restarted)
	// The restarted member must not wait for the killed one's session to
	// expire (librdkafka's default session.timeout.ms is 45s): the backlog
	// would sit unpersisted, polling PROCESSING, for most of a minute.
	if caughtUp > 15*time.Second {
		t.Errorf("the restarted order service persisted the backlog %v after its restart, want within 15s (the killed member's group session holds the partitions until it times out)", caughtUp.Round(100*time.Millisecond))
	}
	total, _, _, err := d.rows(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	r.Answered = fmt.Sprintf("gateway while ordersvc was stopped: %s; at the kill: %d rows, %d messages below the committed offsets, all %d with a row; %d messages delivered again after the restart, %d of them already persisted; all %d orders persisted %v after the restart, %d rows in all",
		sl.summary(nil), rowsAtKill, len(below), persisted, len(above), redone, len(accepted), caughtUp.Round(100*time.Millisecond), total)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// A stalled consumer (the order service frozen with SIGSTOP): the gateway
// keeps selling at full speed, polling through the gateway answers 503
// within its proxy timeout instead of hanging, and everything is persisted
// once the service runs again.
func TestOrderServiceFrozen(t *testing.T) {
	r := &row{Fault: "5b. ordersvc frozen (SIGSTOP)",
		Injected: "ordersvc SIGSTOP for the whole sale (300 units, 400 shoppers), polls through the gateway, then SIGCONT"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil)})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 300
	sl := openSale(t, s, qty)

	if err := s.Signal("ordersvc", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = s.Signal("ordersvc", syscall.SIGCONT) }
	t.Cleanup(cont)
	sl.wave(ctx, 400, 64)
	accepted := sl.acceptedCopy()
	if len(accepted) != qty || sl.count(func(a answer) bool { return a.code == 410 }) != 100 {
		t.Errorf("with the consumer frozen: %s, want %d accepted and 100 sold out", sl.summary(nil), qty)
	}
	var order, user string
	for order, user = range accepted {
		break
	}
	start := time.Now()
	code, body, hdr, err := harness.Do(ctx, "GET", s.GatewayURL+"/api/flash-sales/orders/"+order, token(t, user), nil)
	took := time.Since(start)
	if err != nil || code != 503 || hdr.Get("Retry-After") == "" {
		t.Errorf("poll with ordersvc frozen: %d %s %v, want 503 with Retry-After", code, body, err)
	}
	if took > 5*time.Second {
		t.Errorf("poll with ordersvc frozen took %v, want the gateway's 3s proxy bound", took)
	}
	cont()
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)
	code2, status, err := poll(ctx, s, order, token(t, user))
	if err != nil || code2 != 200 || status != "PENDING" {
		t.Errorf("poll after SIGCONT: %d %s %v, want 200 PENDING", code2, status, err)
	}
	r.Answered = fmt.Sprintf("purchases: %s; poll while frozen: %d after %v; poll after SIGCONT: %d %s",
		sl.summary(nil), code, took.Round(10*time.Millisecond), code2, status)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}
