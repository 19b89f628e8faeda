package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"flashsale/gateway/internal/admission"
)

type queueAnswer struct {
	Ticket         string     `json:"ticket"`
	State          string     `json:"state"`
	Position       *int64     `json:"position"`
	PollAfterMs    int64      `json:"pollAfterMs"`
	AdmissionToken string     `json:"admissionToken"`
	AdmissionUntil *time.Time `json:"admissionExpiresAt"`
	PurchasePath   string     `json:"purchasePath"`
	Error          string     `json:"error"`
}

func (h *harness) queue(method, path, user string, body []byte) (int, queueAnswer) {
	h.t.Helper()
	a := h.doWith(method, h.base+path, user, nil, body)
	var q queueAnswer
	_ = json.Unmarshal(a.Body, &q)
	return a.Status, q
}

// admit joins the queue and polls until admitted; it returns the token.
func (h *harness) admit(user string) queueAnswer {
	h.t.Helper()
	code, q := h.queue("POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), user, nil)
	if code != 200 || q.Ticket == "" {
		h.t.Fatalf("join as %s: %d %+v", user, code, q)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.State != "ADMITTED" {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s never admitted: %+v", user, q)
		}
		time.Sleep(30 * time.Millisecond)
		code, q = h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, q.Ticket), user, nil)
		if code != 200 {
			h.t.Fatalf("poll as %s: %d %+v", user, code, q)
		}
	}
	return q
}

func (h *harness) buyWithToken(user, token string) answer {
	h.t.Helper()
	hdr := map[string]string{}
	if token != "" {
		hdr["X-Admission-Token"] = token
	}
	return h.doWith("POST", h.base+h.buyPath(h.items[0]), user, hdr, nil)
}

func TestQueuedSaleNeedsAdmission(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{10}, startsIn: -time.Minute, queue: true,
		// alice's many queue calls below are steps of one story, not a flood.
		env: map[string]string{"FLASHSALE_QUEUE_BYPASS": "tester", "FLASHSALE_LIMIT_PURCHASE_USER": "off", "FLASHSALE_LIMIT_QUEUE_USER": "off"}})

	// The sale page does not reveal the purchase path of a queued sale.
	info := h.doWith("GET", fmt.Sprintf("%s/api/flash-sales/%d", h.base, h.saleID), "", nil, nil)
	if strings.Contains(string(info.Body), "purchasePath") {
		t.Fatalf("sale info of a queued sale reveals the purchase path: %s", info.Body)
	}

	alice := h.admit("alice")
	if alice.PurchasePath == "" || !strings.Contains(h.buyPath(h.items[0]), alice.PurchasePath) {
		t.Fatalf("admitted answer %+v lacks the purchase path", alice)
	}
	signer, _ := admission.NewSigner(gateKey)
	// The expiry shown is the token's own, to the second it keeps: shown
	// finer, a page would count on a second the token does not have.
	if tok, err := signer.Verify(alice.AdmissionToken, h.saleID, "alice", time.Now()); err != nil || alice.AdmissionUntil == nil || !alice.AdmissionUntil.Equal(tok.Expires) {
		t.Errorf("admissionExpiresAt %v, the token's expiry %v (%v): want the same instant", alice.AdmissionUntil, tok.Expires, err)
	}
	forged, _ := admission.NewSigner([]byte("not-the-gateway-secret-0123456789abcdef"))
	exp := time.Now().Add(time.Minute)

	steps := []struct {
		name  string
		user  string
		token string
		want  int
		code  string
	}{
		{"no token", "bob", "", 403, "NOT_ADMITTED"},
		{"garbage token", "bob", "a1.xxx.yyy", 403, "NOT_ADMITTED"},
		{"forged token", "bob", forged.Sign(admission.Token{SaleID: h.saleID, UserID: "bob", ID: "t", Expires: exp}), 403, "NOT_ADMITTED"},
		{"another user's token", "bob", alice.AdmissionToken, 403, "NOT_ADMITTED"},
		{"token of another sale", "bob", signer.Sign(admission.Token{SaleID: h.saleID + 1, UserID: "bob", ID: "t", Expires: exp}), 403, "NOT_ADMITTED"},
		{"expired token", "bob", signer.Sign(admission.Token{SaleID: h.saleID, UserID: "bob", ID: "t", Expires: time.Now().Add(-time.Second)}), 403, "NOT_ADMITTED"},
		{"admitted shopper buys", "alice", alice.AdmissionToken, 202, ""},
		// Her answer was lost and she retries with the token her purchase
		// spent: she is told her order, not sent back to the queue.
		{"a retry with the spent token replays her order", "alice", alice.AdmissionToken, 202, ""},
		{"listed test account bypasses the queue", "tester", "", 202, ""},
	}
	for _, s := range steps {
		got := h.buyWithToken(s.user, s.token)
		if got.Status != s.want || got.Error != s.code {
			t.Fatalf("%s: got %d %q, want %d %q", s.name, got.Status, got.Error, s.want, s.code)
		}
	}
	if left := h.left(h.items[0]); left != 8 {
		t.Fatalf("stock left %d, want 8 (two purchases, every refusal and the replay free)", left)
	}
	// While she holds her unit, her ticket reads USED and asks for another
	// poll (a purchase that fails gives the admission back).
	code, q := h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, alice.Ticket), "alice", nil)
	if code != 200 || q.State != "USED" || q.AdmissionToken != "" || q.PollAfterMs <= 0 {
		t.Fatalf("alice polls her ticket while her order is PROCESSING: %d %+v, want USED, no token, a poll", code, q)
	}
	// Once her order is placed (the order service's row), only a refused or
	// never-placed order could give the admission back: no more polls.
	held, err := h.stock.Holders(context.Background(), h.saleID)
	if err != nil {
		t.Fatal(err)
	}
	h.persist(held["alice"], h.items[0], "alice")
	code, q = h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, alice.Ticket), "alice", nil)
	if code != 200 || q.State != "USED" || q.AdmissionToken != "" || q.PollAfterMs != 0 {
		t.Fatalf("alice polls her ticket once her order is PENDING: %d %+v, want USED, no token, nothing more to poll for", code, q)
	}
	// Her order ends (cancelled or expired) and its unit comes back: the
	// spent token still cannot buy again.
	if ok, err := h.stock.Release(context.Background(), h.saleID, h.items[0], "alice", held["alice"]); !ok || err != nil {
		t.Fatalf("release alice's order: %v %v", ok, err)
	}
	if got := h.buyWithToken("alice", alice.AdmissionToken); got.Status != 403 || got.Error != "ADMISSION_USED" {
		t.Fatalf("the token is spent by the purchase: got %d %q, want 403 ADMISSION_USED", got.Status, got.Error)
	}
	// The waiting room says so too, polled or joined again, and hands out
	// no new token (which the purchase would refuse: a page looping between
	// ADMITTED and 403 before).
	code, q = h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, alice.Ticket), "alice", nil)
	if code != 200 || q.State != "USED" || q.AdmissionToken != "" || q.PurchasePath != "" || q.PollAfterMs != 0 {
		t.Fatalf("alice polls her spent ticket: %d %+v, want state USED without a token, nothing more to poll for", code, q)
	}
	code, q = h.queue("POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), "alice", nil)
	if code != 200 || q.Ticket != alice.Ticket || q.State != "USED" || q.AdmissionToken != "" {
		t.Fatalf("alice joins again: %d %+v, want her ticket, state USED, no token", code, q)
	}

	// A ticket is the holder's only: another shopper polling it sees 404.
	code, _ = h.queue("POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), "carol", nil)
	if code != 200 {
		t.Fatalf("carol joins: %d", code)
	}
	if code, q := h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, alice.Ticket), "carol", nil); code != 404 {
		t.Fatalf("carol polls alice's ticket: %d %+v, want 404", code, q)
	}
}

func TestQueueJoinNeedsProofOfWork(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{5}, startsIn: -time.Minute, queue: true, pow: 10})
	join := fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID)
	if code, q := h.queue("POST", join, "alice", nil); code != 403 || q.Error != "BAD_PROOF" {
		t.Fatalf("join without proof: %d %+v, want 403 BAD_PROOF", code, q)
	}
	var ch struct {
		Challenge  string `json:"challenge"`
		Difficulty int    `json:"difficulty"`
	}
	a := h.doWith("GET", h.base+join+"/challenge", "alice", nil, nil)
	if err := json.Unmarshal(a.Body, &ch); err != nil || a.Status != 200 || ch.Difficulty != 10 {
		t.Fatalf("challenge: %d %s", a.Status, a.Body)
	}
	body, _ := json.Marshal(map[string]string{"challenge": ch.Challenge, "nonce": admission.Solve(ch.Challenge, ch.Difficulty)})
	if code, q := h.queue("POST", join, "bob", body); code != 403 {
		t.Fatalf("bob reusing alice's solved challenge: %d %+v, want 403", code, q)
	}
	if code, q := h.queue("POST", join, "alice", body); code != 200 || q.Ticket == "" {
		t.Fatalf("join with proof: %d %+v", code, q)
	}
}

func TestRateLimitsPerUserAndPerIP(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{100}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_TRUSTED_PROXIES": "127.0.0.1/32"}})
	admin := func(method, body, token string) answer {
		return h.doWith(method, h.admin+"/admin/limits", "", map[string]string{"Authorization": "Bearer " + token}, []byte(body))
	}
	if got := admin("PUT", `{"purchase":{"user":{"rate":0.01,"burst":1}}}`, "wrong-token-xxxxxxxx"); got.Status != 401 {
		t.Fatalf("limits changed with a wrong admin credential: %d", got.Status)
	}
	if got := admin("PUT", `{"purchase":{"user":{"rate":0.01,"burst":2},"ip":{"rate":0.01,"burst":3}}}`, "test-admin-token-0123"); got.Status != 200 {
		t.Fatalf("set limits: %d %s", got.Status, got.Body)
	}
	buy := func(user, xff string) answer {
		return h.doWith("POST", h.base+h.buyPath(h.items[0]), user, map[string]string{"X-Forwarded-For": xff}, nil)
	}
	// Per user: the third request of one shopper is refused, whatever the IP
	// (the second is a replay of her order: she already holds this item).
	for i, want := range []int{202, 202, 429} {
		got := buy("alice", fmt.Sprintf("203.0.113.%d", i+1))
		if got.Status != want {
			t.Fatalf("alice request %d: %d %q, want %d", i+1, got.Status, got.Error, want)
		}
		if want == 429 && (got.Retry == "" || got.Error != "RATE_LIMITED") {
			t.Fatalf("429 without Retry-After or code: %+v", got)
		}
	}
	// Per IP, taken from X-Forwarded-For behind a trusted proxy.
	for i, want := range []int{202, 202, 202, 429} {
		if got := buy(fmt.Sprintf("ip-user-%d", i), "198.51.100.7"); got.Status != want {
			t.Fatalf("request %d from one client IP: %d, want %d", i+1, got.Status, want)
		}
	}
	// A client cannot dodge the limit by writing its own X-Forwarded-For entry
	// to the left of the one the trusted proxy appended.
	if got := buy("ip-user-9", "1.2.3.4, 198.51.100.7"); got.Status != 429 {
		t.Fatalf("spoofed left-most X-Forwarded-For: %d, want 429", got.Status)
	}
}

// Without trusted proxies X-Forwarded-For is ignored: a client cannot
// rotate it to dodge the per-IP limit.
func TestUntrustedPeerCannotSpoofForwardedFor(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{100}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_LIMIT_PURCHASE_IP": "0.001/2"}})
	for i, want := range []int{202, 202, 429, 429} {
		got := h.doWith("POST", h.base+h.buyPath(h.items[0]), fmt.Sprintf("spoofer-%d", i),
			map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", i)}, nil)
		if got.Status != want {
			t.Fatalf("request %d with a fresh X-Forwarded-For: %d, want %d", i+1, got.Status, want)
		}
	}
}

// Two gateways: the sold-out flag each set clears on both when a unit
// comes back: by the release's message alone (the stock poll an hour
// apart), and as the harness runs (the message, and a poll every 200 ms
// should a message be lost).
func TestSoldOutFlagClearsOnEveryGateway(t *testing.T) {
	t.Run("message", func(t *testing.T) { testSoldOutFlagClears(t, map[string]string{"FLASHSALE_STOCK_POLL": "1h"}) })
	t.Run("poll", func(t *testing.T) { testSoldOutFlagClears(t, nil) })
}

func testSoldOutFlagClears(t *testing.T, env map[string]string) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute, env: env})
	gw1 := h.base
	h.startGateway(harnessOpts{quantities: []int{1}, env: env})
	gw2 := h.base
	buy := func(base, user string) answer {
		return h.doWith("POST", base+h.buyPath(h.items[0]), user, nil, nil)
	}
	first := buy(gw1, "alice")
	if first.Status != 202 {
		t.Fatalf("alice on gateway 1: %d", first.Status)
	}
	for _, base := range []string{gw1, gw2} {
		for range 2 { // the second answer comes from the in-process flag
			if got := buy(base, "bob"); got.Status != 410 {
				t.Fatalf("bob on %s: %d, want 410", base, got.Status)
			}
		}
	}
	if ok, err := h.stock.Release(t.Context(), h.saleID, h.items[0], "alice", first.OrderID); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	// Both gateways sell the returned unit within the bound (pub/sub, or the
	// stock poll at the latest). One sells it; the other then says 410 again.
	deadline := time.Now().Add(3 * time.Second)
	cleared := map[string]bool{}
	for len(cleared) < 2 && time.Now().Before(deadline) {
		for _, base := range []string{gw1, gw2} {
			if cleared[base] {
				continue
			}
			if info := h.doWith("GET", fmt.Sprintf("%s/api/flash-sales/%d", base, h.saleID), "", nil, nil); strings.Contains(string(info.Body), `"soldOut":false`) {
				cleared[base] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(cleared) != 2 {
		t.Fatalf("sold-out flag cleared on %d of 2 gateways within 3s", len(cleared))
	}
	if got := buy(gw2, "bob"); got.Status != 202 {
		t.Fatalf("bob on gateway 2 after the return: %d, want 202", got.Status)
	}
}

// The configured bypass users (FLASHSALE_QUEUE_BYPASS) stay in whatever
// operators change through the admin API: an API change replaced the whole
// list with the shared one, and the configured users were refused until the
// next refresh. Removing one through the API is refused with a pointer to
// the configuration, instead of answering without her and putting her back
// a second later.
func TestBypassChangesKeepConfiguredUsers(t *testing.T) {
	carol, dave := "carol-"+t.Name(), "dave-"+t.Name()
	h := newHarness(t, harnessOpts{quantities: []int{10}, startsIn: -time.Minute, queue: true,
		env: map[string]string{"FLASHSALE_QUEUE_BYPASS": carol, "FLASHSALE_LIMIT_PURCHASE_USER": "off"}})
	admin := map[string]string{"Authorization": "Bearer test-admin-token-0123"}
	put := func(body string) answer {
		return h.doWith("PUT", h.admin+"/admin/queue/bypass", "", admin, []byte(body))
	}
	if got := put(`{"add":["` + dave + `"]}`); got.Status != 200 || !strings.Contains(string(got.Body), carol) || !strings.Contains(string(got.Body), dave) {
		t.Fatalf("add %s: %d %s, want 200 listing %s and %s", dave, got.Status, got.Body, carol, dave)
	}
	t.Cleanup(func() { put(`{"remove":["` + dave + `"]}`) })
	for _, u := range []string{carol, dave} {
		if got := h.buyWithToken(u, ""); got.Status != 202 {
			t.Fatalf("%s right after the change, without a token: %d %q, want 202", u, got.Status, got.Error)
		}
	}
	if got := put(`{"remove":["` + carol + `"]}`); got.Status != 409 || got.Error != "CONFIGURED_BYPASS" {
		t.Fatalf("remove the configured %s: %d %s, want 409 CONFIGURED_BYPASS", carol, got.Status, got.Body)
	}
	if got := put(`{"remove":["` + dave + `"]}`); got.Status != 200 || strings.Contains(string(got.Body), dave) || !strings.Contains(string(got.Body), carol) {
		t.Fatalf("remove %s: %d %s, want 200 listing %s only", dave, got.Status, got.Body, carol)
	}
}

// An operator's body with a misspelt key, or a rule outside what a token
// bucket can do, changed nothing (or the wrong thing) and answered 200: it
// is now refused, and the limits stay as they were.
func TestAdminBodiesWithUnknownKeysAreRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute})
	admin := map[string]string{"Authorization": "Bearer test-admin-token-0123"}
	before := h.doWith("GET", h.admin+"/admin/limits", "", admin, nil)
	for _, body := range []string{
		`{"purchases":{"user":{"rate":1,"burst":1}}}`,
		`{"purchase":{"usr":{"rate":1,"burst":1}}}`,
		`{"purchase":{"user":{"rate":1,"brust":1}}}`,
		`{"purchase":{"user":{"rate":1,"burst":1,"brust":4}}}`, // both fields there: the rule itself must refuse the key
		`{"purchase":{"user":{"rate":1,"burst":1}}} {}`,
		// They decode, and would let all through, refuse all, or never evict.
		`{"purchase":{"user":{"rate":1e-11,"burst":1}}}`,
		`{"queue":{"ip":{"rate":1,"burst":1000000000000}}}`,
	} {
		if got := h.doWith("PUT", h.admin+"/admin/limits", "", admin, []byte(body)); got.Status != 400 {
			t.Errorf("PUT /admin/limits %s: %d %s, want 400", body, got.Status, got.Body)
		}
	}
	if after := h.doWith("GET", h.admin+"/admin/limits", "", admin, nil); string(after.Body) != string(before.Body) {
		t.Errorf("limits changed by refused bodies: %s, then %s", before.Body, after.Body)
	}
}

// Tightening the queue's per-user limit (against join floods) leaves the
// waiting shoppers' polls alone: they have their own limit, so one who
// follows the advice keeps her place. Under the queue's rule, here one
// request per 1,000 s, her second poll was refused.
func TestStatusPollsOutliveATightQueueLimit(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{10}, startsIn: -time.Minute, queue: true,
		env: map[string]string{"FLASHSALE_LIMIT_QUEUE_USER": "0.001/2"}})
	code, q := h.queue("POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), "alice", nil)
	if code != 200 || q.Ticket == "" {
		t.Fatalf("join: %d %+v", code, q)
	}
	for i := range 6 {
		code, st := h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, q.Ticket), "alice", nil)
		if code != 200 {
			t.Fatalf("poll %d under a tight queue limit: %d %+v, want 200", i+1, code, st)
		}
	}
	for range 2 { // the queue's rule still holds for joins: one left, then refused
		code, _ = h.queue("POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), "alice", nil)
	}
	if code != 429 {
		t.Errorf("third join under the queue's rule of burst 2: %d, want 429", code)
	}

	// The polls' own rule is the operator's to tune, down to what the
	// waiting room's advice needs (2 a second), and no further.
	admin := func(body string) int {
		t.Helper()
		r := h.doWith("PUT", h.admin+"/admin/limits", "", map[string]string{"Authorization": "Bearer test-admin-token-0123"}, []byte(body))
		return r.Status
	}
	for _, refused := range []string{`{"poll":{"user":{"rate":1,"burst":5}}}`, `{"poll":{"ip":{"rate":5,"burst":5}}}`} {
		if got := admin(refused); got != 400 {
			t.Errorf("PUT %s: %d, want 400", refused, got)
		}
	}
	if got := admin(`{"poll":{"user":{"rate":2,"burst":3}}}`); got != 200 {
		t.Fatalf("PUT the polls' rule 2/3: %d, want 200", got)
	}
	codes := make([]int, 0, 5)
	for range 5 {
		code, _ := h.queue("GET", fmt.Sprintf("/api/flash-sales/%d/queue/%s", h.saleID, q.Ticket), "bob", nil)
		codes = append(codes, code)
	}
	if want := []int{404, 404, 404, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("five quick polls of a ticket not hers under a rule of burst 3: %v, want %v", codes, want)
	}
	// Her order requests have a bucket of their own under the same rule:
	// the polls above spent none of it. (No order service runs here: a
	// request let through is answered 503.)
	codes = codes[:0]
	for range 5 {
		r := h.do("GET", "/api/flash-sales/orders/6f1c2a9e-3b7d-4c2e-9a5f-0d8e7b6a5c4d", "bob")
		codes = append(codes, r.Status)
	}
	if want := []int{503, 503, 503, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("five quick order requests after her polls were refused: %v, want %v", codes, want)
	}
}
