package app

import (
	"testing"
	"time"

	"flashsale/ordersvc/internal/config"
	"flashsale/tools/testenv"
)

// The service's sessions do not stay idle inside a transaction: a client
// gone silent mid-batch would hold its item rows locked for as long as
// the server's TCP keepalive takes. A DSN that sets the limit keeps its own.
func TestPoolEndsIdleTransactions(t *testing.T) {
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	show := func(dsn string) string {
		t.Helper()
		pool, err := openPool(ctx, config.Config{PGDSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var got string
		if err := pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := show(testenv.PostgresDSN()); got != "1min" {
		t.Errorf("idle_in_transaction_session_timeout = %q, want 1min", got)
	}
	short := testenv.PostgresDSN() + "&idle_in_transaction_session_timeout=200ms"
	if got := show(short); got != "200ms" {
		t.Errorf("with the DSN's own limit: %q, want 200ms", got)
	}

	pool, err := openPool(ctx, config.Config{PGDSN: short})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the client goes silent mid-transaction
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("a transaction idle past the limit went on; want the server to have ended the session")
	}
}
