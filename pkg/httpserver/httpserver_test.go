package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"flashsale/pkg/logging"
)

var testConfig = Config{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second,
	MaxBodyBytes: 64, Concurrency: 16}

// serve runs New's server on an in-memory listener and returns a client.
func serve(t *testing.T, h fasthttp.RequestHandler, log *slog.Logger, opts ...Option) *fasthttp.Client {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := New("test", h, testConfig, log, opts...)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Error(err)
		}
		<-done
	})
	return &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
}

func do(t *testing.T, c *fasthttp.Client, method, path string, body []byte) (int, map[string]string) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://test" + path)
	req.Header.SetMethod(method)
	req.SetBody(body)
	if err := c.Do(req, resp); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	var m map[string]string
	if resp.StatusCode() != 200 {
		if err := json.Unmarshal(resp.Body(), &m); err != nil {
			t.Fatalf("%s %s: %d answered %q, not the JSON error body", method, path, resp.StatusCode(), resp.Body())
		}
	}
	return resp.StatusCode(), m
}

// A panic in a handler answers 500 with the JSON error body, is logged at
// error level with its stack, is counted, and the server goes on serving.
func TestPanicAnswers500(t *testing.T) {
	var logs bytes.Buffer
	log := logging.New(&logs, logging.Config{Format: logging.JSON, Level: slog.LevelInfo}, "test")
	var panics atomic.Int64
	c := serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/boom" {
			ctx.SetBodyString("half an answer")
			panic("the handler has a bug")
		}
		ctx.SetBodyString("ok")
	}, log, OnPanic(func() { panics.Add(1) }))

	code, body := do(t, c, "GET", "/boom", nil)
	if code != 500 || body["error"] != "INTERNAL" || body["message"] == "" {
		t.Fatalf("after a panic: %d %v, want 500 INTERNAL", code, body)
	}
	if got := panics.Load(); got != 1 {
		t.Errorf("panics counted %d, want 1", got)
	}
	var rec map[string]any
	line, _, _ := strings.Cut(logs.String(), "\n")
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if rec["level"] != "ERROR" || rec["msg"] != "handler panic" || rec["panic"] != "the handler has a bug" ||
		rec["path"] != "/boom" || !strings.Contains(rec["stack"].(string), "httpserver_test.go") {
		t.Errorf("panic log record %v, want level ERROR, the panic, the path and a stack through the handler", rec)
	}
	if code, _ := do(t, c, "GET", "/fine", nil); code != 200 {
		t.Errorf("after the panic /fine answered %d", code)
	}
}

// Requests fasthttp refuses before any handler get the JSON body too.
func TestParseErrorsAreJSON(t *testing.T) {
	c := serve(t, func(ctx *fasthttp.RequestCtx) {}, slog.New(slog.DiscardHandler))
	code, body := do(t, c, "POST", "/x", bytes.Repeat([]byte("a"), testConfig.MaxBodyBytes+1))
	if code != 413 || body["error"] != "PAYLOAD_TOO_LARGE" {
		t.Errorf("body over MaxBodyBytes: %d %v, want 413 PAYLOAD_TOO_LARGE", code, body)
	}
}

// The configured limits reach the server.
func TestNewAppliesConfig(t *testing.T) {
	srv := New("svc", nil, Config{ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second,
		MaxBodyBytes: 5, Concurrency: 6, MaxConnsPerIP: 7}, slog.New(slog.DiscardHandler))
	// The listener enforces the connection limits; fasthttp's own are off
	// (per IP) or out of its way (twice the listener's).
	got := []any{srv.Name, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxRequestBodySize, srv.Concurrency,
		srv.MaxConnsPerIP, srv.DisableHeaderNamesNormalizing, srv.CloseOnShutdown, srv.limits.total, srv.limits.perIP}
	want := []any{"svc", 2 * time.Second, 3 * time.Second, 4 * time.Second, 5, 12, 0, false, true, 6, 7}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A server shut down before its Serve took the listener stops anyway:
// fasthttp's own Shutdown would have left that Serve accepting for ever.
func TestShutdownBeforeServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New("test", func(*fasthttp.RequestCtx) {}, testConfig, slog.New(slog.DiscardHandler))
	if err := Shutdown(context.Background(), srv.Server, ln); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still accepting 5s after Shutdown")
	}
}

// Header names are case-insensitive (RFC 9110, 5.1), and proxies speaking
// HTTP/2 or Envoy forward them in lower case: the handlers' lookups by
// canonical name must find them. With fasthttp's normalizing turned off,
// "authorization" was not "Authorization", and every shopper behind such a
// proxy got 401.
func TestHeaderNamesInAnyCase(t *testing.T) {
	ln := fasthttputil.NewInmemoryListener()
	srv := New("test", func(ctx *fasthttp.RequestCtx) {
		ctx.SetBody(append(append(ctx.Request.Header.Peek("Authorization"), '|'), ctx.Request.Header.Peek("X-Forwarded-For")...))
	}, testConfig, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	for _, names := range [][2]string{{"authorization", "x-forwarded-for"}, {"AUTHORIZATION", "X-FORWARDED-FOR"}, {"Authorization", "X-Forwarded-For"}} {
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n" + names[0] + ": Bearer t\r\n" + names[1] + ": 198.51.100.7\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(bufio.NewReader(c)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got := string(resp.Body()); got != "Bearer t|198.51.100.7" {
			t.Errorf("headers %q, %q: the handler read %q, want %q", names[0], names[1], got, "Bearer t|198.51.100.7")
		}
	}
}
