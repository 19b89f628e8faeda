package httpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// limitedServer serves "ok" on a loopback TCP port under cfg's connection
// limits and returns its address and the refusals it reported.
func limitedServer(t *testing.T, cfg Config) (addr string, refused func() []string) {
	t.Helper()
	var mu sync.Mutex
	var reasons []string
	srv := New("test", func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, cfg, slog.New(slog.DiscardHandler),
		OnConnRefused(func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := Shutdown(context.Background(), srv.Server, ln); err != nil {
			t.Error(err)
		}
		<-done
	})
	return ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(reasons) }
}

// get sends one request on a new keep-alive connection and returns the
// connection (still open when the answer was 200) and the answer.
func get(t *testing.T, addr string) (net.Conn, *http.Response, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return c, resp, body
}

// checkRefusal: the API's JSON error body with its code and a Retry-After.
func checkRefusal(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	var e struct{ Error, Message string }
	if resp.StatusCode != status || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &e) != nil || e.Error != code || e.Message == "" {
		t.Errorf("refused connection answered %d %v %s, want %d %s in JSON with Retry-After", resp.StatusCode, resp.Header, body, status, code)
	}
}

// Past MaxConnsPerIP an address's new connection is answered 429
// RATE_LIMITED in JSON with Retry-After, and counted; once one of its
// connections closes, the next is served.
func TestConnectionsPerIP(t *testing.T) {
	addr, refused := limitedServer(t, Config{ReadTimeout: 5 * time.Second, WriteTimeout: time.Second, IdleTimeout: 5 * time.Second,
		Concurrency: 100, MaxConnsPerIP: 2})
	first, resp, _ := get(t, addr)
	if resp.StatusCode != 200 {
		t.Fatalf("first connection: %d", resp.StatusCode)
	}
	if _, resp, _ := get(t, addr); resp.StatusCode != 200 {
		t.Fatalf("second connection: %d", resp.StatusCode)
	}
	_, resp, body := get(t, addr)
	checkRefusal(t, resp, body, 429, "RATE_LIMITED")
	if got := refused(); !slices.Equal(got, []string{RefusedPerIP}) {
		t.Errorf("refusals reported %v, want one %s", got, RefusedPerIP)
	}
	first.Close()
	// The server sees the close when its read of the next request ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, resp, _ := get(t, addr)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection's place was not given back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Past Concurrency a new connection is answered 503 UNAVAILABLE in JSON
// with Retry-After, whatever its address.
func TestConnectionsOverConcurrency(t *testing.T) {
	addr, refused := limitedServer(t, Config{ReadTimeout: 5 * time.Second, WriteTimeout: time.Second, IdleTimeout: 5 * time.Second,
		Concurrency: 2})
	for i := 0; i < 2; i++ {
		if _, resp, _ := get(t, addr); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i+1, resp.StatusCode)
		}
	}
	_, resp, body := get(t, addr)
	checkRefusal(t, resp, body, 503, "UNAVAILABLE")
	if got := refused(); !slices.Equal(got, []string{RefusedConcurrency}) {
		t.Errorf("refusals reported %v, want one %s", got, RefusedConcurrency)
	}
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// An IPv6 client is one key per /64 (fasthttp's own count keys the full
// address, so a /64 had 2^64 allowances); an IPv4-mapped address is its
// IPv4 address; a peer without an IP is not keyed.
func TestConnKey(t *testing.T) {
	key := func(s string) string {
		k, ok := connKey(addrConn{remote: &net.TCPAddr{IP: net.ParseIP(s), Port: 1}})
		if !ok {
			return "unkeyed"
		}
		return k.String()
	}
	if a, b := key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:ffff:ffff:ffff"); a != b || a != "2001:db8:1:2::" {
		t.Errorf("one /64: keys %s and %s", a, b)
	}
	if a, b := key("2001:db8:1:2::1"), key("2001:db8:1:3::1"); a == b {
		t.Errorf("two /64s share the key %s", a)
	}
	if got := key("::ffff:192.0.2.7"); got != "192.0.2.7" {
		t.Errorf("IPv4-mapped: %s", got)
	}
	if got := key("192.0.2.7"); got != "192.0.2.7" {
		t.Errorf("IPv4: %s", got)
	}
	if _, ok := connKey(addrConn{remote: &net.UnixAddr{Name: "x", Net: "unix"}}); ok {
		t.Error("a Unix peer was keyed")
	}
}

// A connection closed twice gives its place back once.
func TestLimitedConnReleasesOnce(t *testing.T) {
	l := newConnLimits(Config{Concurrency: 1, MaxConnsPerIP: 1}, nil, slog.New(slog.DiscardHandler))
	a, b := net.Pipe()
	defer b.Close()
	k, _ := connKey(addrConn{remote: &net.TCPAddr{IP: net.ParseIP("192.0.2.1")}})
	if r := l.admit(k, true); r != "" {
		t.Fatal(r)
	}
	c := &limitedConn{Conn: a, l: l, key: k, keyed: true}
	c.Close()
	c.Close()
	if l.open != 0 || len(l.byIP) != 0 {
		t.Fatalf("after two closes: %d open, %v by address", l.open, l.byIP)
	}
	if r := l.admit(k, true); r != "" {
		t.Errorf("the place was not given back: %s", r)
	}
	if r := l.admit(k, true); r != RefusedConcurrency {
		t.Errorf("a second connection: %q, want %s", r, RefusedConcurrency)
	}
}
