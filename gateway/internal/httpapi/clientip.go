package httpapi

import (
	"bytes"
	"net"
	"net/netip"
	"unsafe"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/httpserver"
)

// clientIP is the address the per-IP limits key on: the socket peer, or,
// when the peer is a trusted proxy, the right-most address in
// X-Forwarded-For that is not itself a trusted proxy. Addresses a client
// writes to the left of that are never believed. Several header lines are
// one list in their order (RFC 9110, 5.3): a proxy that adds its own line
// instead of extending the client's puts the address it saw last.
func (a *API) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := addrOf(ctx.RemoteIP())
	if len(a.TrustedProxies) == 0 || !a.trusted(peer) {
		return peer
	}
	lines := ctx.Request.Header.PeekAll("X-Forwarded-For")
	for l := len(lines) - 1; l >= 0; l-- {
		xff := lines[l]
		for len(xff) > 0 {
			i := bytes.LastIndexByte(xff, ',')
			part := bytes.TrimSpace(xff[i+1:])
			xff = xff[:max(i, 0)]
			addr, err := parseAddr(part)
			if err != nil {
				return peer // a malformed chain is not believed
			}
			if !a.trusted(addr.Unmap()) {
				return addr.Unmap()
			}
			if i < 0 {
				break
			}
		}
	}
	return peer
}

func (a *API) trusted(ip netip.Addr) bool {
	for _, p := range a.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// parseAddr is netip.ParseAddr of b without copying b into a string first
// (the copy was 2.5 % of the gateway's samples in a selling demo behind a
// proxy). ParseAddr keeps no reference to its argument once it returns
// but in its error: a zone is cloned into its unique handle, and the
// errors, which quote the input, are dropped by the caller, never kept.
func parseAddr(b []byte) (netip.Addr, error) {
	return netip.ParseAddr(unsafe.String(unsafe.SliceData(b), len(b)))
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// ipKey writes the limiter key of an address into buf without allocating:
// its httpserver.ClientKey (an IPv6 address by its /64), as the listener's
// connection cap counts it.
func ipKey(buf *[16]byte, ip netip.Addr) []byte {
	*buf = httpserver.ClientKey(ip).As16()
	return buf[:]
}
