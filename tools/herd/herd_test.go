package herd

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/valyala/fasthttp"
)

// serve answers on a loopback port with h and counts the connections it
// accepts; it returns the base URL.
func serve(t *testing.T, h fasthttp.RequestHandler) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &fasthttp.Server{Handler: h, ConnState: func(_ net.Conn, s fasthttp.ConnState) {
		if s == fasthttp.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String(), &conns
}

// purchase answers like the gateway: 202 with a body for the first call,
// 410 with Retry-After after that, and echoes what it was sent.
func purchase(calls *atomic.Int64) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("X-Seen-Method", string(ctx.Method()))
		ctx.Response.Header.Set("X-Seen-Auth", string(ctx.Request.Header.Peek("Authorization")))
		ctx.Response.Header.Set("X-Seen-Body", string(ctx.PostBody()))
		ctx.Response.Header.Set("X-Seen-Uri", string(ctx.RequestURI()))
		ctx.SetContentType("application/json")
		if calls.Add(1) == 1 {
			ctx.SetStatusCode(fasthttp.StatusAccepted)
			ctx.SetBodyString(`{"orderId":"o1","status":"PENDING"}`)
			return
		}
		// Sent in lower case: the answer's header must still be found
		// under its canonical name.
		ctx.Response.Header.DisableNormalizing()
		ctx.Response.Header.Set("retry-after", "1")
		ctx.SetStatusCode(fasthttp.StatusGone)
		ctx.SetBodyString(`{"error":"SOLD_OUT"}`)
	}
}

func TestTransportCarriesRequestAndAnswer(t *testing.T) {
	var calls atomic.Int64
	base, _ := serve(t, purchase(&calls))
	c := &http.Client{Transport: NewTransport(4, 5*time.Second)}

	req, _ := http.NewRequest(http.MethodPost, base+"/items/1/purchase?shopper=7", strings.NewReader("hello"))
	req.Header.Set("Authorization", "Bearer t0")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusAccepted || res.Status != "202 Accepted" || body != `{"orderId":"o1","status":"PENDING"}` {
		t.Fatalf("answer = %q %q", res.Status, body)
	}
	for k, want := range map[string]string{"X-Seen-Method": "POST", "X-Seen-Auth": "Bearer t0", "X-Seen-Body": "hello",
		"X-Seen-Uri": "/items/1/purchase?shopper=7", "Content-Type": "application/json"} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}

	req, _ = http.NewRequest(http.MethodPost, base+"/items/1/purchase", nil)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusGone || body != `{"error":"SOLD_OUT"}` || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("second answer = %d %q, Retry-After %q", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTransportTimesOut(t *testing.T) {
	release := make(chan struct{})
	base, _ := serve(t, func(ctx *fasthttp.RequestCtx) { <-release })
	defer close(release)
	c := &http.Client{Transport: NewTransport(1, 50*time.Millisecond)}
	start := time.Now()
	_, err := c.Get(base + "/slow")
	if !errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want the transport's timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the timeout took %v", d)
	}
}

func TestTransportRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := &http.Client{Transport: NewTransport(1, time.Second)}
	if _, err := c.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
}

// Both clients give vegeta the same results, and neither opens more
// connections than it is allowed.
func TestAttackersAgree(t *testing.T) {
	for _, client := range []Client{NetHTTP, FastHTTP} {
		t.Run(client.String(), func(t *testing.T) {
			var calls atomic.Int64
			base, conns := serve(t, purchase(&calls))
			atk := New(Options{Connections: 4, Workers: 16, MaxWorkers: 16, Timeout: 5 * time.Second, MaxBody: 1024, Client: client}).Attacker()
			var n atomic.Int64
			targeter := func(tg *vegeta.Target) error {
				if n.Add(1) > 200 {
					return vegeta.ErrNoTargets
				}
				tg.Method, tg.URL = http.MethodPost, base+"/items/1/purchase"
				tg.Header = http.Header{"Authorization": []string{"Bearer t"}}
				return nil
			}
			codes := map[uint16]int{}
			for r := range atk.Attack(targeter, vegeta.Rate{Freq: 0}, 10*time.Second, "herd") {
				if r.Method == "" {
					continue
				}
				codes[r.Code]++
				switch r.Code {
				case 202:
					if string(r.Body) != `{"orderId":"o1","status":"PENDING"}` {
						t.Errorf("202 body %q", r.Body)
					}
				case 410:
					if r.Headers.Get("Retry-After") != "1" || r.Error != "410 Gone" {
						t.Errorf("410 with Retry-After %q, error %q", r.Headers.Get("Retry-After"), r.Error)
					}
				default:
					t.Errorf("result %d: %s", r.Code, r.Error)
				}
			}
			if codes[202] != 1 || codes[410] != 199 {
				t.Fatalf("codes = %v, want one 202 and 199 410s", codes)
			}
			if c := conns.Load(); c < 1 || c > 4 {
				t.Fatalf("%d connections opened, want 1 to 4", c)
			}
		})
	}
}

// TestArriveOpensEveryConnection: after Arrive, the herd holds its
// connections, and an attack sent through it opens none. With net/http's
// client every shopper opened its own; fasthttp's may share.
func TestArriveOpensEveryConnection(t *testing.T) {
	const shoppers = 128
	for _, client := range []Client{NetHTTP, FastHTTP} {
		t.Run(client.String(), func(t *testing.T) {
			var calls atomic.Int64
			base, conns := serve(t, func(ctx *fasthttp.RequestCtx) {
				if string(ctx.Method()) == http.MethodGet {
					time.Sleep(time.Millisecond) // a page that takes a moment, as the gateway's does
					// Any answer counts; one with a body holds its
					// connection until the body is read.
					ctx.SetStatusCode(fasthttp.StatusNotFound)
					ctx.SetBodyString(`{"error":"NOT_FOUND"}`)
					return
				}
				purchase(&calls)(ctx)
			})
			h := New(Options{Connections: shoppers, Workers: shoppers, MaxWorkers: shoppers, Timeout: 5 * time.Second, MaxBody: 1024, Client: client})
			codes, err := h.Arrive(t.Context(), base+"/api/flash-sales/1")
			if err != nil {
				t.Fatal(err)
			}
			if codes[404] != shoppers || len(codes) != 1 {
				t.Fatalf("answers %v, want %d 404s", codes, shoppers)
			}
			arrived := conns.Load()
			switch {
			case client == NetHTTP && arrived != shoppers:
				t.Fatalf("%d connections after %d shoppers arrived, want one each", arrived, shoppers)
			case arrived < 1 || arrived > shoppers:
				t.Fatalf("%d connections after %d shoppers arrived, want 1 to %d", arrived, shoppers, shoppers)
			}
			var n atomic.Int64
			targeter := func(tg *vegeta.Target) error {
				if n.Add(1) > 500 {
					return vegeta.ErrNoTargets
				}
				tg.Method, tg.URL = http.MethodPost, base+"/items/1/purchase"
				return nil
			}
			for r := range h.Attacker().Attack(targeter, vegeta.Rate{Freq: 0}, 10*time.Second, "herd") {
				if r.Method != "" && r.Code != 202 && r.Code != 410 {
					t.Errorf("result %d: %s", r.Code, r.Error)
				}
			}
			if c := conns.Load(); client == NetHTTP && c != arrived {
				t.Fatalf("the attack opened %d connections of its own", c-arrived)
			} else if c > shoppers {
				t.Fatalf("%d connections, more than the herd's %d", c, shoppers)
			}
		})
	}
}

func TestArriveSaysWhoCouldNotConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	_ = ln.Close() // nothing listens there now
	for _, client := range []Client{NetHTTP, FastHTTP} {
		h := New(Options{Connections: 8, Workers: 8, MaxWorkers: 8, Timeout: time.Second, Client: client})
		_, err := h.Arrive(t.Context(), url)
		if err == nil || !strings.Contains(err.Error(), "8 of 8 shoppers could not load") {
			t.Fatalf("%v: Arrive at a closed port = %v", client, err)
		}
	}
}

func TestClientText(t *testing.T) {
	for _, c := range []Client{FastHTTP, NetHTTP} {
		b, _ := c.MarshalText()
		var back Client
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Fatalf("%v: round trip gave %v, %v", c, back, err)
		}
	}
	var c Client
	if err := c.UnmarshalText([]byte("curl")); err == nil {
		t.Fatal("an unknown client was accepted")
	}
	if c != NetHTTP {
		t.Fatal("the zero client is not vegeta's stock one")
	}
}
