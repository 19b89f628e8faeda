package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/sale"
)

// ErrDifferences: reconcile found Redis and PostgreSQL disagreeing and did
// not repair them (exit code 1, so scripts and alerts can branch on it).
var ErrDifferences = errors.New("redis differs from postgres")

// reconcileSummary is the last line reconcile prints: the reconciliation
// with its differences counted, each having had a line of its own.
type reconcileSummary struct {
	sale.Reconciliation
	Differences int `json:"differences"` // hides the embedded list
}

// defineReconcile declares reconcile's flags. The command compares a
// sale's Redis copy with PostgreSQL and prints one
// JSON line per difference, then a summary line. Without --repair it
// returns ErrDifferences when there are any; with --repair it rewrites
// Redis from PostgreSQL (keeping orders in flight) and succeeds once the
// rewrite is written.
func defineReconcile(fs *flag.FlagSet) action {
	id := fs.Int64("sale", 0, "sale id (required)")
	repair := fs.Bool("repair", false, "rewrite Redis from PostgreSQL when they differ")
	return func(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
		if *id <= 0 {
			return fmt.Errorf("%w: reconcile: --sale must be a positive sale id", ErrUsage)
		}
		return reconcile(ctx, cfg, *id, *repair, stdout, stderr)
	}
}

func reconcile(ctx context.Context, cfg config.Config, id int64, repair bool, stdout, stderr io.Writer) error {
	sales, closeAll, err := openSales(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	rec, err := sales.Reconcile(ctx, id, repair)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for _, d := range rec.Differences {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("print difference: %w", err)
		}
	}
	err = enc.Encode(reconcileSummary{Reconciliation: rec, Differences: len(rec.Differences)})
	if err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	if !rec.Clean && !rec.Repaired {
		return fmt.Errorf("sale %d: %w: %d differences (run with --repair to rewrite Redis from PostgreSQL)", rec.SaleID, ErrDifferences, len(rec.Differences))
	}
	return nil
}
