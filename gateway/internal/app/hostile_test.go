package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"flashsale/gateway/internal/catalog"
)

func signed(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Hostile input gets the documented status and JSON error, never a panic,
// never a log line per request, never a change in stock.
func TestHostileInput(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{5}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_LIMIT_PURCHASE_IP": "off", "FLASHSALE_LIMIT_PURCHASE_USER": "off"}})
	item := h.items[0]
	buy := h.buyPath(item)
	now := time.Now()
	valid := token(t, "mallory")
	exp := func(d time.Duration) jwt.MapClaims {
		return jwt.MapClaims{"sub": "mallory", "iss": "flashsale", "exp": now.Add(d).Unix()}
	}
	gate := catalog.Gate(gateKey, h.saleID)
	const uuidV4 = "6f1c2a9e-3b7d-4c2e-9a5f-0d8e7b6a5c4d"

	tests := []struct {
		name   string
		method string
		path   string
		auth   string // full Authorization header value
		header map[string]string
		body   string
		want   int
		code   string // JSON error code; "" for non-JSON answers from the HTTP layer
	}{
		{"no Authorization", "POST", buy, "", nil, "", 401, "UNAUTHORIZED"},
		{"not a bearer", "POST", buy, "Basic " + valid, nil, "", 401, "UNAUTHORIZED"},
		{"malformed JWT", "POST", buy, "Bearer abc.def", nil, "", 401, "UNAUTHORIZED"},
		{"truncated JWT", "POST", buy, "Bearer " + valid[:len(valid)-10], nil, "", 401, "UNAUTHORIZED"},
		{"oversized JWT", "POST", buy, "Bearer " + strings.Repeat("a", 5000), nil, "", 401, "UNAUTHORIZED"},
		{"alg none", "POST", buy, "Bearer " + signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, exp(time.Hour)), nil, "", 401, "UNAUTHORIZED"},
		{"signed with another key", "POST", buy, "Bearer " + signed(t, jwt.SigningMethodHS256, []byte("another-key-another-key-another-key!!"), exp(time.Hour)), nil, "", 401, "UNAUTHORIZED"},
		{"signed with another algorithm", "POST", buy, "Bearer " + signed(t, jwt.SigningMethodHS384, jwtKey, exp(time.Hour)), nil, "", 401, "UNAUTHORIZED"},
		{"expired token", "POST", buy, "Bearer " + signed(t, jwt.SigningMethodHS256, jwtKey, exp(-time.Minute)), nil, "", 401, "UNAUTHORIZED"},
		{"not yet valid token", "POST", buy, "Bearer " + signed(t, jwt.SigningMethodHS256, jwtKey, jwt.MapClaims{"sub": "m", "iss": "flashsale", "exp": now.Add(2 * time.Hour).Unix(), "nbf": now.Add(time.Hour).Unix()}), nil, "", 401, "UNAUTHORIZED"},
		{"guessed gate", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", h.saleID, strings.Repeat("f", 32), item), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"gate of another sale", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/%d/purchase", h.saleID, catalog.Gate(gateKey, h.saleID+1), item), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"non-numeric item", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/x1/purchase", h.saleID, gate), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"negative item", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/-5/purchase", h.saleID, gate), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		// One URL per item: the path as sent, as for every other route.
		{"sale id percent-encoded", "POST", fmt.Sprintf("/api/flash-sales/%%%X%s/g/%s/items/%d/purchase", fmt.Sprint(h.saleID)[0], fmt.Sprint(h.saleID)[1:], gate, item), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"huge item", "POST", fmt.Sprintf("/api/flash-sales/%d/g/%s/items/123456789012345678901234567890/purchase", h.saleID, gate), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"unknown sale", "GET", "/api/flash-sales/987654321", "", nil, "", 404, "NOT_FOUND"},
		{"zero sale", "GET", "/api/flash-sales/0", "", nil, "", 404, "NOT_FOUND"},
		{"wrong method on purchase", "DELETE", buy, "Bearer " + valid, nil, "", 405, "METHOD_NOT_ALLOWED"},
		{"wrong method on sale", "POST", fmt.Sprintf("/api/flash-sales/%d", h.saleID), "", nil, "", 405, "METHOD_NOT_ALLOWED"},
		{"admin route on the public listener", "GET", "/admin/limits", "Bearer test-admin-token-0123", nil, "", 404, "NOT_FOUND"},
		{"metrics on the public listener", "GET", "/metrics", "", nil, "", 404, "NOT_FOUND"},
		{"oversized body", "POST", buy, "Bearer " + valid, nil, strings.Repeat("x", 8<<10), 413, "PAYLOAD_TOO_LARGE"},
		{"oversized headers", "POST", buy, "Bearer " + valid, map[string]string{"X-Junk": strings.Repeat("j", 16<<10)}, "", 431, "HEADERS_TOO_LARGE"},
		{"queue of a sale without queue", "POST", fmt.Sprintf("/api/flash-sales/%d/queue", h.saleID), "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		// The order service is not running in this harness: a request the
		// gateway forwards gets 503; every one below is answered before.
		{"order id not a uuid", "GET", "/api/flash-sales/orders/not-a-uuid", "Bearer " + valid, nil, "", 400, "INVALID_ORDER_ID"},
		{"order path climbing out, encoded", "GET", "/api/flash-sales/orders/..%2F..%2F..%2Freadyz", "Bearer " + valid, nil, "", 400, "INVALID_ORDER_ID"},
		{"order action climbing out, encoded", "POST", "/api/flash-sales/orders/" + uuidV4 + "/..%2F..%2F..%2F..%2Fmetrics", "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"order id in another spelling", "GET", "/api/flash-sales/orders/" + strings.ToUpper(uuidV4), "Bearer " + valid, nil, "", 503, "UNAVAILABLE"},
		{"order action unknown", "POST", "/api/flash-sales/orders/" + uuidV4 + "/refund", "Bearer " + valid, nil, "", 404, "NOT_FOUND"},
		{"order without a token", "GET", "/api/flash-sales/orders/" + uuidV4, "", nil, "", 401, "UNAUTHORIZED"},
		{"order with a forged token", "POST", "/api/flash-sales/orders/" + uuidV4 + "/pay", "Bearer " + signed(t, jwt.SigningMethodHS256, []byte("another-key-another-key-another-key!!"), exp(time.Hour)), nil, "", 401, "UNAUTHORIZED"},
		{"order forwarded", "POST", "/api/flash-sales/orders/" + uuidV4 + "/cancel", "Bearer " + valid, nil, "", 503, "UNAVAILABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A request the server refuses before reading it whole (oversized
			// headers or body) races the client still writing it: the client
			// may see a broken pipe or a reset instead of the answer. That is
			// the transport, not the answer under test: tried again, up to
			// three times.
			var resp *http.Response
			var err error
			for range 3 {
				req, _ := http.NewRequest(tt.method, h.base+tt.path, strings.NewReader(tt.body))
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				if resp, err = http.DefaultClient.Do(req); !cutOffWhileWriting(err) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			if tt.code != "" && !strings.Contains(string(body), `"error":"`+tt.code+`"`) {
				t.Fatalf("body %s, want error %s", body, tt.code)
			}
		})
	}
	admin := []struct {
		name, auth string
	}{{"admin without credential", ""}, {"admin with a wrong credential", "Bearer nope-nope-nope-nope"}, {"admin with a shopper token", "Bearer " + valid}}
	for _, a := range admin {
		req, _ := http.NewRequest("PUT", h.admin+"/admin/limits", strings.NewReader(`{"purchase":{"user":{"rate":0,"burst":0}}}`))
		if a.auth != "" {
			req.Header.Set("Authorization", a.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s: %d, want 401", a.name, resp.StatusCode)
		}
	}
	if left := h.left(item); left != 5 {
		t.Errorf("hostile requests changed the stock: %d left, want 5", left)
	}
	if n := h.gw.Metrics().Purchases("accepted"); n != 0 {
		t.Errorf("%d purchases accepted from hostile input", n)
	}
	if logs := h.logs.String(); strings.Count(logs, "\n") > 3 { // start-up lines only
		t.Errorf("hostile requests were logged:\n%s", logs)
	}
}

// A client that sends half a request and stalls is cut off by the read
// timeout instead of holding the connection.
func TestSlowClientIsCutOff(t *testing.T) {
	h := newHarness(t, harnessOpts{quantities: []int{1}, startsIn: -time.Minute,
		env: map[string]string{"FLASHSALE_READ_TIMEOUT": "300ms"}})
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bea", h.buyPath(h.items[0]))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = bufio.NewReader(c).ReadString('\n')
	if err == nil {
		// fasthttp may answer 408 before closing; either way the connection ends
		if _, err = io.ReadAll(c); err != nil {
			t.Fatalf("connection not closed: %v", err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("stalled client held the connection for %v", d)
	}
	if h.left(h.items[0]) != 1 {
		t.Fatal("stock changed")
	}
}

// cutOffWhileWriting reports whether err is the server closing the
// connection while the client still wrote the request (a broken pipe, or
// a reset of the connection).
func cutOffWhileWriting(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "connection reset"))
}
