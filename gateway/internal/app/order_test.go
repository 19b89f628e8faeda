package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// myOrder is the answer of GET /api/flash-sales/{saleId}/order.
type myOrder struct {
	answer
	ItemID    int64      `json:"itemId"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

func (h *harness) myOrder(user string) myOrder {
	h.t.Helper()
	a := h.do("GET", fmt.Sprintf("/api/flash-sales/%d/order", h.saleID), user)
	var o myOrder
	o.answer = a
	if err := json.Unmarshal(a.Body, &o); err != nil {
		h.t.Fatalf("my order body %s: %v", a.Body, err)
	}
	return o
}

// persist writes the row the order service would write for an accepted
// order (this harness runs no order service).
func (h *harness) persist(id string, item int64, user string) time.Time {
	h.t.Helper()
	ctx := testenv.Context(h.t)
	conn, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var expires time.Time
	err = conn.QueryRow(ctx, `INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 'PENDING', now(), now() + interval '10 minutes') RETURNING expires_at`,
		id, h.saleID, item, user).Scan(&expires)
	if err != nil {
		h.t.Fatal(err)
	}
	return expires.UTC()
}

// A shopper whose purchase answer was lost learns her order again, from a
// retried purchase and from the "my order" call, through the whole gateway
// on the real Redis and PostgreSQL; nobody else learns it, and nothing is
// reserved twice.
func TestLostAnswerFindsTheOrder(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{3, 3}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_LIMIT_PURCHASE_USER": "off"}})
	a, b := h.items[0], h.items[1]
	ctx := context.Background()

	if got := h.myOrder("alice"); got.Status != 404 || got.Error != "NOT_FOUND" {
		t.Fatalf("my order before buying: %d %q, want 404 NOT_FOUND", got.Status, got.Error)
	}
	first := h.do("POST", h.buyPath(a), "alice")
	if first.Status != 202 || first.OrderID == "" {
		t.Fatalf("first purchase: %d %s", first.Status, first.Body)
	}
	steps := []struct {
		name   string
		do     func() answer
		status int
		code   string
		state  string // "" when not checked
	}{
		// The answer she lost, again: same order, nothing new reserved.
		{"replay, same item", func() answer { return h.do("POST", h.buyPath(a), "alice") }, 202, "", "PROCESSING"},
		// Another item: refused, but she learns the order she holds.
		{"another item", func() answer { return h.do("POST", h.buyPath(b), "alice") }, 409, "ALREADY_PURCHASED", ""},
		{"my order, not yet persisted", func() answer { return h.myOrder("alice").answer }, 200, "", "PROCESSING"},
	}
	for _, s := range steps {
		got := s.do()
		if got.Status != s.status || got.Error != s.code || got.OrderID != first.OrderID {
			t.Fatalf("%s: got %d %q order %q, want %d %q order %s (%s)", s.name, got.Status, got.Error, got.OrderID, s.status, s.code, first.OrderID, got.Body)
		}
		if s.state != "" && got.State != s.state {
			t.Fatalf("%s: status %q, want %q", s.name, got.State, s.state)
		}
	}
	if got := h.myOrder("bob"); got.Status != 404 || got.OrderID != "" {
		t.Fatalf("bob's my order: %d %s, want 404 without an order id", got.Status, got.Body)
	}
	if got := h.do("GET", fmt.Sprintf("/api/flash-sales/%d/order", h.saleID), ""); got.Status != 401 {
		t.Fatalf("my order without a token: %d, want 401", got.Status)
	}
	if la, lb := h.left(a), h.left(b); la != 2 || lb != 3 {
		t.Fatalf("stock after the replays: %d and %d left, want 2 and 3 (one unit taken, once)", la, lb)
	}

	// Persisted: PENDING with its deadline, from PostgreSQL's row.
	expires := h.persist(first.OrderID, a, "alice")
	got := h.myOrder("alice")
	if got.Status != 200 || got.OrderID != first.OrderID || got.State != "PENDING" || got.ItemID != a ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) {
		t.Fatalf("my order once persisted: %s, want PENDING, item %d, expiresAt %s", got.Body, a, expires)
	}
	if r := h.do("POST", h.buyPath(a), "alice"); r.Status != 202 || r.OrderID != first.OrderID || r.State != "PENDING" {
		t.Fatalf("replay once persisted: %d %s, want 202 PENDING %s", r.Status, r.Body, first.OrderID)
	}

	// Redis lost the holders (a restart before the reload, which takes
	// the load's epoch key too): PostgreSQL still knows her active order.
	epoch := fmt.Sprintf("{fs:%d}:epoch", h.saleID)
	if err := h.redis.Do(ctx, h.redis.B().Del().Key(stock.HoldersKey(h.saleID), epoch).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if got := h.myOrder("alice"); got.Status != 200 || got.OrderID != first.OrderID || got.State != "PENDING" {
		t.Fatalf("my order with no Redis holder: %s, want PENDING %s from PostgreSQL", got.Body, first.OrderID)
	}

	// A reservation nobody confirmed (no row, no accepted record): its id
	// comes with a 503 to ask again, never a 202 or a 404.
	stray := uuid.Must(uuid.NewV7()).String()
	if _, err := h.stock.Reserve(ctx, h.saleID, b, "carol", stray); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]answer{
		"purchase": h.do("POST", h.buyPath(b), "carol"),
		"my order": h.myOrder("carol").answer,
	} {
		if got.Status != 503 || got.Error != "UNAVAILABLE" || got.OrderID != stray || got.Retry == "" {
			t.Errorf("%s with an unconfirmed reservation: %d %s, want 503 UNAVAILABLE with order %s and Retry-After", name, got.Status, got.Body, stray)
		}
	}
}

// Once the item's sold-out flag is up, the gateway answers 410 SOLD_OUT
// from memory, before it reads the token (refusing costs no Redis round
// trip): a retry of a lost answer is refused too, and her order is found by
// the "my order" call, which the sale page makes after a failed Buy and on
// load (README, "Lost answers").
func TestRetryAfterSellOutFindsTheOrderByMyOrder(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_LIMIT_PURCHASE_USER": "off"}})
	a := h.items[0]
	won := h.do("POST", h.buyPath(a), "alice")
	if won.Status != 202 {
		t.Fatalf("alice's purchase: %d %s", won.Status, won.Body)
	}
	if got := h.do("POST", h.buyPath(a), "bob"); got.Status != 410 || got.Error != "SOLD_OUT" {
		t.Fatalf("bob after the last unit: %d %s, want 410 SOLD_OUT", got.Status, got.Body)
	}
	retry := h.do("POST", h.buyPath(a), "alice")
	if retry.Status != 410 || retry.Error != "SOLD_OUT" || !strings.Contains(string(retry.Body), "/order") {
		t.Fatalf("alice's retry after the sell-out: %d %s, want the documented 410 SOLD_OUT naming the my-order call", retry.Status, retry.Body)
	}
	if got := h.myOrder("alice"); got.Status != 200 || got.OrderID != won.OrderID {
		t.Fatalf("alice's my order after the sell-out: %d %s, want 200 with %s", got.Status, got.Body, won.OrderID)
	}
}

// The "my order" call is rate-limited per user as her other order
// requests are (the poll rule, her order bucket), not by the queue's
// rule, which an operator tightens against join floods.
func TestMyOrderIsRateLimited(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_LIMIT_POLL_USER": "2/2", "FLASHSALE_LIMIT_QUEUE_USER": "0.001/1", "FLASHSALE_LIMIT_QUEUE_IP": "0.001/1"}})
	for i := range 2 {
		if got := h.myOrder("alice"); got.Status != 404 {
			t.Fatalf("call %d within the poll rule's burst (the queue's rules tight): %d, want 404", i+1, got.Status)
		}
	}
	if got := h.myOrder("alice"); got.Status != http.StatusTooManyRequests || got.Retry == "" {
		t.Fatalf("third call: %d retry %q, want 429 with Retry-After", got.Status, got.Retry)
	}
	if got := h.myOrder("bob"); got.Status != 404 {
		t.Fatalf("another user: %d, want 404 (the limit is per user)", got.Status)
	}
}
