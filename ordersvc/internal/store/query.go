package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// querier is what collect reads through: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// collect runs one query on q and scans every row with scan; what names
// the read in the error, for the query and the scan alike.
func collect[T any](ctx context.Context, q querier, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// uuidArray is ids as pgx encodes a uuid[] parameter directly. Handed
// []uuid.UUID it tries, for every element, encode plans that fail (each
// failure formatted as an error) before it falls back to the id's text
// through database/sql's Valuer: for 500 ids 914 µs and 10,019 allocations
// against 55 µs and 520 (BenchmarkUUIDArray, benchmarks/README.md). The
// consumer encodes every batch's ids twice, the expiry sweep and the relay
// once a batch.
func uuidArray(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return out
}
