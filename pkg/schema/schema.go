// Package schema is the PostgreSQL schema of flashsale as versioned SQL
// migrations, embedded so that every binary and test applies the same files.
// PostgreSQL is the source of truth; Redis is loaded from it.
package schema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var files embed.FS

// VersionTable records the applied migration version.
const VersionTable = "schema_version"

// Migrate brings the database at conn up to the newest migration. It takes
// an advisory lock, so several services starting at once apply each file once.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("migrate: load: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrateDSN connects to dsn, migrates and disconnects.
func MigrateDSN(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(ctx)
	return Migrate(ctx, conn)
}
