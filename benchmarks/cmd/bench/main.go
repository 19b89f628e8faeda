// Command bench runs our gateway and the baseline designs side by side
// under one crowd and one load generator, and prints the results table
// with the ratios of this run. `make bench` runs it through
// benchmarks/run.sh, which starts the services the way deploy/demo.sh does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"flashsale/benchmarks/report"
	"flashsale/benchmarks/suite"
	pkgconfig "flashsale/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], pkgconfig.Environ(os.Environ()), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, env pkgconfig.Env, stdout, stderr io.Writer) error {
	src := pkgconfig.NewSource(env)
	o := suite.Options{
		GatewayURL:   "http://127.0.0.1:18080",
		AdminURL:     "http://127.0.0.1:18091",
		AdminToken:   string(src.Secret("FLASHSALE_ADMIN_TOKEN")),
		JWTKey:       src.Secret("FLASHSALE_JWT_HS256_KEY"),
		JWTIssuer:    src.String("FLASHSALE_JWT_ISSUER", "flashsale"),
		PostgresDSN:  src.String("FLASHSALE_PG_DSN", "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable"),
		RedisAddr:    src.String("FLASHSALE_REDIS_ADDR", "127.0.0.1:16379"),
		Shoppers:     50_000,
		Stock:        10_000,
		Connections:  256,
		Workers:      256,
		Bound:        60 * time.Second,
		Timeout:      10 * time.Second,
		PGConns:      32,
		Rounds:       3,
		PersistBound: 30 * time.Second,
		QuietWait:    time.Minute,
	}
	var only, outDir, machine string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.GatewayURL, "gateway", o.GatewayURL, "our gateway's public base URL (loopback)")
	fs.StringVar(&o.AdminURL, "admin", o.AdminURL, "the order service's admin base URL (loopback)")
	fs.IntVar(&o.GatewayPID, "gateway-pid", 0, "the gateway's pid, to report its resident memory")
	fs.StringVar(&o.BaselineBin, "baseline-bin", "benchmarks/out/bin/baseline", "the baseline command")
	fs.IntVar(&o.Shoppers, "shoppers", o.Shoppers, "distinct shoppers; each sends one purchase per attack")
	fs.IntVar(&o.Stock, "stock", o.Stock, "units on sale in the selling scenario")
	fs.IntVar(&o.Connections, "connections", o.Connections, "HTTP connections of the generator")
	fs.Uint64Var(&o.Workers, "workers", o.Workers, "requests in flight (closed loop, the same for every target)")
	fs.DurationVar(&o.Bound, "bound", o.Bound, "time bound of each attack")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds of the sold-out scenario (alternating targets; the median is kept)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "per-request timeout")
	fs.TextVar(&o.Client, "client", o.Client, "the generator's HTTP client, the same for every target: net/http (vegeta's stock client) or fasthttp (about a third less of the generator's CPU per request: a higher ceiling for the sold-out scenario)")
	fs.IntVar(&o.PGConns, "pg-conns", o.PGConns, "PostgreSQL pool size of the pg-* baselines")
	fs.DurationVar(&o.PersistBound, "persist-bound", o.PersistBound, "bound on waiting for the gateway's orders to reach PostgreSQL")
	fs.DurationVar(&o.QuietWait, "quiet-wait", o.QuietWait, "bound on waiting, before each selling step, for the order service to expire what earlier sales left due (0: do not wait)")
	fs.StringVar(&only, "only", "", "comma-separated steps to run (default all): "+strings.Join(suite.Steps(), ","))
	fs.StringVar(&outDir, "out", "benchmarks/out", "directory for the table (.md) and the rows (.json)")
	fs.StringVar(&o.ProfileDir, "baseline-profile", "", "directory where each baseline writes a CPU profile (go tool pprof)")
	fs.StringVar(&machine, "machine", "", "description of the machine for the table (default: cores and loopback)")
	// -h needs no configuration: the flags first, then its problems.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	src.RejectUnknown()
	if err := src.Err(); err != nil {
		return err
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
	}
	o.LogDir = filepath.Join(outDir, "logs")
	if machine == "" {
		machine = describeMachine()
	}
	started := time.Now()
	rows, runErr := suite.Run(ctx, o, stderr)
	if len(rows) == 0 {
		return runErr
	}
	meta := report.Meta{When: started, Machine: machine, Shoppers: o.Shoppers, Stock: o.Stock,
		Connections: o.Connections, Workers: o.Workers, Client: o.Client.String(), Bound: o.Bound, PGConns: o.PGConns, Rounds: o.Rounds,
		Command: "bench " + strings.Join(args, " ")}
	return errors.Join(runErr, publish(stdout, stderr, outDir, meta, rows))
}

// publish prints the run's table, saves it under outDir, and fails the run
// if our gateway oversold in any scenario.
func publish(stdout, stderr io.Writer, outDir string, meta report.Meta, rows []report.Row) error {
	ratios := report.Ratios(rows)
	if err := report.Markdown(stdout, meta, rows, ratios); err != nil {
		return err
	}
	if err := save(outDir, meta.When, meta, rows, ratios); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: table and rows written to %s (latest.md, bench-%s.{md,json})\n", outDir, meta.When.UTC().Format("20060102T150405Z"))
	var errs []error
	for _, r := range rows {
		if r.Target == report.Gateway && r.Oversold() > 0 {
			errs = append(errs, fmt.Errorf("our gateway oversold %d units in the %s scenario", r.Oversold(), r.Scenario))
		}
	}
	return errors.Join(errs...)
}

// save writes bench-<time>.md and .json, and latest.md.
func save(dir string, at time.Time, meta report.Meta, rows []report.Row, ratios []report.Ratio) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output dir: %w", err)
	}
	stamp := at.UTC().Format("20060102T150405Z")
	var md strings.Builder
	if err := report.Markdown(&md, meta, rows, ratios); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Meta   report.Meta    `json:"meta"`
		Rows   []report.Row   `json:"rows"`
		Ratios []report.Ratio `json:"ratios"`
	}{meta, rows, ratios}, "", "  ")
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"bench-" + stamp + ".md":   []byte(md.String()),
		"bench-" + stamp + ".json": js,
		"latest.md":                []byte(md.String()),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
