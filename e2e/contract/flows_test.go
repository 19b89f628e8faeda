package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"flashsale/pkg/adminapi"
)

func (c *contract) buy(path string, itemID int64, token string, header map[string]string) (int, []byte) {
	c.t.Helper()
	return c.r.do(call{on: gatewayPublic, method: http.MethodPost, path: fmt.Sprintf("%s/items/%d/purchase", path, itemID),
		token: token, header: header})
}

// purchases: every answer of the purchase call, and of "my order".
func (c *contract) purchases(sl sale) {
	r, t := c.r, c.t
	one, five := sl.Items[0].ID, sl.Items[1].ID
	if code, b := c.buy(sl.path, one, mint(t, "u-buyer"), nil); code != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", code, b)
	}
	if code, b := c.buy(sl.path, one, mint(t, "u-late"), nil); code != http.StatusGone {
		t.Fatalf("purchase of a sold-out item: %d %s, want 410", code, b)
	}
	if code, b := c.buy(sl.path, five, mint(t, "u-buyer"), nil); code != http.StatusConflict {
		t.Fatalf("purchase of a second item: %d %s, want 409", code, b)
	}
	if code, b := c.buy(sl.path, five, "", nil); code != http.StatusUnauthorized {
		t.Fatalf("purchase without a token: %d %s, want 401", code, b)
	}
	wrongGate := fmt.Sprintf("/api/flash-sales/%d/g/not-the-gate", sl.ID)
	if code, b := c.buy(wrongGate, five, mint(t, "u-x"), nil); code != http.StatusNotFound {
		t.Fatalf("purchase on a wrong gate: %d %s, want 404", code, b)
	}
	// Ids in one canonical form: "0<id>" is no sale (FuzzMatchPurchase's finding).
	zero := "/api/flash-sales/0" + sl.path[len("/api/flash-sales/"):]
	if code, b := c.buy(zero, five, mint(t, "u-x"), nil); code != http.StatusNotFound {
		t.Fatalf("purchase with a leading zero in the sale id: %d %s, want 404", code, b)
	}
	r.want(http.StatusNotFound, call{on: gatewayPublic, method: http.MethodGet, path: fmt.Sprintf("/api/flash-sales/0%d", sl.ID)})

	// A sale whose stock was never loaded: 503, never a false SOLD_OUT.
	unloaded := c.createSale(adminapi.SaleQueue{}, 3)
	path := c.awaitSale(unloaded.ID, true)
	if code, b := c.buy(path, unloaded.Items[0].ID, mint(t, "u-x"), nil); code != http.StatusServiceUnavailable {
		t.Fatalf("purchase before load-stock: %d %s, want 503", code, b)
	}

	my := fmt.Sprintf("/api/flash-sales/%d/order", sl.ID)
	r.want(http.StatusOK, call{on: gatewayPublic, method: http.MethodGet, path: my, token: mint(t, "u-buyer")})
	r.want(http.StatusNotFound, call{on: gatewayPublic, method: http.MethodGet, path: my, token: mint(t, "u-nobody")})
	r.want(http.StatusUnauthorized, call{on: gatewayPublic, method: http.MethodGet, path: my})
}

// createSale creates an open sale without loading its stock.
func (c *contract) createSale(q adminapi.SaleQueue, quantities ...int64) adminapi.Sale {
	c.t.Helper()
	ns := adminapi.NewSale{Name: c.t.Name(), StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour),
		PaymentTTLSeconds: 600, Queue: &q}
	for i, n := range quantities {
		ns.Items = append(ns.Items, adminapi.NewSaleItem{ProductID: fmt.Sprintf("sku-%d", i), Name: fmt.Sprintf("item %d", i), Price: "9.99", Quantity: n})
	}
	var v adminapi.Sale
	b := c.r.want(http.StatusCreated, call{on: ordersvcAdmin, method: http.MethodPost, path: "/admin/sales", token: c.admin, body: mustJSON(c.t, ns)})
	if err := json.Unmarshal(b, &v); err != nil {
		c.t.Fatal(err)
	}
	return v
}

// order buys one unit of item as user and waits until it is persisted.
func (c *contract) order(sl sale, itemID int64, user string) string {
	c.t.Helper()
	code, b := c.buy(sl.path, itemID, mint(c.t, user), nil)
	var v struct {
		OrderID string `json:"orderId"`
	}
	if code != http.StatusAccepted || json.Unmarshal(b, &v) != nil {
		c.t.Fatalf("purchase as %s: %d %s", user, code, b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, b := c.r.do(call{on: ordersvcPublic, method: http.MethodGet, path: "/api/flash-sales/orders/" + v.OrderID, token: mint(c.t, user)})
		var o struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(b, &o) == nil && o.Status == "PENDING" {
			return v.OrderID
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("order %s never persisted: %s", v.OrderID, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// orders: polling, pay, cancel on both the gateway and the order service,
// the payment webhook, and the order service's admin calls on a sale with
// orders.
func (c *contract) orders(sl sale) {
	r, t := c.r, c.t
	five := sl.Items[1].ID
	for i, on := range []string{gatewayPublic, ordersvcPublic} {
		u := fmt.Sprintf("u-orders-%d", i)
		tok := mint(t, u)
		id := c.order(sl, five, u)
		base := "/api/flash-sales/orders/" + id
		r.want(http.StatusOK, call{on: on, method: http.MethodGet, path: base, token: tok})
		r.want(http.StatusNotFound, call{on: on, method: http.MethodGet, path: base, token: mint(t, "u-stranger")})
		r.want(http.StatusNotFound, call{on: on, method: http.MethodGet, path: "/api/flash-sales/orders/" + uuid.NewString(), token: tok})
		r.want(http.StatusBadRequest, call{on: on, method: http.MethodGet, path: "/api/flash-sales/orders/not-a-uuid", token: tok})
		r.want(http.StatusUnauthorized, call{on: on, method: http.MethodGet, path: base})
		pay := func(ref string) []byte { return mustJSON(t, map[string]string{"paymentRef": ref}) }
		r.want(http.StatusBadRequest, call{on: on, method: http.MethodPost, path: base + "/pay", token: tok, body: []byte(`{"paymentRef":""}`)})
		r.want(http.StatusBadRequest, call{on: on, method: http.MethodPost, path: "/api/flash-sales/orders/x/pay", token: tok, body: pay("r")})
		r.want(http.StatusUnauthorized, call{on: on, method: http.MethodPost, path: base + "/pay", body: pay("r")})
		r.want(http.StatusNotFound, call{on: on, method: http.MethodPost, path: "/api/flash-sales/orders/" + uuid.NewString() + "/pay", token: tok, body: pay("r")})
		r.want(http.StatusOK, call{on: on, method: http.MethodPost, path: base + "/pay", token: tok, body: pay("ref-" + id)})
		r.want(http.StatusOK, call{on: on, method: http.MethodPost, path: base + "/pay", token: tok, body: pay("ref-" + id)})
		r.want(http.StatusConflict, call{on: on, method: http.MethodPost, path: base + "/pay", token: tok, body: pay("another-ref")})
		r.want(http.StatusConflict, call{on: on, method: http.MethodPost, path: base + "/cancel", token: tok})
		r.want(http.StatusBadRequest, call{on: on, method: http.MethodPost, path: "/api/flash-sales/orders/x/cancel", token: tok})
		r.want(http.StatusUnauthorized, call{on: on, method: http.MethodPost, path: base + "/cancel"})
		r.want(http.StatusNotFound, call{on: on, method: http.MethodPost, path: "/api/flash-sales/orders/" + uuid.NewString() + "/cancel", token: tok})

		u2 := fmt.Sprintf("u-cancel-%d", i)
		id2 := c.order(sl, five, u2)
		r.want(http.StatusOK, call{on: on, method: http.MethodPost, path: "/api/flash-sales/orders/" + id2 + "/cancel", token: mint(t, u2)})
	}

	// The payment provider's webhook.
	id := c.order(sl, five, "u-webhook")
	hook := func(want int, body []byte, sig string) {
		r.want(want, call{on: ordersvcAdmin, method: http.MethodPost, path: "/webhooks/payment", body: body,
			header: map[string]string{"X-Payment-Signature": sig}})
	}
	ok := mustJSON(t, map[string]string{"orderId": id, "paymentRef": "hook-" + id})
	hook(http.StatusUnauthorized, ok, "sha256=00")
	hook(http.StatusOK, ok, sign(ok))
	other := mustJSON(t, map[string]string{"orderId": id, "paymentRef": "hook-other"})
	hook(http.StatusConflict, other, sign(other))
	bad := []byte(`{"orderId":"x"}`)
	hook(http.StatusBadRequest, bad, sign(bad))
	none := mustJSON(t, map[string]string{"orderId": uuid.NewString(), "paymentRef": "r"})
	hook(http.StatusNotFound, none, sign(none))
	huge := append(bytes.Repeat([]byte(" "), 9<<10), ok...)
	hook(http.StatusRequestEntityTooLarge, huge, sign(huge))
	// The refused confirmations above (another reference, an unknown
	// order) are kept for a refund: listed, then settled.
	refused := func(want int, method, path string, body []byte) []byte {
		return r.want(want, call{on: ordersvcAdmin, method: method, path: path, token: c.admin, body: body})
	}
	if b := refused(http.StatusOK, http.MethodGet, "/admin/payments/refused?all=true", nil); !strings.Contains(string(b), `"hook-other"`) {
		t.Errorf("refused payments: %.300s, want hook-other among them", b)
	}
	refused(http.StatusBadRequest, http.MethodGet, "/admin/payments/refused?all=maybe", nil)
	refused(http.StatusOK, http.MethodPost, "/admin/payments/refused/settle", mustJSON(t, map[string]string{"paymentRef": "hook-other", "orderId": id, "resolution": "refunded"}))
	refused(http.StatusNotFound, http.MethodPost, "/admin/payments/refused/settle", mustJSON(t, map[string]string{"paymentRef": "never-refused-" + id, "orderId": id, "resolution": "refunded"}))
	refused(http.StatusBadRequest, http.MethodPost, "/admin/payments/refused/settle", []byte(`{"paymentRef":1}`))

	c.ordersvcAdmin(sl)
}

// ordersvcAdmin: the order service's operator calls.
func (c *contract) ordersvcAdmin(sl sale) {
	r := c.r
	id := strconv.FormatInt(sl.ID, 10)
	post := func(want int, path string, body []byte) []byte {
		return r.want(want, call{on: ordersvcAdmin, method: http.MethodPost, path: path, token: c.admin, body: body})
	}
	get := func(want int, path string) []byte {
		return r.want(want, call{on: ordersvcAdmin, method: http.MethodGet, path: path, token: c.admin})
	}
	post(http.StatusBadRequest, "/admin/sales", []byte(`{"name":""}`))
	c.createOnce()
	get(http.StatusOK, "/admin/sales/"+id)
	get(http.StatusNotFound, "/admin/sales/999999999")
	get(http.StatusBadRequest, "/admin/sales/0"+id)
	post(http.StatusNotFound, "/admin/sales/999999999/load-stock", nil)
	post(http.StatusBadRequest, "/admin/sales/x/load-stock", nil)
	// The sale is open and loaded: a second load would drop its
	// reservations in flight.
	if b := post(http.StatusConflict, "/admin/sales/"+id+"/load-stock", nil); !strings.Contains(string(b), `"SALE_LIVE"`) {
		c.t.Errorf("second load of an open sale: %s, want SALE_LIVE", b)
	}
	post(http.StatusBadRequest, "/admin/sales/"+id+"/load-stock?force=maybe", nil)
	post(http.StatusOK, "/admin/sales/"+id+"/reconcile", nil)
	post(http.StatusOK, "/admin/sales/"+id+"/reconcile?repair=true", nil)
	post(http.StatusBadRequest, "/admin/sales/"+id+"/reconcile?repair=maybe", nil)
	post(http.StatusBadRequest, "/admin/sales/"+id+"/reconcile?repair=", nil)
	post(http.StatusNotFound, "/admin/sales/999999999/reconcile", nil)
	var st adminapi.SaleStatus
	if err := json.Unmarshal(get(http.StatusOK, "/admin/sales/"+id+"/status"), &st); err != nil || st.SaleID != sl.ID || st.Reconcile == nil {
		c.t.Fatalf("status of sale %d after a reconcile: %+v %v", sl.ID, st, err)
	}
	get(http.StatusNotFound, "/admin/sales/999999999/status")
	get(http.StatusBadRequest, "/admin/sales/+1/status")
}

// createOnce: create-sale under an Idempotency-Key makes one sale; a retry
// gets it again, the key with another request 422.
func (c *contract) createOnce() {
	key := map[string]string{"Idempotency-Key": "contract-" + uuid.NewString()}
	ns := adminapi.NewSale{Name: c.t.Name() + "-once", StartsAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second),
		PaymentTTLSeconds: 600, Items: []adminapi.NewSaleItem{{ProductID: "sku", Name: "item", Price: "1.00", Quantity: 1}}}
	ns.EndsAt = ns.StartsAt.Add(time.Hour)
	create := func(want int, body []byte, h map[string]string) []byte {
		return c.r.want(want, call{on: ordersvcAdmin, method: http.MethodPost, path: "/admin/sales", token: c.admin, body: body, header: h})
	}
	var first, again adminapi.Sale
	if err := json.Unmarshal(create(http.StatusCreated, mustJSON(c.t, ns), key), &first); err != nil {
		c.t.Fatal(err)
	}
	// The same sale spelt otherwise (indented) is the same request.
	indented, err := json.MarshalIndent(ns, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	if err := json.Unmarshal(create(http.StatusCreated, indented, key), &again); err != nil {
		c.t.Fatal(err)
	}
	if again.ID != first.ID {
		c.t.Errorf("retry with the same Idempotency-Key: sale %d, want the first call's %d", again.ID, first.ID)
	}
	ns.Items[0].Quantity = 2
	create(http.StatusUnprocessableEntity, mustJSON(c.t, ns), key)
	create(http.StatusBadRequest, mustJSON(c.t, ns), map[string]string{"Idempotency-Key": "with space"})
}

// queue: the waiting room of a queued sale, and a sale with proof of work.
func (c *contract) queue(plain sale) {
	r, t := c.r, c.t
	q := c.openSale(adminapi.SaleQueue{Enabled: true, AdmissionRate: 1000}, 10)
	qp := fmt.Sprintf("/api/flash-sales/%d/queue", q.ID)
	tok := mint(t, "u-queue")
	r.want(http.StatusOK, call{on: gatewayPublic, method: http.MethodGet, path: qp + "/challenge", token: tok})
	r.want(http.StatusUnauthorized, call{on: gatewayPublic, method: http.MethodGet, path: qp + "/challenge"})
	r.want(http.StatusNotFound, call{on: gatewayPublic, method: http.MethodGet, path: fmt.Sprintf("/api/flash-sales/%d/queue/challenge", plain.ID), token: tok})
	var ticket struct {
		Ticket, State, PurchasePath, AdmissionToken string
	}
	if err := json.Unmarshal(r.want(http.StatusOK, call{on: gatewayPublic, method: http.MethodPost, path: qp, token: tok}), &ticket); err != nil {
		t.Fatal(err)
	}
	r.want(http.StatusUnauthorized, call{on: gatewayPublic, method: http.MethodPost, path: qp})
	r.want(http.StatusNotFound, call{on: gatewayPublic, method: http.MethodPost, path: fmt.Sprintf("/api/flash-sales/%d/queue", plain.ID), token: tok})
	r.want(http.StatusNotFound, call{on: gatewayPublic, method: http.MethodGet, path: qp + "/no-such-ticket", token: tok})
	r.want(http.StatusUnauthorized, call{on: gatewayPublic, method: http.MethodGet, path: qp + "/" + ticket.Ticket})
	deadline := time.Now().Add(15 * time.Second)
	for ticket.State != "ADMITTED" {
		if err := json.Unmarshal(r.want(http.StatusOK, call{on: gatewayPublic, method: http.MethodGet, path: qp + "/" + ticket.Ticket, token: tok}), &ticket); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("never admitted: %+v", ticket)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, b := c.buy(ticket.PurchasePath, q.Items[0].ID, tok, nil); code != http.StatusForbidden {
		t.Fatalf("purchase without the admission token: %d %s, want 403", code, b)
	}
	if code, b := c.buy(ticket.PurchasePath, q.Items[0].ID, tok, map[string]string{"X-Admission-Token": ticket.AdmissionToken}); code != http.StatusAccepted {
		t.Fatalf("purchase with the admission token: %d %s, want 202", code, b)
	}

	// A place not admitted (admission rate 0) and not polled for longer
	// than the grace period (1s here) is given up.
	stuck := c.openSale(adminapi.SaleQueue{Enabled: true}, 1)
	sp := fmt.Sprintf("/api/flash-sales/%d/queue", stuck.ID)
	late := mint(t, "u-queue-late")
	if err := json.Unmarshal(r.want(http.StatusOK, call{on: gatewayPublic, method: http.MethodPost, path: sp, token: late}), &ticket); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	// Admission reaches the place (GET .../queue advances it) and skips it.
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: fmt.Sprintf("/admin/sales/%d/admission-rate", stuck.ID), token: c.admin, body: []byte(`{"rate":1000}`)})
	time.Sleep(100 * time.Millisecond)
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodGet, path: fmt.Sprintf("/admin/sales/%d/queue", stuck.ID), token: c.admin})
	r.want(http.StatusGone, call{on: gatewayPublic, method: http.MethodGet, path: sp + "/" + ticket.Ticket, token: late})

	pow := c.openSale(adminapi.SaleQueue{Enabled: true, AdmissionRate: 1000, PowDifficulty: 8}, 1)
	r.want(http.StatusForbidden, call{on: gatewayPublic, method: http.MethodPost, path: fmt.Sprintf("/api/flash-sales/%d/queue", pow.ID), token: tok,
		body: []byte(`{"challenge":"x","nonce":"y"}`)})

	// The gateway's operator calls on the queue.
	ga := func(want int, method, path string, body []byte) []byte {
		return r.want(want, call{on: gatewayAdmin, method: method, path: path, token: c.admin, body: body})
	}
	ga(http.StatusOK, http.MethodGet, fmt.Sprintf("/admin/sales/%d/queue", q.ID), nil)
	ga(http.StatusNotFound, http.MethodGet, fmt.Sprintf("/admin/sales/%d/queue", plain.ID), nil)
	ga(http.StatusOK, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":500}`))
	ga(http.StatusBadRequest, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":-1}`))
	// A rate near 0 made every waiting shopper's ETA overflow; one past a
	// sale's own bound was taken here although creation refuses it.
	ga(http.StatusBadRequest, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":1e-300}`))
	ga(http.StatusBadRequest, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":1e308}`))
	ga(http.StatusOK, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":0}`)) // stops admitting
	ga(http.StatusOK, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", q.ID), []byte(`{"rate":500}`))
	ga(http.StatusNotFound, http.MethodPut, fmt.Sprintf("/admin/sales/%d/admission-rate", plain.ID), []byte(`{"rate":1}`))
}

// gatewayAdmin: limits, bypass, the dashboard's state.
func (c *contract) gatewayAdmin(sl sale) {
	ga := func(want int, method, path string, body []byte) []byte {
		return c.r.want(want, call{on: gatewayAdmin, method: method, path: path, token: c.admin, body: body})
	}
	ga(http.StatusOK, http.MethodGet, "/admin/limits", nil)
	ga(http.StatusOK, http.MethodPut, "/admin/limits", []byte(`{"purchase":{"user":{"rate":100,"burst":100}}}`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/limits", []byte(`{"purchase":{"user":{"rate":1,"burst":0}}}`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/limits", []byte(`not json`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/limits", []byte(`null`))                              // changed nothing, once answered 200
	ga(http.StatusBadRequest, http.MethodPut, "/admin/limits", []byte(`{"purchase":{"user":{"burst":5}}}`)) // no rate: once read as 0, limit off
	ga(http.StatusOK, http.MethodGet, "/admin/queue/bypass", nil)
	ga(http.StatusOK, http.MethodPut, "/admin/queue/bypass", []byte(`{"add":["u-vip"],"remove":["u-gone"]}`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/queue/bypass", []byte(`{"add":"u-vip"}`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/queue/bypass", []byte(`{"remove":[null]}`))
	ga(http.StatusBadRequest, http.MethodPut, "/admin/queue/bypass", []byte(`{"add":["u\u0007bell"]}`))          // no token's subject can be it
	ga(http.StatusBadRequest, http.MethodPut, "/admin/queue/bypass", []byte(`{"add":["u-x"],"remove":["u-x"]}`)) // which one is meant?
	ga(http.StatusConflict, http.MethodPut, "/admin/queue/bypass", []byte(`{"remove":["u-configured"]}`))
	ga(http.StatusOK, http.MethodGet, "/admin/dashboard", nil)
	ga(http.StatusOK, http.MethodGet, fmt.Sprintf("/admin/dashboard?sale=%d", sl.ID), nil)
	ga(http.StatusBadRequest, http.MethodGet, "/admin/dashboard?sale=0", nil)
}

// rateLimits: 429 on every rate-limited call, with one token per user.
func (c *contract) rateLimits(sl sale) {
	r, t := c.r, c.t
	tight := []byte(`{"purchase":{"user":{"rate":0.001,"burst":1}},"queue":{"user":{"rate":0.001,"burst":1}}}`)
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: "/admin/limits", token: c.admin, body: tight})
	twice := func(cl call) {
		r.do(cl)
		r.want(http.StatusTooManyRequests, cl)
	}
	twice(call{on: gatewayPublic, method: http.MethodPost, path: fmt.Sprintf("%s/items/%d/purchase", sl.path, sl.Items[1].ID), token: mint(t, "u-rl-buy")})
	q := c.openSale(adminapi.SaleQueue{Enabled: true, AdmissionRate: 1000}, 1)
	qp := fmt.Sprintf("/api/flash-sales/%d/queue", q.ID)
	twice(call{on: gatewayPublic, method: http.MethodPost, path: qp, token: mint(t, "u-rl-join")})
	// Ticket polls have a limit of their own (4/s, burst 10), which the
	// queue's tight rule does not touch: refused only past its burst.
	poll := call{on: gatewayPublic, method: http.MethodGet, path: qp + "/any-ticket", token: mint(t, "u-rl-poll")}
	for i := 0; ; i++ {
		code, b := r.do(poll)
		if code == http.StatusTooManyRequests {
			if i < 10 {
				t.Fatalf("ticket poll %d refused under the queue's tight rule: %s; want its own burst of 10 first", i+1, b)
			}
			break
		}
		if i == 20 {
			t.Fatalf("21 ticket polls at once, none refused: %d %s", code, b)
		}
	}
	// A shopper's order requests pass the poll rule, in a bucket apart
	// from her ticket polls'; tightened to its floor, the third of each
	// kind is refused.
	pollTight := []byte(`{"poll":{"user":{"rate":2,"burst":2}}}`)
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: "/admin/limits", token: c.admin, body: pollTight})
	order := "/api/flash-sales/orders/" + uuid.NewString()
	for _, cl := range []call{
		{on: gatewayPublic, method: http.MethodGet, path: order, token: mint(t, "u-rl-get-order")},
		{on: gatewayPublic, method: http.MethodPost, path: order + "/pay", token: mint(t, "u-rl-pay"), body: []byte(`{"paymentRef":"rl-pay"}`)},
		{on: gatewayPublic, method: http.MethodPost, path: order + "/cancel", token: mint(t, "u-rl-cancel")},
		{on: gatewayPublic, method: http.MethodGet, path: fmt.Sprintf("/api/flash-sales/%d/order", sl.ID), token: mint(t, "u-rl-order")},
	} {
		r.do(cl)
		r.do(cl)
		r.want(http.StatusTooManyRequests, cl)
	}
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: "/admin/limits", token: c.admin, body: []byte(`{"poll":{"user":{"rate":4,"burst":10}}}`)})
	// The challenge has the per-IP limit only (it costs no Redis call).
	ipTight := []byte(`{"queue":{"ip":{"rate":0.001,"burst":1}}}`)
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: "/admin/limits", token: c.admin, body: ipTight})
	twice(call{on: gatewayPublic, method: http.MethodGet, path: qp + "/challenge", token: mint(t, "u-rl-challenge")})
	loose := []byte(`{"purchase":{"user":{"rate":100,"burst":100}},"queue":{"user":{"rate":100,"burst":100},"ip":{"rate":0,"burst":0}}}`)
	r.want(http.StatusOK, call{on: gatewayAdmin, method: http.MethodPut, path: "/admin/limits", token: c.admin, body: loose})
}
