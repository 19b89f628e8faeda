// Package testdb gives ordersvc's integration tests a migrated pool on the
// local stack's PostgreSQL and a fresh sale of their own, so tests running
// in parallel never share rows.
package testdb

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/testenv"
)

// Pool connects to the local PostgreSQL, migrates it and closes the pool when
// the test ends. It fails the test when PostgreSQL does not answer.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatalf("connect postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

var seq atomic.Int64

// Sale creates an open sale named after the test with one item per quantity.
func Sale(t testing.TB, st *store.Store, quantities ...int64) store.Sale {
	t.Helper()
	now := time.Now()
	ns := store.NewSale{
		Name:       fmt.Sprintf("%.150s-%d-%d", t.Name(), now.UnixNano(), seq.Add(1)),
		StartsAt:   now.Add(-time.Minute),
		EndsAt:     now.Add(time.Hour),
		PaymentTTL: 10 * time.Minute,
	}
	for i, q := range quantities {
		ns.Items = append(ns.Items, store.NewItem{ProductID: fmt.Sprintf("p%d", i), Name: fmt.Sprintf("item %d", i), Price: "9.99", Quantity: q})
	}
	sale, err := st.CreateSale(testenv.Context(t), ns)
	if err != nil {
		t.Fatalf("create sale: %v", err)
	}
	return sale
}
