package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"flashsale/pkg/adminapi"
	"flashsale/pkg/event"
	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/stackapi"
	"flashsale/tools/stackctl"
	"flashsale/tools/testenv"
)

// admission is what a queued shopper was given: her ticket (the
// admission's id, which the order row keeps) and the admission token her
// purchases carry.
type admission struct {
	ticket string
	token  string
}

// openQueuedSale is openSale for a sale behind the virtual queue, which
// admits 1,000 shoppers a second: its purchase path comes with each
// admission (sale.admit).
func openQueuedSale(t *testing.T, s *harness.Stack, quantity int) *sale {
	t.Helper()
	sl := createSale(t, s, quantity, &adminapi.SaleQueue{Enabled: true, AdmissionRate: 1000})
	sl.admitted = map[string]admission{}
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := sl.info(testenv.Context(t))
		if err == nil && info.QueueEnabled && info.State == "OPEN" {
			return sl
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served queued sale %d: %+v %v", sl.id, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueAPI is the waiting room's client.
func (sl *sale) queueAPI() *stackapi.Client {
	return &stackapi.Client{GatewayURL: sl.s.GatewayURL, HTTP: client}
}

// admit has n fresh shoppers join the queue and poll their tickets until
// admitted, and returns them; their purchases then carry their admission.
func (sl *sale) admit(ctx context.Context, n int) []string {
	sl.t.Helper()
	api := sl.queueAPI()
	users := make([]string, n)
	tickets := make([]string, n)
	for i := range users {
		users[i] = sl.shopper()
		st, err := api.JoinQueue(ctx, sl.id, token(sl.t, users[i]), "")
		if err != nil {
			sl.t.Fatalf("sale %d: %s joins the queue: %v", sl.id, users[i], err)
		}
		tickets[i] = st.Ticket
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, u := range users {
		for {
			st, err := api.QueueStatus(ctx, sl.id, tickets[i], token(sl.t, u))
			if err == nil && st.State == "ADMITTED" {
				sl.mu.Lock()
				sl.admitted[u] = admission{ticket: tickets[i], token: st.AdmissionToken}
				if sl.url == "" {
					sl.usePath(st.PurchasePath)
				}
				sl.mu.Unlock()
				break
			}
			if time.Now().After(deadline) {
				sl.t.Fatalf("sale %d: %s not admitted after 20s: %+v %v", sl.id, u, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return users
}

// ticketState is the state her ticket's poll answers (ADMITTED, USED ...).
func (sl *sale) ticketState(ctx context.Context, user string) (string, error) {
	sl.mu.Lock()
	adm := sl.admitted[user]
	sl.mu.Unlock()
	st, err := sl.queueAPI().QueueStatus(ctx, sl.id, adm.ticket, token(sl.t, user))
	return st.State, err
}

// The broker stopped in the middle of a queued sale: an admitted shopper
// whose purchase is refused for the outage keeps her admission. Her ticket
// says ADMITTED again, not USED, and once the broker is back the same
// admission token buys her a unit. Each admission buys once: every order
// row names the admission it spent, and no admission is named twice.
// Without the give-back (the reserve script spends the token; a refused
// publish must return it) every shopper refused in the outage would be
// told ADMISSION_USED for the rest of the sale.
func TestBrokerStoppedMidQueuedSale(t *testing.T) {
	r := &row{Fault: "2c. Kafka broker stopped mid queued sale",
		Injected: "queued sale of 30, 55 shoppers admitted; 10 buy; deploy/stack/kafka.sh stop; 15 buy; start kafka; the 15 buy again with the same admission tokens, then 30 more; FLASHSALE_PUBLISH_TIMEOUT=1s"}
	record(t, r)
	s := harness.Start(t, harness.Options{Env: baseEnv(nil)})
	d := dial(t)
	ctx := testenv.Context(t)
	const (
		qty     = 30
		first   = 10 // buy before the outage
		refused = 15 // buy during it, and again after
		late    = 30 // buy after it: 5 units for 30
	)
	const publishTimeout = time.Second
	sl := openQueuedSale(t, s, qty)
	users := sl.admit(ctx, first+refused+late)
	firstUsers, refusedUsers, lateUsers := users[:first], users[first:first+refused], users[first+refused:]

	const (
		selling = 0
		down    = 1
		back    = 2
	)
	sl.buyAll(ctx, firstUsers, 8)
	sl.checkOnly("purchases before the outage", within(selling), outcome.Accepted)

	stopServer(t, stackctl.Kafka)
	sl.setPhase(down)
	sl.buyAll(ctx, refusedUsers, 8)
	sl.checkOnly("purchases during the outage", within(down), outcome.Unavailable)
	sl.checkUnavailable("broker outage", within(down))
	if bound := outageBound(publishTimeout); sl.slowestTook(within(down)) > bound {
		t.Errorf("slowest purchase during the outage took %v, want at most %v: %s", sl.slowestTook(within(down)), bound, sl.slowest(within(down), 5))
	}
	var spentInOutage int
	for _, u := range refusedUsers {
		state, err := sl.ticketState(ctx, u)
		if err != nil {
			t.Fatalf("%s's ticket after her refused purchase: %v", u, err)
		}
		if state != "ADMITTED" {
			spentInOutage++
			t.Errorf("%s's ticket after her purchase was refused for the outage: %s, want ADMITTED (her admission given back)", u, state)
		}
	}
	left, err := d.stock.Left(ctx, sl.id, sl.item)
	if err != nil {
		t.Fatal(err)
	}
	if left != qty-first {
		t.Errorf("after the outage Redis has %d units left, want %d: refused purchases kept their units", left, qty-first)
	}

	startServer(t, stackctl.Kafka)
	sl.setPhase(back)
	// The producer reconnects within seconds; until then a purchase is
	// refused again, and gives the admission back again.
	pending := refusedUsers
	deadline := time.Now().Add(60 * time.Second)
	for len(pending) > 0 && time.Now().Before(deadline) {
		var again []string
		for i, u := range pending {
			if time.Now().After(deadline) {
				again = append(again, pending[i:]...)
				break
			}
			a := sl.buy(ctx, u)
			switch a.kind {
			case outcome.Accepted:
			case outcome.Unavailable:
				again = append(again, u)
			default:
				t.Errorf("%s, refused in the outage, buys again with the same admission: %d %s, want 202 (or 503 while the broker comes back)", u, a.code, a.errCode)
			}
		}
		pending = again
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(pending) > 0 {
		t.Errorf("%d shoppers refused in the outage still could not buy 60s after the broker came back (%s)", len(pending), sl.summary(within(back)))
	}
	sl.buyAll(ctx, lateUsers, 8)
	accepted := sl.acceptedCopy()
	if len(accepted) != qty {
		t.Errorf("%d accepted of %d units (%s)", len(accepted), qty, sl.summary(nil))
	}
	d.waitPersisted(t, sl.id, accepted, 60*time.Second)

	// Every order placed names the admission its shopper was given, once.
	// A REJECTED row is the gateway's record of a publish it could not
	// confirm (PUBLISH_FAILED, no admission): only a refused purchase has
	// one.
	rows, err := d.pool.Query(ctx, `SELECT id::text, user_id, status, coalesce(reject_reason, ''), coalesce(admission_id, '')
		FROM flash_sale_order WHERE sale_id = $1`, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	sl.mu.Lock()
	admitted := maps.Clone(sl.admitted)
	sl.mu.Unlock()
	named := map[string]string{} // admission -> order
	var misnamed, rejected int
	for rows.Next() {
		var id, user, status, reason, adm string
		if err := rows.Scan(&id, &user, &status, &reason, &adm); err != nil {
			t.Fatal(err)
		}
		if status == "REJECTED" {
			rejected++
			if reason != event.RejectPublishFailed || !slices.Contains(refusedUsers, user) {
				t.Errorf("order %s of %s: REJECTED %s; want only PUBLISH_FAILED rows, of purchases sent in the outage", id, user, reason)
			}
			continue
		}
		if want := admitted[user].ticket; adm != want {
			misnamed++
			t.Errorf("order %s of %s names admission %q, want %q", id, user, adm, want)
		}
		if other, ok := named[adm]; ok {
			t.Errorf("admission %s bought orders %s and %s", adm, other, id)
		}
		named[adm] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, u := range refusedUsers {
		if state, err := sl.ticketState(ctx, u); err != nil || state != "USED" {
			t.Errorf("%s's ticket after her order was placed: %q %v, want USED", u, state, err)
		}
	}
	r.Answered = fmt.Sprintf("before: %s; outage: %s, %d of %d tickets not ADMITTED after, Redis %d left; after restart: the refused buy again: %s; late: %d accepted of %d; %d orders placed, %d naming another admission; %d REJECTED rows",
		sl.summary(within(selling)), sl.summary(within(down)), spentInOutage, refused, left,
		sl.summary(func(a answer) bool { return a.phase == back && slices.Contains(refusedUsers, a.user) }),
		countIn(accepted, lateUsers), late, len(named), misnamed, rejected)
	r.Audit = "no reconcile; audit " + sl.audit(d)
}

// countIn counts the accepted orders (order id -> user) of users.
func countIn(accepted map[string]string, users []string) int {
	in := map[string]bool{}
	for _, u := range users {
		in[u] = true
	}
	n := 0
	for _, u := range accepted {
		if in[u] {
			n++
		}
	}
	return n
}
