package publish

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// blackHole accepts connections and never answers: a broker that took the
// request and said nothing, as a frozen or partitioned one looks.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Which failures say "never written" and which say "maybe written".
func TestPublishFailureKinds(t *testing.T) {
	p, err := New(Config{Brokers: blackHole(t), Topic: "flash-sale-orders", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })

	tests := []struct {
		name  string
		value []byte
		want  error
		not   error
	}{
		// librdkafka refuses it locally (above message.max.bytes): no
		// copy exists anywhere.
		{name: "refused before the producer took it", value: bytes.Repeat([]byte{'x'}, 2<<20), want: ErrNotPublished, not: ErrUnconfirmed},
		// Taken, sent towards a broker that never answers: the delivery
		// report says timed out, and the caller cannot know more.
		{name: "taken, no acknowledgement", value: []byte(`{}`), want: ErrUnconfirmed, not: ErrNotPublished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Publish(1, tt.value)
			if !errors.Is(err, tt.want) || errors.Is(err, tt.not) {
				t.Errorf("Publish error %v, want %v and not %v", err, tt.want, tt.not)
			}
		})
	}
}
