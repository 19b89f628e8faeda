// Package herd is the shoppers' side of both load generators (the load-test
// tool and make bench), so every target meets the same generator: one HTTP
// client whose connections the crowd opens before the sale (Arrive), and
// the vegeta attackers that send the crowd's purchases through it.
//
// Client's zero value is vegeta's stock client, net/http's: each request hands
// off between the caller, the connection's write loop and its read loop,
// and builds header maps both ways. FastHTTP puts fasthttp's client (a
// pinned dependency) behind vegeta's own http.Client instead: vegeta still
// paces, times and records every request; only the bytes on the connection
// are written and read by fasthttp, in the worker's goroutine. It costs the
// generator about a third less CPU per request. The load-test tool uses it
// by default: on two shared cores the demo sells out about 10 % sooner
// with it. make bench's driver keeps net/http, the client all its earlier
// figures were measured with (benchmarks/README.md).
package herd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
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

// Herd is a crowd's side of the connection: one HTTP client whose
// keep-alive connections outlive each attack sent through it.
type Herd struct {
	o      Options
	client *http.Client
}

// New returns a herd with no connection open yet.
func New(o Options) *Herd {
	if o.Client == FastHTTP {
		// No http.Client timeout: with a RoundTripper other than
		// net/http's, the client would start a goroutine and a timer per
		// request to enforce it. The transport enforces it instead.
		return &Herd{o: o, client: &http.Client{Transport: NewTransport(o.Connections, o.Timeout)}}
	}
	// What vegeta's stock client is, with its Connections,
	// MaxConnections, Timeout and KeepAlive options applied: held here so
	// that its connections are the herd's, not one attacker's.
	return &Herd{o: o, client: &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: o.Connections,
			MaxConnsPerHost:     o.Connections,
		},
	}}
}

// Attacker returns an attacker sending through the herd's connections. A
// vegeta attacker runs one attack; ask for a new one for each.
func (h *Herd) Attacker() *vegeta.Attacker {
	return vegeta.NewAttacker(vegeta.Workers(h.o.Workers), vegeta.MaxWorkers(h.o.MaxWorkers),
		vegeta.MaxBody(h.o.MaxBody), vegeta.Client(h.client))
}

// Arrive opens the herd's connections the way a crowd arrives before a
// sale opens: every shopper's connection loads the page at url, all at
// once. The first purchase then goes out on a warm connection, as behind a
// real edge, and the sale's clock does not count the TCP handshakes a real
// herd made minutes earlier. With net/http's client each answer is held
// until all are in, so each shopper opened a connection of its own;
// fasthttp's transport hands its connection back before answering, so it
// may open fewer. Any answer counts, and Arrive returns how many of each
// status code came back; an error is a connection that could not be made
// or used.
func (h *Herd) Arrive(ctx context.Context, url string) (map[int]int, error) {
	// Each shopper writes only its own slot; they are counted once all are
	// back.
	type answer struct {
		code int // 0: no answer
		err  error
	}
	answers := make([]answer, h.o.Connections)
	var answered, done sync.WaitGroup
	answered.Add(len(answers))
	for i := range answers {
		done.Go(func() {
			a := &answers[i]
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			var res *http.Response
			if err == nil {
				res, err = h.client.Do(req)
			}
			answered.Done()
			if err != nil {
				a.err = err
				return
			}
			a.code = res.StatusCode
			answered.Wait()
			_, err = io.Copy(io.Discard, res.Body)
			a.err = errors.Join(err, res.Body.Close())
		})
	}
	done.Wait()
	codes := map[int]int{}
	var failed []error
	for _, a := range answers {
		if a.code != 0 {
			codes[a.code]++
		}
		if a.err != nil {
			failed = append(failed, a.err)
		}
	}
	if len(failed) > 0 {
		return codes, fmt.Errorf("herd: %d of %d shoppers could not load %s, the first: %w", len(failed), len(answers), url, failed[0])
	}
	return codes, nil
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
