package app

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/valyala/fasthttp/reuseport"
)

// listenPublic opens the shoppers' listener. With reusePort it sets
// SO_REUSEPORT (fasthttp's reuseport package), so several gateway
// processes bind the same address and the kernel spreads new connections
// over them: one public port in front of N instances, no proxy in
// between. Each instance keeps its own admin address, because health,
// metrics and live limits are per process.
func listenPublic(addr string, reusePort bool) (net.Listener, error) {
	if !reusePort {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := reuseport.Listen(reusePortNetwork(addr), addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s with SO_REUSEPORT: %w", addr, err)
	}
	return ln, nil
}

// reusePortNetwork picks tcp6 for an IPv6 literal and tcp4 otherwise: the
// reuseport package binds one address family, not "tcp".
func reusePortNetwork(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp4"
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		return "tcp6"
	}
	return "tcp4"
}
