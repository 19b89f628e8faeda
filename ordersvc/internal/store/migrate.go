package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/schema"
)

// Migrate brings the database up to the newest migration of flashsale's one
// schema (flashsale/pkg/schema, shared with the gateway and the tests) and
// returns the versions before and after. tern takes an advisory lock and
// runs each file in its own transaction with the version bump, so several
// instances starting at once apply each file once, and running it again is
// a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (from, to int32, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if from, err = schemaVersion(ctx, conn.Conn()); err != nil {
		return 0, 0, err
	}
	if err := schema.Migrate(ctx, conn.Conn()); err != nil {
		return from, 0, fmt.Errorf("migrate from version %d: %w", from, err)
	}
	if to, err = schemaVersion(ctx, conn.Conn()); err != nil {
		return from, 0, err
	}
	return from, to, nil
}

// schemaVersion reads the applied version; 0 before the first migration.
func schemaVersion(ctx context.Context, conn *pgx.Conn) (int32, error) {
	// Two statements: a query naming a missing table fails at parse time.
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema.VersionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int32
	if err := conn.QueryRow(ctx, "SELECT version FROM "+schema.VersionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
