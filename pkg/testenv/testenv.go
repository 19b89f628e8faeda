// Package testenv gives integration tests the addresses of the local stack
// (deploy/stack.sh) and fails a test, never skips it, when a server it needs
// does not answer. Run `make up` first; `make test` does.
package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// Defaults match deploy/stack.sh; the FLASHSALE_* variables override them.
func RedisAddr() string {
	return env("FLASHSALE_REDIS_ADDR", "127.0.0.1:"+env("FLASHSALE_REDIS_PORT", "16379"))
}

// KafkaBrokers is the bootstrap list of the Kafka-protocol broker.
func KafkaBrokers() string {
	return env("FLASHSALE_KAFKA_BROKERS", "127.0.0.1:"+env("FLASHSALE_KAFKA_PORT", "19092"))
}

// PostgresDSN is the connection string of the local PostgreSQL.
func PostgresDSN() string {
	return env("FLASHSALE_PG_DSN", fmt.Sprintf("postgres://flashsale@127.0.0.1:%s/flashsale?sslmode=disable", env("FLASHSALE_PG_PORT", "15432")))
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Require fails t unless every address accepts TCP connections.
func Require(t testing.TB, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatalf("local stack server %s does not answer (%v): run `make up`", a, err)
		}
		c.Close()
	}
}

// PostgresAddr is host:port of the PostgreSQL that PostgresDSN names, for Require.
func PostgresAddr() string {
	if u, err := url.Parse(PostgresDSN()); err == nil && u.Host != "" {
		if u.Port() == "" {
			return net.JoinHostPort(u.Hostname(), "5432")
		}
		return u.Host
	}
	return "127.0.0.1:" + env("FLASHSALE_PG_PORT", "15432")
}

// Context returns a context bounded by the test's deadline (or 2 minutes).
func Context(t testing.TB) context.Context {
	t.Helper()
	d := 2 * time.Minute
	if tt, ok := t.(*testing.T); ok {
		if dl, ok := tt.Deadline(); ok {
			// leave a little time to report, but never a negative timeout
			d = max(time.Until(dl)*9/10, time.Until(dl)-5*time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
