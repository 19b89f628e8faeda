package app

import (
	"net"
	"testing"
)

// Two gateways share one public port only when both ask for SO_REUSEPORT;
// without it the second bind fails as before.
func TestListenPublicReusePort(t *testing.T) {
	first, err := listenPublic("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	addr := first.Addr().String()

	second, err := listenPublic(addr, true)
	if err != nil {
		t.Fatalf("second listener on %s with SO_REUSEPORT: %v", addr, err)
	}
	defer second.Close()

	if ln, err := listenPublic(addr, false); err == nil {
		ln.Close()
		t.Fatalf("a listener without SO_REUSEPORT bound %s too", addr)
	}

	// Connections reach one of them: each accepts what the kernel hands it.
	accepted := make(chan string, 16)
	for _, ln := range []net.Listener{first, second} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- c.LocalAddr().String()
				c.Close()
			}
		}()
	}
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// TCP_DEFER_ACCEPT: the server sees the connection once data arrives.
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if got := <-accepted; got != addr {
			t.Errorf("accepted on %s, want %s", got, addr)
		}
		c.Close()
	}
}

func TestReusePortNetwork(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:8080", "tcp4"},
		{":8080", "tcp4"},
		{"localhost:8080", "tcp4"},
		{"[::1]:8080", "tcp6"},
		{"[::ffff:127.0.0.1]:8080", "tcp4"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := reusePortNetwork(tc.addr); got != tc.want {
				t.Errorf("reusePortNetwork(%q) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}
