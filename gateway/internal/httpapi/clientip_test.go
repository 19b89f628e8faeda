package httpapi

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func ctxFrom(peer, xff string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	if xff != "" {
		for _, line := range strings.Split(xff, "\n") {
			req.Header.Add("X-Forwarded-For", line)
		}
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 1234}, nil)
	return ctx
}

func TestClientIP(t *testing.T) {
	a := &API{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}}
	untrusting := &API{}
	tests := []struct {
		name      string
		api       *API
		peer, xff string
		want      string
	}{
		{"no proxies configured: the peer, whatever the header says", untrusting, "203.0.113.9", "1.2.3.4", "203.0.113.9"},
		{"untrusted peer: header ignored", a, "203.0.113.9", "1.2.3.4", "203.0.113.9"},
		{"trusted peer: the client it reports", a, "127.0.0.1", "198.51.100.7", "198.51.100.7"},
		{"left-most entries are the client's own words", a, "127.0.0.1", "1.2.3.4, 198.51.100.7", "198.51.100.7"},
		{"a chain of trusted proxies is walked", a, "127.0.0.1", "198.51.100.7, 10.1.2.3", "198.51.100.7"},
		{"only proxies: the peer", a, "127.0.0.1", "10.1.2.3", "127.0.0.1"},
		{"garbage in the chain: the peer", a, "127.0.0.1", "not-an-ip", "127.0.0.1"},
		{"IPv6 client", a, "127.0.0.1", "2001:db8::1", "2001:db8::1"},
		{"empty header", a, "127.0.0.1", "", "127.0.0.1"},
		// A proxy that adds its own line (HAProxy's option forwardfor) puts
		// what it saw below the client's.
		{"a second line is read after the first", a, "127.0.0.1", "6.6.6.6\n198.51.100.7", "198.51.100.7"},
		{"lines and commas walked alike", a, "127.0.0.1", "6.6.6.6\n198.51.100.7, 10.1.2.3\n10.4.5.6", "198.51.100.7"},
		{"garbage on a later line: the peer", a, "127.0.0.1", "198.51.100.7\nnot-an-ip", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.api.clientIP(ctxFrom(tt.peer, tt.xff)); got.String() != tt.want {
				t.Errorf("clientIP = %s, want %s", got, tt.want)
			}
		})
	}
}

// The per-IP limits key an IPv6 client by its /64, an IPv4 one by its
// address.
func TestIPKey(t *testing.T) {
	key := func(s string) []byte {
		var buf [16]byte
		return bytes.Clone(ipKey(&buf, netip.MustParseAddr(s)))
	}
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"198.51.100.7", "198.51.100.7", true},
		{"198.51.100.7", "198.51.100.8", false},
		{"198.51.100.7", "::", false},
	} {
		if got := bytes.Equal(key(tt.a), key(tt.b)); got != tt.same {
			t.Errorf("keys of %s and %s equal: %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

func FuzzClientIP(f *testing.F) {
	a := &API{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	f.Add("1.2.3.4, 127.0.0.1")
	f.Add(",,,")
	f.Add("::ffff:1.2.3.4")
	f.Fuzz(func(t *testing.T, xff string) {
		got := a.clientIP(ctxFrom("127.0.0.1", xff))
		if !got.IsValid() {
			t.Fatalf("clientIP(%q) is not a valid address", xff)
		}
	})
}

func TestPathIDRejects(t *testing.T) {
	for _, s := range []string{"", "0", "-1", "1e3", "abc", "99999999999999999999", " 1", "0x10"} {
		ctx := &fasthttp.RequestCtx{}
		ctx.SetUserValue("id", s)
		if n, ok := pathID(ctx, "id"); ok {
			t.Errorf("pathID(%q) = %d, accepted", s, n)
		}
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.SetUserValue("id", "42")
	if n, ok := pathID(ctx, "id"); !ok || n != 42 {
		t.Errorf("pathID(42) = %d %v", n, ok)
	}
}
