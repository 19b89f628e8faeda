package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// collect runs one query in tx and scans every row with scan; what names
// the read in the error, for the query and the scan alike.
func collect[T any](ctx context.Context, tx pgx.Tx, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
