// Package herd builds the vegeta attacker both load generators use (the
// load-test tool and make bench), so every target meets the same generator.
//
// The default client is vegeta's stock one, net/http's: each request hands
// off between the caller, the connection's write loop and its read loop,
// and builds header maps both ways. FastHTTP puts fasthttp's client (a
// pinned dependency) behind vegeta's own http.Client instead: vegeta still
// paces, times and records every request; only the bytes on the connection
// are written and read by fasthttp, in the worker's goroutine. It costs the
// generator about a third less CPU per request, which raises the ceiling a
// sold-out benchmark can measure; in the demo the gateway's CPU rose by
// about what the generator saved, and the sell-out did not move
// (benchmarks/README.md), so it is not the default.
package herd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/valyala/fasthttp"
)

// Client is the HTTP client a generator sends its requests with. Its zero
// value is NetHTTP; as a flag it reads "net/http" or "fasthttp"
// (flag.TextVar).
type Client int

// The clients.
const (
	NetHTTP  Client = iota // vegeta's stock client: net/http's Transport
	FastHTTP               // fasthttp's client behind vegeta's http.Client
)

var clientNames = [...]string{NetHTTP: "net/http", FastHTTP: "fasthttp"}

func (c Client) String() string {
	if c < 0 || int(c) >= len(clientNames) {
		return "Client(" + strconv.Itoa(int(c)) + ")"
	}
	return clientNames[c]
}

// MarshalText names the client.
func (c Client) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a client's name.
func (c *Client) UnmarshalText(b []byte) error {
	for i, n := range clientNames {
		if string(b) == n {
			*c = Client(i)
			return nil
		}
	}
	return fmt.Errorf("unknown HTTP client %q: want %s or %s", b, NetHTTP, FastHTTP)
}

// Options shape the attacker.
type Options struct {
	Connections int           // keep-alive connections, at most
	Workers     uint64        // vegeta workers at the start
	MaxWorkers  uint64        // vegeta workers at most
	Timeout     time.Duration // per request
	MaxBody     int64         // bytes of each answer kept in the results
	Client      Client
}

// New returns the attacker.
func New(o Options) *vegeta.Attacker {
	common := []func(*vegeta.Attacker){
		vegeta.Workers(o.Workers), vegeta.MaxWorkers(o.MaxWorkers), vegeta.MaxBody(o.MaxBody),
	}
	if o.Client == FastHTTP {
		// No http.Client timeout: with a RoundTripper other than
		// net/http's, the client would start a goroutine and a timer per
		// request to enforce it. The transport enforces it instead.
		c := &http.Client{Transport: NewTransport(o.Connections, o.Timeout)}
		return vegeta.NewAttacker(append(common, vegeta.Client(c))...)
	}
	// Vegeta's options below reach into its own *http.Transport, so they go
	// with its stock client only.
	return vegeta.NewAttacker(append(common,
		vegeta.Connections(o.Connections), vegeta.MaxConnections(o.Connections),
		vegeta.Timeout(o.Timeout), vegeta.KeepAlive(true))...)
}

// Transport is an http.RoundTripper that sends each request with a
// fasthttp client, over at most a fixed number of keep-alive connections
// per host.
type Transport struct {
	client  *fasthttp.Client
	timeout time.Duration
}

// NewTransport returns a transport with at most connections per host; every
// request is bounded by timeout (and by its context's deadline, if sooner).
func NewTransport(connections int, timeout time.Duration) *Transport {
	return &Transport{
		timeout: timeout,
		client: &fasthttp.Client{
			MaxConnsPerHost: connections,
			// A worker beyond the connections waits for one, as with
			// net/http's MaxConnsPerHost, instead of failing at once.
			MaxConnWaitTimeout:       timeout,
			MaxResponseBodySize:      1 << 20,
			NoDefaultUserAgentHeader: true,
		},
	}
}

// errTimeout is what a timed-out request records, worded like net/http's.
var errTimeout = errors.New("herd: request timed out (Client.Timeout exceeded)")

// RoundTrip sends r and returns its answer with the whole body read.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)

	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.String())
	if r.Host != "" {
		req.Header.SetHost(r.Host)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("herd: read request body: %w", err)
		}
		req.SetBodyRaw(body)
	}

	deadline := time.Now().Add(t.timeout)
	if d, ok := r.Context().Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := t.client.DoDeadline(req, resp, deadline); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) {
			if ctxErr := r.Context().Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, errTimeout
		}
		return nil, err
	}

	code := resp.StatusCode()
	// fasthttp normalizes header names (retry-after -> Retry-After), so
	// the keys are those http.Header.Get looks up.
	h := make(http.Header, resp.Header.Len())
	for k, v := range resp.Header.All() {
		h[string(k)] = append(h[string(k)], string(v))
	}
	body := bytes.Clone(resp.Body())
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// CloseIdleConnections closes the connections no request is using; the
// http.Client calls it from its own CloseIdleConnections.
func (t *Transport) CloseIdleConnections() { t.client.CloseIdleConnections() }

var _ interface {
	http.RoundTripper
	CloseIdleConnections()
} = (*Transport)(nil)
