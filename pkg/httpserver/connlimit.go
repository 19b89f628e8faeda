package httpserver

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"flashsale/pkg/httperr"
)

// Why a connection was refused, as the OnConnRefused callback is told.
const (
	RefusedPerIP       = "per_ip"      // the client's address has MaxConnsPerIP open
	RefusedConcurrency = "concurrency" // the server has Concurrency open
)

// connLimits enforces Config.Concurrency and Config.MaxConnsPerIP on the
// listener, before fasthttp sees a connection. fasthttp's own limits
// answer a refused connection in plain text, without Retry-After (its
// message, not the API's JSON body), and its per-IP count keys an IPv6
// client by its full address, so one with a /64 is never limited. Here an
// IPv6 client is keyed by its /64, as the per-IP rate limits are (what one
// subscriber gets), and a refusal is answered 429 RATE_LIMITED or 503
// UNAVAILABLE with Retry-After, then closed.
type connLimits struct {
	total, perIP int
	onRefused    func(reason string)
	log          *slog.Logger
	logged       rate.Sometimes // a refusal logged at most once a minute

	mu   sync.Mutex
	open int
	byIP map[netip.Addr]int // open connections per key (an IPv4 address or an IPv6 /64); no zero entries

	answering atomic.Int64 // refusals being written
}

// maxAnswering bounds the refusals written at once: past it a refused
// connection is closed unanswered (a flood gets no goroutine per socket).
const maxAnswering = 1024

// refusalDeadline bounds writing a refusal and reading what the client had
// sent (so the close is not a reset that loses the answer).
const refusalDeadline = time.Second

var (
	refusePerIP = refusal(httperr.New(429, "RATE_LIMITED",
		"too many connections from your address: reuse one, or retry after Retry-After seconds").WithRetryAfter("1"))
	refuseBusy = refusal(httperr.New(503, httperr.CodeUnavailable,
		"the server is serving as many connections as it can: retry after Retry-After seconds").WithRetryAfter("1"))
)

// refusal is the whole HTTP/1.1 answer to a refused connection, written
// before its request is read.
func refusal(e httperr.Error) []byte {
	body := httperr.Body(e.Code, e.Message)
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\nRetry-After: %s\r\nContent-Length: %d\r\n\r\n%s",
		e.Status, fasthttp.StatusMessage(e.Status), e.RetryAfter, len(body), body)
}

func newConnLimits(cfg Config, onRefused func(string), log *slog.Logger) *connLimits {
	if onRefused == nil {
		onRefused = func(string) {}
	}
	return &connLimits{total: cfg.Concurrency, perIP: cfg.MaxConnsPerIP, onRefused: onRefused, log: log,
		logged: rate.Sometimes{Interval: time.Minute}, byIP: map[netip.Addr]int{}}
}

// wrap returns ln enforcing the limits; with none configured, ln itself.
func (l *connLimits) wrap(ln net.Listener) net.Listener {
	if l.total <= 0 && l.perIP <= 0 {
		return ln
	}
	return &limitedListener{Listener: ln, l: l}
}

// connKey is the per-IP key of a peer: an IPv4 address, or an IPv6 /64;
// ok is false for a peer without an IP (an in-memory or Unix socket).
func connKey(c net.Conn) (netip.Addr, bool) {
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Addr{}, false
	}
	return ClientKey(ip), true
}

// ClientKey is the address a per-client limit counts a peer under: an
// IPv4 address as itself (an IPv4-mapped IPv6 one too), an IPv6 address by
// its /64, which is what one subscriber gets (RFC 6177): keyed by /128,
// each of her 2^64 addresses would have a limit of its own. The gateway's
// per-IP rate limits and the listener's connection cap both key by it.
func ClientKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64) // cannot fail for an IPv6 address
		ip = p.Addr()
	}
	return ip
}

// admit counts c in, or says why it is refused.
func (l *connLimits) admit(key netip.Addr, keyed bool) (reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total > 0 && l.open >= l.total:
		return RefusedConcurrency
	case keyed && l.perIP > 0 && l.byIP[key] >= l.perIP:
		return RefusedPerIP
	}
	l.open++
	if keyed && l.perIP > 0 {
		l.byIP[key]++
	}
	return ""
}

func (l *connLimits) release(key netip.Addr, keyed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if keyed && l.perIP > 0 {
		if n := l.byIP[key] - 1; n > 0 {
			l.byIP[key] = n
		} else {
			delete(l.byIP, key)
		}
	}
}

// refuse answers c and closes it, in a goroutine of its own so that a slow
// client does not hold up Accept.
func (l *connLimits) refuse(c net.Conn, key netip.Addr, reason string) {
	l.onRefused(reason)
	l.logged.Do(func() {
		l.log.Warn("connection refused (logged at most once a minute)", "reason", reason, "client", key.String(),
			"max_conns_per_ip", l.perIP, "concurrency", l.total)
	})
	if l.answering.Add(1) > maxAnswering {
		l.answering.Add(-1)
		_ = c.Close()
		return
	}
	answer := refuseBusy
	if reason == RefusedPerIP {
		answer = refusePerIP
	}
	go func() {
		defer l.answering.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalDeadline))
		if _, err := c.Write(answer); err != nil {
			return
		}
		// Half-close, then read what the client sent: closing a socket
		// with unread data sends a reset, which can reach the client
		// before it has read the answer.
		if hc, ok := c.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		}
	}()
}

type limitedListener struct {
	net.Listener
	l *connLimits
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := connKey(c)
		if reason := ll.l.admit(key, keyed); reason != "" {
			ll.l.refuse(c, key, reason)
			continue
		}
		return &limitedConn{Conn: c, l: ll.l, key: key, keyed: keyed}, nil
	}
}

// limitedConn gives its place back once, at its first Close.
type limitedConn struct {
	net.Conn
	l      *connLimits
	key    netip.Addr
	keyed  bool
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.key, c.keyed)
	}
	return c.Conn.Close()
}
