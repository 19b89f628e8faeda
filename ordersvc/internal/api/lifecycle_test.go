package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/api"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/accepted"
	"flashsale/pkg/auth"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

// Pay and cancel over HTTP: owner only (404 for anyone else, as for GET),
// idempotent repeats, clear refusals, and a cancelled unit back in Redis
// by the time the answer arrives.
func TestPayAndCancel(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	c := publicAPI(t, pool, rc)
	run := fmt.Sprintf("%d", time.Now().UnixNano()) // payment references are unique across the database

	s := testdb.Sale(t, st, 10)
	testdb.Load(t, st, stk, s.ID)
	now := time.Now()
	orders := testdb.Orders(t, st, stk, s, 0, now, "alice", "bob", "carol")
	due := testdb.Orders(t, st, stk, s, 0, now.Add(-10*time.Minute-time.Second), "dave")[0]
	alice, bob, carol := orders[0], orders[1], orders[2]
	inFlight := uuid.New()
	if err := accepted.Record(ctx, rc, inFlight.String(), "erin"); err != nil {
		t.Fatal(err)
	}
	path := func(id uuid.UUID, action string) string {
		return "/api/flash-sales/orders/" + id.String() + "/" + action
	}
	pay := func(ref string) string { return `{"paymentRef":"` + ref + `"}` }

	// In order: each step sees the state the steps before it left.
	steps := []struct {
		name       string
		method     string
		path       string
		user       string // "" = no token
		body       string
		wantStatus int
		wantCode   string // error code, or the order's status on 200
	}{
		{"pay as another user", "POST", path(alice.OrderID, "pay"), "mallory", pay(run + "a"), 404, api.CodeNotFound},
		{"cancel as another user", "POST", path(alice.OrderID, "cancel"), "mallory", "", 404, api.CodeNotFound},
		{"get as another user", "GET", "/api/flash-sales/orders/" + alice.OrderID.String(), "mallory", "", 404, api.CodeNotFound},
		{"pay without a token", "POST", path(alice.OrderID, "pay"), "", pay(run + "a"), 401, api.CodeUnauthorized},
		{"pay a malformed id", "POST", path(uuid.Nil, "pay")[:30] + "x/pay", "alice", pay(run + "a"), 400, api.CodeInvalidOrderID},
		{"pay without a body", "POST", path(alice.OrderID, "pay"), "alice", "", 400, api.CodeInvalidPaymentRef},
		{"pay with an empty reference", "POST", path(alice.OrderID, "pay"), "alice", pay(""), 400, api.CodeInvalidPaymentRef},
		{"pay with a control character", "POST", path(alice.OrderID, "pay"), "alice", pay(`a\u0007b`), 400, api.CodeInvalidPaymentRef},
		{"pay with a reference too long", "POST", path(alice.OrderID, "pay"), "alice", pay(strings.Repeat("r", 129)), 400, api.CodeInvalidPaymentRef},
		{"pay with unknown fields", "POST", path(alice.OrderID, "pay"), "alice", `{"paymentRef":"x","amount":1}`, 400, api.CodeInvalidPaymentRef},
		{"pay", "POST", path(alice.OrderID, "pay"), "alice", pay(run + "a"), 200, store.StatusPaid},
		{"pay again with the same reference", "POST", path(alice.OrderID, "pay"), "alice", pay(run + "a"), 200, store.StatusPaid},
		{"pay again with another reference", "POST", path(alice.OrderID, "pay"), "alice", pay(run + "b"), 409, api.CodeAlreadyPaid},
		{"cancel a paid order", "POST", path(alice.OrderID, "cancel"), "alice", "", 409, api.CodeOrderPaid},
		{"a reference that paid another order", "POST", path(carol.OrderID, "pay"), "carol", pay(run + "a"), 409, api.CodePaymentRefUsed},
		{"cancel", "POST", path(bob.OrderID, "cancel"), "bob", "", 200, store.StatusCancelled},
		{"cancel again", "POST", path(bob.OrderID, "cancel"), "bob", "", 200, store.StatusCancelled},
		{"pay a cancelled order", "POST", path(bob.OrderID, "pay"), "bob", pay(run + "c"), 409, api.CodeOrderCancelled},
		{"pay after the window, before any sweep", "POST", path(due.OrderID, "pay"), "dave", pay(run + "d"), 409, api.CodeOrderExpired},
		{"pay an order in flight", "POST", path(inFlight, "pay"), "erin", pay(run + "e"), 409, api.CodeProcessing},
		{"cancel an order in flight", "POST", path(inFlight, "cancel"), "erin", "", 409, api.CodeProcessing},
		{"cancel another user's order in flight", "POST", path(inFlight, "cancel"), "mallory", "", 404, api.CodeNotFound},
		{"cancel an unknown order", "POST", path(uuid.New(), "cancel"), "alice", "", 404, api.CodeNotFound},
		{"unknown action", "POST", path(alice.OrderID, "refund"), "alice", "", 404, api.CodeNotFound},
		{"pay with GET", "GET", path(alice.OrderID, "pay"), "alice", "", 405, api.CodeMethod},
	}
	for _, tt := range steps {
		authz := ""
		if tt.user != "" {
			authz = token(t, tt.user)
		}
		r := do(t, c, tt.method, tt.path, authz, tt.body)
		if r.status != tt.wantStatus {
			t.Errorf("%s: status %d, want %d; body %s", tt.name, r.status, tt.wantStatus, r.raw)
			continue
		}
		got, _ := r.body["error"].(string)
		if r.status == 200 {
			got, _ = r.body["status"].(string)
		} else if msg, _ := r.body["message"].(string); msg == "" {
			t.Errorf("%s: error without a message: %s", tt.name, r.raw)
		}
		if got != tt.wantCode {
			t.Errorf("%s: got %q, want %q; body %s", tt.name, got, tt.wantCode, r.raw)
		}
		if tt.wantCode == api.CodeProcessing && r.header["Retry-After"] == "" {
			t.Errorf("%s: no Retry-After", tt.name)
		}
	}

	// Bob's unit is back (released after the cancel's commit, before its
	// answer) and Bob may buy again; Alice's paid unit stays held.
	holders, err := stk.Holders(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, held := holders["bob"]; held || holders["alice"] != alice.OrderID.String() {
		t.Errorf("holders after pay and cancel: %v", holders)
	}
	if _, err := stk.Reserve(ctx, s.ID, s.Items[0].ID, "bob", uuid.NewString()); err != nil {
		t.Errorf("bob reserves again: %v", err)
	}
	o, err := st.GetOrder(ctx, alice.OrderID)
	if err != nil || o.PaymentRef != run+"a" || o.PaidAt == nil {
		t.Errorf("alice's order: %+v %v", o, err)
	}
}

func TestPaymentWebhook(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st := store.New(pool)
	secret := []byte("webhook-secret-0123456789abcdef-0123")
	m := metrics.New()
	wh, err := api.NewPaymentWebhook(st, rc, secret, m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	h := api.NewHealth(st, m, nil)
	c := serve(t, api.NewAdmin(sale.NewService(st, stock.New(rc)), adminToken, h, wh, quiet).Handler(context.Background()))
	s := testdb.Sale(t, st, 5)
	now := time.Now()
	o := testdb.Orders(t, st, nil, s, 0, now, "alice")[0]
	due := testdb.Orders(t, st, nil, s, 0, now.Add(-10*time.Minute-time.Second), "bob")[0]
	run := fmt.Sprintf("%d", now.UnixNano())
	body := func(id uuid.UUID, ref string) string {
		return fmt.Sprintf(`{"orderId":%q,"paymentRef":%q}`, id, ref)
	}
	post := func(b, sig string) response {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://ordersvc/webhooks/payment")
		req.Header.SetMethod("POST")
		req.Header.Set(api.HeaderPaymentSignature, sig)
		req.SetBodyString(b)
		if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return response{status: resp.StatusCode(), raw: string(resp.Body())}
	}
	good := body(o.OrderID, run+"p1")
	tests := []struct {
		name       string
		body, sig  string
		wantStatus int
		wantIn     string
	}{
		{"no signature", good, "", 401, api.CodeInvalidSignature},
		{"signed with another secret", good, api.Sign([]byte("nope"), []byte(good)), 401, api.CodeInvalidSignature},
		{"signature of another body", good, api.Sign(secret, []byte(body(o.OrderID, run+"p2"))), 401, api.CodeInvalidSignature},
		{"signed garbage", "{", api.Sign(secret, []byte("{")), 400, api.CodeBadRequest},
		{"confirmed", good, api.Sign(secret, []byte(good)), 200, store.StatusPaid},
		{"replayed", good, api.Sign(secret, []byte(good)), 200, store.StatusPaid},
		{"another reference", body(o.OrderID, run+"p2"), api.Sign(secret, []byte(body(o.OrderID, run+"p2"))), 409, api.CodeAlreadyPaid},
		{"after the window", body(due.OrderID, run+"p3"), api.Sign(secret, []byte(body(due.OrderID, run+"p3"))), 409, api.CodeOrderExpired},
	}
	for _, tt := range tests {
		r := post(tt.body, tt.sig)
		if r.status != tt.wantStatus || !strings.Contains(r.raw, tt.wantIn) {
			t.Errorf("%s: got %d %s, want %d with %s", tt.name, r.status, r.raw, tt.wantStatus, tt.wantIn)
		}
	}
	unknown := body(uuid.New(), run+"p5")
	if r := post(unknown, api.Sign(secret, []byte(unknown))); r.status != 404 {
		t.Errorf("unknown order: got %d %s, want 404", r.status, r.raw)
	}
	if got := testutil.ToFloat64(m.OrdersPaid); got != 1 {
		t.Errorf("orders_paid_total: got %v, want 1 (replays do not count)", got)
	}
	// Each confirmation refused for good is money taken for an order that
	// will not be paid: counted by its code, for someone to refund.
	for code, want := range map[string]float64{api.CodeAlreadyPaid: 1, api.CodeOrderExpired: 1, "NOT_FOUND": 1, api.CodeInvalidSignature: 0} {
		if got := testutil.ToFloat64(m.PaymentsRefused.WithLabelValues(code)); got != want {
			t.Errorf("payments_refused_total{code=%q}: got %v, want %v", code, got, want)
		}
	}
	// A body far larger than any confirmation is refused before its
	// signature is computed.
	big := strings.Repeat(" ", 64<<10) + good
	if r := post(big, api.Sign(secret, []byte(big))); r.status != 413 {
		t.Errorf("a 64 KiB confirmation: got %d %s, want 413", r.status, r.raw)
	}
	// Without a secret there is no webhook endpoint.
	plain := serve(t, api.NewAdmin(sale.NewService(st, stock.New(rc)), adminToken, h, nil, quiet).Handler(context.Background()))
	if r := do(t, plain, "POST", "/webhooks/payment", "", good); r.status != 404 {
		t.Errorf("webhook without a secret: got %d, want 404", r.status)
	}
}

// A signed confirmation refused for good is money taken for an order that
// will not be paid: it is kept in PostgreSQL and listed to the operators
// until one settles it (refunded, or honoured by hand), or the same
// confirmation is accepted later (its order was not there yet). The
// provider sending it again counts an attempt, not a second payment; a
// refusal that cannot be kept answers 503, so the provider tries again.
func TestRefusedPaymentsAreKeptUntilSettled(t *testing.T) {
	t.Parallel()
	pool, rc := testdb.Own(t)
	st := store.New(pool)
	ctx := testenv.Context(t)
	secret := []byte("webhook-secret-0123456789abcdef-0123")
	m := metrics.New()
	wh, err := api.NewPaymentWebhook(st, rc, secret, m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, api.NewAdmin(sale.NewService(st, stock.New(rc)), adminToken, api.NewHealth(st, metrics.New(), nil), wh, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)
	unsettled := func(want float64, when string) {
		t.Helper()
		if got := testutil.ToFloat64(m.PaymentsUnsettled); got != want {
			t.Errorf("payments_refused_unsettled %s: %v, want %v", when, got, want)
		}
	}
	s := testdb.Sale(t, st, 5)
	due := testdb.Orders(t, st, nil, s, 0, time.Now().Add(-10*time.Minute-time.Second), "bob")[0]
	confirm := func(id uuid.UUID, ref string) int {
		t.Helper()
		b := fmt.Sprintf(`{"orderId":%q,"paymentRef":%q}`, id, ref)
		r := doWith(t, c, "POST", "/webhooks/payment", "", b, map[string]string{api.HeaderPaymentSignature: api.Sign(secret, []byte(b))})
		return r.status
	}
	type refused struct {
		PaymentRef string     `json:"paymentRef"`
		OrderID    uuid.UUID  `json:"orderId"`
		Code       string     `json:"code"`
		Attempts   int        `json:"attempts"`
		SettledAt  *time.Time `json:"settledAt"`
		Resolution string     `json:"resolution"`
	}
	list := func(query string) []refused {
		t.Helper()
		r := do(t, c, "GET", "/admin/payments/refused"+query, bearer, "")
		var got struct {
			Payments []refused `json:"payments"`
			More     bool      `json:"more"`
		}
		if err := json.Unmarshal([]byte(r.raw), &got); r.status != 200 || err != nil || got.More {
			t.Fatalf("list%s: %d %s %v", query, r.status, r.raw, err)
		}
		for i := range got.Payments {
			got.Payments[i].SettledAt = nil // compared by Resolution
		}
		return got.Payments
	}

	// Not kept, not final: PostgreSQL refuses the row, the provider is
	// told to try again.
	lift := testdb.FailCommits(t, pool, "INSERT", "payment_refused")
	if got := confirm(due.OrderID, "late-1"); got != 503 {
		t.Errorf("confirmation after the window, its refusal not recordable: %d, want 503", got)
	}
	lift()
	if got := testutil.ToFloat64(m.PaymentsRefused.WithLabelValues(api.CodeOrderExpired)); got != 0 {
		t.Errorf("payments_refused_total counted a refusal it did not keep: %v", got)
	}

	early := uuid.New() // an order the provider confirms before it is persisted, and not in flight either
	for _, c := range []struct {
		id   uuid.UUID
		ref  string
		want int
	}{
		{due.OrderID, "late-1", 409},
		{due.OrderID, "late-1", 409}, // the provider again
		{early, "early-1", 404},
	} {
		if got := confirm(c.id, c.ref); got != c.want {
			t.Fatalf("confirmation %s of %s: %d, want %d", c.ref, c.id, got, c.want)
		}
	}
	want := []refused{
		{PaymentRef: "late-1", OrderID: due.OrderID, Code: api.CodeOrderExpired, Attempts: 2},
		{PaymentRef: "early-1", OrderID: early, Code: api.CodeNotFound, Attempts: 1},
	}
	if diff := cmp.Diff(want, list("")); diff != "" {
		t.Errorf("refused payments (-want +got):\n%s", diff)
	}
	unsettled(2, "after two refusals")

	// The early order arrives and its confirmation is accepted: no refund.
	if _, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: early, SaleID: s.ID,
		ItemID: s.Items[0].ID, UserID: "carol", PlacedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if got := confirm(early, "early-1"); got != 200 {
		t.Fatalf("the early order's confirmation once it exists: %d, want 200", got)
	}
	if diff := cmp.Diff(want[:1], list("")); diff != "" {
		t.Errorf("unsettled after the early order was paid (-want +got):\n%s", diff)
	}
	unsettled(1, "after the early order was paid")

	settle := func(b string) response {
		t.Helper()
		return do(t, c, "POST", "/admin/payments/refused/settle", bearer, b)
	}
	late := fmt.Sprintf(`{"paymentRef":"late-1","orderId":%q,"resolution":"refunded"}`, due.OrderID)
	first := settle(late)
	if first.status != 200 || first.body["settledAt"] == nil || first.body["resolution"] != "refunded" {
		t.Fatalf("settle: %d %s", first.status, first.raw)
	}
	honoured := fmt.Sprintf(`{"paymentRef":"late-1","orderId":%q,"resolution":"honoured"}`, due.OrderID)
	if again := settle(honoured); again.status != 200 || again.body["settledAt"] != first.body["settledAt"] || again.body["resolution"] != "refunded" {
		t.Errorf("settle again: %d %s, want the first settlement kept", again.status, again.raw)
	}
	for _, b := range []string{
		fmt.Sprintf(`{"paymentRef":"late-1","orderId":%q,"resolution":"refunded"}`, uuid.New()), // another order
		fmt.Sprintf(`{"paymentRef":"never-refused","orderId":%q,"resolution":"refunded"}`, due.OrderID),
	} {
		if r := settle(b); r.status != 404 || r.body["error"] != api.CodeNotFound {
			t.Errorf("settle %s: %d %s, want 404", b, r.status, r.raw)
		}
	}
	for _, b := range []string{``, `{`, `{"paymentRef":"late-1"}`,
		fmt.Sprintf(`{"paymentRef":"late-1","orderId":%q,"resolution":"paid"}`, due.OrderID), // the service's own
		fmt.Sprintf(`{"paymentRef":"late-1","orderId":%q,"resolution":"refunded","extra":1}`, due.OrderID)} {
		if r := settle(b); r.status != 400 {
			t.Errorf("settle %q: %d %s, want 400", b, r.status, r.raw)
		}
	}
	if got := list(""); len(got) != 0 {
		t.Errorf("unsettled after settling late-1: %+v", got)
	}
	unsettled(0, "after settling the last")
	all := list("?all=true")
	if len(all) != 2 || all[0].Resolution != store.ResolutionRefunded || all[1].Resolution != store.ResolutionPaid {
		t.Errorf("every refused payment: %+v, want late-1 refunded and early-1 paid", all)
	}
	if r := do(t, c, "GET", "/admin/payments/refused?all=maybe", bearer, ""); r.status != 400 {
		t.Errorf("?all=maybe: %d, want 400", r.status)
	}
	// Another instance's refusal reaches this one's gauge at its next count.
	if _, err := st.RecordRefusedPayment(ctx, "elsewhere-1", uuid.New(), api.CodeNotFound); err != nil {
		t.Fatal(err)
	}
	wh.CountUnsettled(ctx)
	unsettled(1, "after another instance's refusal")
}

// The admin reconcile endpoint answers the verdict and exposes it in metrics.
func TestAdminReconcile(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st, stk := store.New(pool), stock.New(rc)
	m := metrics.New()
	h := api.NewHealth(st, m, nil)
	c := serve(t, api.NewAdmin(sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithMetrics(m)), adminToken, h, nil, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)
	s := testdb.Sale(t, st, 4)
	testdb.Load(t, st, stk, s.ID)
	testdb.Orders(t, st, stk, s, 0, time.Now(), "alice")
	ctx := testenv.Context(t)
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(s.ID, s.Items[0].ID)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("/admin/sales/%d/reconcile", s.ID)
	steps := []struct {
		name       string
		path       string
		wantStatus int
		wantClean  bool
		wantMetric string // the sale's series on /metrics after the call ("": not looked at)
		wantValue  float64
	}{
		{"lost stock key found", p, 200, false, "flashsale_ordersvc_reconcile_differences", 1},
		{"bad repair flag", p + "?repair=maybe", 400, false, "", 0},
		{"repaired", p + "?repair=true", 200, false, "flashsale_ordersvc_reconcile_repaired", 1},
		{"clean after the repair", p, 200, true, "flashsale_ordersvc_reconcile_differences", 0},
		{"unknown sale", "/admin/sales/999999999999/reconcile", 404, false, "", 0},
	}
	for _, tt := range steps {
		r := do(t, c, "POST", tt.path, bearer, "")
		if r.status != tt.wantStatus {
			t.Errorf("%s: got %d %s, want %d", tt.name, r.status, r.raw, tt.wantStatus)
			continue
		}
		if r.status == 200 && r.body["clean"] != tt.wantClean {
			t.Errorf("%s: clean %v, want %v: %s", tt.name, r.body["clean"], tt.wantClean, r.raw)
		}
		if tt.wantMetric != "" {
			mr := do(t, c, "GET", "/metrics", "", "")
			fams, err := scrape.Parse(strings.NewReader(mr.raw))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if got, ok := fams.Value(tt.wantMetric, "sale", strconv.FormatInt(s.ID, 10)); !ok || got != tt.wantValue {
				t.Errorf("%s: %s{sale=%d} = %v (present %v), want %v", tt.name, tt.wantMetric, s.ID, got, ok, tt.wantValue)
			}
		}
	}
	if left, err := stk.Left(ctx, s.ID, s.Items[0].ID); err != nil || left != 3 {
		t.Errorf("stock after the repair: %d %v, want 3", left, err)
	}
	if r := do(t, c, "POST", p, "", ""); r.status != 401 {
		t.Errorf("reconcile without the admin token: got %d", r.status)
	}
}

// With a payment provider's webhook configured the shopper's own pay is
// off (config.PublicPay): she cannot mark her order PAID with a made-up
// reference and so block the provider's confirmation. She still sees and
// cancels her order; a bad token is still a 401.
func TestPayByProviderOnly(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st := store.New(pool)
	v, err := auth.NewVerifier(jwtKey, nil, "flashsale", "")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	c := serve(t, api.NewPublic(st, rc, relay.New(st, stock.New(rc), quiet, m), v, api.NewHealth(st, m, nil), quiet).
		ProviderPaysOnly().Handler(context.Background()))
	s := testdb.Sale(t, st, 5)
	o := testdb.Orders(t, st, nil, s, 0, time.Now(), "alice")[0]
	path := "/api/flash-sales/orders/" + o.OrderID.String()
	body := `{"paymentRef":"self-paid"}`

	if r := do(t, c, "POST", path+"/pay", token(t, "alice"), body); r.status != 403 || r.body["error"] != api.CodePaymentByProvider {
		t.Errorf("the shopper's own pay: %d %s, want 403 %s", r.status, r.raw, api.CodePaymentByProvider)
	}
	if r := do(t, c, "POST", path+"/pay", "Bearer forged", body); r.status != 401 {
		t.Errorf("pay with a bad token: %d %s, want 401", r.status, r.raw)
	}
	if r := do(t, c, "GET", path, token(t, "alice"), ""); r.status != 200 || r.body["status"] != store.StatusPending {
		t.Errorf("her order after the refused pay: %d %s, want 200 PENDING", r.status, r.raw)
	}
	if r := do(t, c, "POST", path+"/cancel", token(t, "alice"), ""); r.status != 200 || r.body["status"] != store.StatusCancelled {
		t.Errorf("cancel: %d %s, want 200 CANCELLED", r.status, r.raw)
	}
}

// A pay or cancel whose COMMIT PostgreSQL refuses answers 503 and changes
// nothing: the order stays PENDING and its unit stays sold in Redis. The
// source articles' expiry job gave the unit back inside its transaction,
// so a refused commit left a PENDING order, payable, whose unit was on
// sale again: one unit sold twice. And a pay answered 200 over a refused
// commit would leave a paid shopper's order to expire. Once commits go
// through, the cancel gives the unit back, once.
func TestTransitionsWhoseCommitFails(t *testing.T) {
	t.Parallel()
	pool, rc := testdb.Own(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	c := publicAPI(t, pool, rc)
	s := testdb.Sale(t, st, 3)
	testdb.Load(t, st, stk, s.ID)
	o := testdb.Orders(t, st, stk, s, 0, time.Now(), "alice")[0]
	path := "/api/flash-sales/orders/" + o.OrderID.String()
	unchanged := func(when string) {
		t.Helper()
		got, err := st.GetOrder(ctx, o.OrderID)
		if err != nil || got.Status != store.StatusPending {
			t.Errorf("%s: order %+v (%v), want it PENDING", when, got, err)
		}
		holders, err := stk.Holders(ctx, s.ID)
		if err != nil || holders["alice"] != o.OrderID.String() {
			t.Errorf("%s: holders %v (%v), want alice's unit held", when, holders, err)
		}
		if left, err := stk.Left(ctx, s.ID, s.Items[0].ID); err != nil || left != 2 {
			t.Errorf("%s: Redis left %d (%v), want 2", when, left, err)
		}
	}

	lift := testdb.FailCommits(t, pool, "INSERT", "stock_release")
	if r := do(t, c, "POST", path+"/cancel", token(t, "alice"), ""); r.status != 503 || r.body["error"] != api.CodeUnavailable {
		t.Errorf("cancel with its commit refused: %d %s, want 503 %s", r.status, r.raw, api.CodeUnavailable)
	}
	unchanged("after the refused cancel")
	lift()

	lift = testdb.FailCommits(t, pool, "UPDATE", "flash_sale_order")
	if r := do(t, c, "POST", path+"/pay", token(t, "alice"), `{"paymentRef":"refused"}`); r.status != 503 || r.body["error"] != api.CodeUnavailable {
		t.Errorf("pay with its commit refused: %d %s, want 503 %s", r.status, r.raw, api.CodeUnavailable)
	}
	unchanged("after the refused payment")
	lift()

	for range 2 { // the second is an idempotent repeat
		if r := do(t, c, "POST", path+"/cancel", token(t, "alice"), ""); r.status != 200 || r.body["status"] != store.StatusCancelled {
			t.Fatalf("cancel: %d %s", r.status, r.raw)
		}
	}
	holders, err := stk.Holders(ctx, s.ID)
	if err != nil || len(holders) != 0 {
		t.Errorf("holders after the cancel: %v (%v), want none", holders, err)
	}
	if left, err := stk.Left(ctx, s.ID, s.Items[0].ID); err != nil || left != 3 {
		t.Errorf("Redis left after the cancel: %d (%v), want 3: the unit back once", left, err)
	}
}

// A cancel that committed unheard (its answer lost to the network, or
// arriving past the request's deadline) left its unit queued in the outbox;
// the shopper told 503 tries again, and that repeat gives the unit back
// before it answers, as the first cancel would have, instead of leaving
// it to the relay's next pass. No relay runs here.
func TestCancelRepeatedAfterAnUnheardCommit(t *testing.T) {
	t.Parallel()
	pool, rc := testdb.Own(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	c := publicAPI(t, pool, rc)
	s := testdb.Sale(t, st, 1)
	testdb.Load(t, st, stk, s.ID)
	o := testdb.Orders(t, st, stk, s, 0, time.Now(), "alice")[0]
	if _, err := st.Cancel(ctx, o.OrderID, "alice"); err != nil { // committed, answer lost
		t.Fatal(err)
	}
	if r := do(t, c, "POST", "/api/flash-sales/orders/"+o.OrderID.String()+"/cancel", token(t, "alice"), ""); r.status != 200 || r.body["status"] != store.StatusCancelled {
		t.Fatalf("cancel again: %d %s", r.status, r.raw)
	}
	if _, err := stk.Reserve(ctx, s.ID, s.Items[0].ID, "alice", uuid.NewString()); err != nil {
		t.Errorf("alice buys again once the repeated cancel answered: %v", err)
	}
}
