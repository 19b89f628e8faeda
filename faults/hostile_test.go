package faults

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/pkg/auth"
	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// Hostile input against the real binaries, through the listeners a
// deployment exposes: shoppers' order endpoints reached through the
// gateway's proxy, the order service's own listeners, the admin listeners,
// slow and greedy clients. (The gateway's parser-level cases, JWT shapes
// and admission tokens are tested in-process by gateway/internal/app.)
// Each gets its documented status and JSON error, and nothing changes:
// stock, orders, and no log line per request.
func TestHostileInputOnRealBinaries(t *testing.T) {
	r := &row{Fault: "8. hostile input on the real binaries",
		Injected: "other shoppers' order ids (poll, pay, cancel), malformed ids, missing/forged/alg-none/expired tokens, admin routes without or with wrong credentials and on public listeners, oversized body, wrong methods, a stalled half request, connections beyond FLASHSALE_MAX_CONNS_PER_IP"}
	record(t, r)
	const maxConns = 20
	const readTimeout = 500 * time.Millisecond
	s := harness.Start(t, harness.Options{Env: baseEnv(map[string]string{
		"FLASHSALE_READ_TIMEOUT":     readTimeout.String(),
		"FLASHSALE_MAX_CONNS_PER_IP": fmt.Sprint(maxConns),
	})})
	d := dial(t)
	ctx := testenv.Context(t)
	const qty = 5
	sl := openSale(t, s, qty)
	if a := sl.buy(ctx, "alice-"+sl.prefix); a.code != http.StatusAccepted {
		t.Fatalf("alice's purchase: %d %s", a.code, a.errCode)
	}
	alice := sl.where(nil)[0]
	d.waitPersisted(t, sl.id, sl.acceptedCopy(), 30*time.Second)
	// harness.Stack.Log keeps the last 8000 bytes: the count is exact only
	// while the logs are shorter, which start-up logs at info level are.
	logLines := func() int {
		g, o := s.Log("gateway"), s.Log("ordersvc")
		if len(g) >= 8000 || len(o) >= 8000 {
			t.Fatalf("service logs longer than harness.Stack.Log returns; cannot count lines")
		}
		return strings.Count(g, "\n") + strings.Count(o, "\n")
	}
	linesBefore := logLines()

	bob := "Bearer " + token(t, "bob-"+sl.prefix)
	now := time.Now()
	b64 := base64.RawURLEncoding.EncodeToString
	algNone := "Bearer " + b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		b64([]byte(fmt.Sprintf(`{"sub":%q,"iss":"flashsale","exp":%d}`, alice.user, now.Add(time.Hour).Unix()))) + "."
	forged, err := auth.MintHS256([]byte("not-the-key-not-the-key-not-the-key!!"), alice.user, "flashsale", "", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := auth.MintHS256(harness.JWTKey, alice.user, "flashsale", "", time.Minute, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	order := s.GatewayURL + "/api/flash-sales/orders/" + alice.orderID
	tests := []struct {
		name, method, url, auth, body string
		want                          int
		code                          string
	}{
		{"poll another shopper's order", "GET", order, bob, "", 404, "NOT_FOUND"},
		{"pay another shopper's order", "POST", order + "/pay", bob, `{"paymentRef":"pay-1"}`, 404, "NOT_FOUND"},
		{"cancel another shopper's order", "POST", order + "/cancel", bob, "", 404, "NOT_FOUND"},
		{"poll with alg none as the owner", "GET", order, algNone, "", 401, "UNAUTHORIZED"},
		{"cancel with a token signed by another key", "POST", order + "/cancel", "Bearer " + forged, "", 401, "UNAUTHORIZED"},
		{"cancel with an expired token", "POST", order + "/cancel", "Bearer " + expired, "", 401, "UNAUTHORIZED"},
		{"poll without a token", "GET", order, "", "", 401, "UNAUTHORIZED"},
		{"poll an id that is not a UUID", "GET", s.GatewayURL + "/api/flash-sales/orders/1%20OR%201=1", bob, "", 400, "INVALID_ORDER_ID"},
		{"poll an unknown UUID", "GET", s.GatewayURL + "/api/flash-sales/orders/" + uuid.NewString(), bob, "", 404, "NOT_FOUND"},
		{"unknown order action", "POST", order + "/refund", bob, "", 404, "NOT_FOUND"},
		// The order service's listener also answers /metrics and /readyz;
		// an encoded path must not climb out of the order routes to them.
		{"order path climbing to the order service's metrics", "GET", s.GatewayURL + "/api/flash-sales/orders/..%2F..%2F..%2Fmetrics", bob, "", 400, "INVALID_ORDER_ID"},
		{"order path climbing to the order service's readyz", "GET", s.GatewayURL + "/api/flash-sales/orders/%2e%2e%2f%2e%2e%2f%2e%2e%2freadyz", bob, "", 400, "INVALID_ORDER_ID"},
		{"order action climbing to the order service's metrics", "POST", order + "/..%2F..%2F..%2F..%2Fmetrics", bob, "", 404, "NOT_FOUND"},
		{"purchase with alg none", "POST", sl.url, algNone, "", 401, "UNAUTHORIZED"},
		{"purchase with a forged token", "POST", sl.url, "Bearer " + forged, "", 401, "UNAUTHORIZED"},
		{"purchase on a guessed gate", "POST", strings.Replace(sl.url, sl.path, fmt.Sprintf("/api/flash-sales/%d/g/%s", sl.id, strings.Repeat("0", 32)), 1), bob, "", 404, "NOT_FOUND"},
		{"purchase with GET", "GET", sl.url, bob, "", 405, "METHOD_NOT_ALLOWED"},
		{"gateway admin route on the public listener", "PUT", s.GatewayURL + "/admin/limits", "Bearer " + harness.AdminToken, `{}`, 404, "NOT_FOUND"},
		{"gateway admin without credential", "PUT", s.GatewayAdminURL + "/admin/limits", "", `{"purchase":{"user":{"rate":0,"burst":1}}}`, 401, "UNAUTHORIZED"},
		{"gateway admin with a shopper token", "PUT", s.GatewayAdminURL + "/admin/limits", bob, `{"purchase":{"user":{"rate":0,"burst":1}}}`, 401, "UNAUTHORIZED"},
		// the dashboard's data answered 403 once, the other admin routes 401
		{"gateway dashboard without credential", "GET", s.GatewayAdminURL + "/admin/dashboard", "", "", 401, "UNAUTHORIZED"},
		{"order service admin without credential", "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", s.AdminURL, sl.id), "", "", 401, "UNAUTHORIZED"},
		{"order service admin with a wrong credential", "POST", fmt.Sprintf("%s/admin/sales/%d/reconcile?repair=true", s.AdminURL, sl.id), "Bearer " + harness.AdminToken + "x", "", 401, "UNAUTHORIZED"},
		{"order service admin with a shopper token", "POST", s.AdminURL + "/admin/sales", bob, `{"name":"x"}`, 401, "UNAUTHORIZED"},
		{"order service admin route on its public listener", "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", s.OrdersURL, sl.id), "Bearer " + harness.AdminToken, "", 404, "NOT_FOUND"},
	}
	answered := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, tt.url, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(b), `"error":"`+tt.code+`"`) {
				t.Errorf("got %d %s, want %d with error %s", resp.StatusCode, b, tt.want, tt.code)
				return
			}
			// Every admin listener challenges alike (pkg/adminauth).
			if strings.Contains(tt.url, "/admin/") && tt.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
				return
			}
			answered++
		})
	}

	// An oversized body is refused from its Content-Length, before it is
	// read. (Sent raw: a client still writing the body races the server's
	// close and may see a reset instead of the answer.)
	oc, err := net.Dial("tcp", strings.TrimPrefix(s.GatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(oc, "POST %s/pay HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		strings.TrimPrefix(order, s.GatewayURL), bob, 64<<10)
	_ = oc.SetReadDeadline(time.Now().Add(5 * time.Second))
	oresp, err := http.ReadResponse(bufio.NewReader(oc), nil)
	if err != nil {
		t.Fatalf("oversized body: %v", err)
	}
	ob, _ := io.ReadAll(oresp.Body)
	oc.Close()
	if oresp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(ob), `"error":"PAYLOAD_TOO_LARGE"`) {
		t.Errorf("oversized body: %d %s, want 413 PAYLOAD_TOO_LARGE", oresp.StatusCode, ob)
	} else {
		answered++
	}

	// A client that sends half a request and stalls is cut off by the
	// read timeout instead of holding a connection.
	c, err := net.Dial("tcp", strings.TrimPrefix(s.GatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bea", strings.TrimPrefix(sl.url, s.GatewayURL))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	stalled := time.Now()
	_, _ = io.ReadAll(bufio.NewReader(c))
	cutOff := time.Since(stalled)
	c.Close()
	if cutOff > 2*time.Second {
		t.Errorf("a stalled half request held its connection for %v, want the 500ms read timeout", cutOff)
	}

	// Connections beyond the per-IP cap are refused while the ones held
	// stay up. The test's own keep-alive connections (its client's and the
	// harness's) count too: closed first, they may still count for a
	// moment, so a round that was refused early is tried again.
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	var status string
	for round := 1; ; round++ {
		var served int
		served, status = connsUntilRefused(t, strings.TrimPrefix(s.GatewayURL, "http://"), maxConns)
		if served > maxConns {
			t.Errorf("connection %d from one IP was served (%q) while %d were held, want 429 with FLASHSALE_MAX_CONNS_PER_IP=%d", served, strings.TrimSpace(status), maxConns, maxConns)
			break
		}
		if served == maxConns && strings.HasPrefix(status, "429 ") {
			// The API's refusal, not a bare status line: JSON, Retry-After.
			if want := `429 Retry-After=1 Content-Type=application/json {"error":"RATE_LIMITED"`; !strings.HasPrefix(status, want) {
				t.Errorf("the refused connection was answered %q, want %q…", status, want)
			}
			break
		}
		if round == 3 {
			t.Fatalf("each of %d rounds: %d connections served, then %q; want %d, then 429", round, served, strings.TrimSpace(status), maxConns)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Nothing changed: one unit sold (alice's), one order, still hers and
	// PENDING, and no log line per hostile request.
	time.Sleep(200 * time.Millisecond)
	left, err := d.stock.Left(ctx, sl.id, sl.item)
	if err != nil {
		t.Fatal(err)
	}
	total, active, _, err := d.rows(ctx, sl.id)
	if err != nil {
		t.Fatal(err)
	}
	code, status2, err := poll(ctx, s, alice.orderID, token(t, alice.user))
	if err != nil {
		t.Fatal(err)
	}
	if left != qty-1 || total != 1 || active != 1 || code != 200 || status2 != "PENDING" {
		t.Errorf("after the hostile requests: %d left, %d orders (%d active), alice's order %d %s; want %d left, 1 active order, PENDING",
			left, total, active, code, status2, qty-1)
	}
	newLines := logLines() - linesBefore

	// The buyer is whoever the verified token names, never a body field.
	req, err := http.NewRequestWithContext(ctx, "POST", sl.url, strings.NewReader(fmt.Sprintf(`{"userId":%q,"user":%q,"sub":%q}`, alice.user, alice.user, alice.user)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bob)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var placed struct{ OrderID string }
	_ = json.NewDecoder(resp.Body).Decode(&placed)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("bob's purchase naming alice in the body: %d, want 202 for bob", resp.StatusCode)
	}
	sl.mu.Lock()
	sl.accepted[placed.OrderID] = "bob-" + sl.prefix
	sl.mu.Unlock()
	d.waitPersisted(t, sl.id, sl.acceptedCopy(), 30*time.Second)
	var buyer string
	if err := d.pool.QueryRow(ctx, `SELECT user_id FROM flash_sale_order WHERE id = $1`, placed.OrderID).Scan(&buyer); err != nil {
		t.Fatal(err)
	}
	if buyer != "bob-"+sl.prefix {
		t.Errorf("a body naming alice made the order %s's, want bob's", buyer)
	}

	// No secret reaches either service's log.
	for _, name := range []string{"gateway", "ordersvc"} {
		logs := s.Log(name)
		for what, secret := range map[string]string{"JWT key": string(harness.JWTKey), "gate key": string(harness.GateKey), "admin token": harness.AdminToken} {
			if strings.Contains(logs, secret) {
				t.Errorf("the %s log contains the %s", name, what)
			}
		}
	}
	if newLines > 2 {
		t.Errorf("%d log lines for %d hostile requests:\n%s", newLines, len(tests), s.Log("gateway"))
	}
	r.Answered = fmt.Sprintf("%d of %d requests (64KiB body included) got their documented status and JSON error (404 for other shoppers' orders, 401 for bad tokens and admin credentials, 404 for admin routes on public listeners, 400/413/405); stalled half request cut off after %v; connection %d from one IP: %q; %d log lines",
		answered, len(tests)+1, cutOff.Round(10*time.Millisecond), maxConns+1, strings.TrimSpace(status), newLines)
	r.Audit = fmt.Sprintf("stock %d left of %d, %d order (alice's, %s): unchanged by hostile requests; then bob's purchase with alice named in the body is bob's; no secret in either log; audit %s", left, qty, total, status2, sl.audit(d))
}

// connsUntilRefused opens connections to addr one at a time, each asking
// for /healthz and then held, until one is not served or maxConns+1 were.
// It returns how many were served and the last status line. Each is
// answered before the next is dialled: a dial returns once the client's
// side of the handshake is done, maybe before the gateway has accepted
// (and counted) the connection, and on a loaded machine a later one could
// then be let in first. Answered, each is a keep-alive connection the
// gateway keeps for FLASHSALE_IDLE_TIMEOUT (60 s), far longer than this.
func connsUntilRefused(t *testing.T, addr string, maxConns int) (served int, status string) {
	t.Helper()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxConns + 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return served, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			// The refusal as one line: status, the headers that matter, body.
			return served, fmt.Sprintf("%d Retry-After=%s Content-Type=%s %s", resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
		}
		served++
	}
	return served, status
}
