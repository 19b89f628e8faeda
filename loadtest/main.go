// Command loadtest runs a whole flash sale against a running stack: it
// creates the sale, sends a crowd of distinct shoppers at it with vegeta,
// waits until every accepted order is persisted, audits the invariants and
// reports. The last line on stdout is a JSON summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"flashsale/loadtest/internal/run"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runMain(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func runMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o := run.Defaults()
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envOr := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	var jwtKey string
	fs.StringVar(&o.GatewayURL, "gateway", o.GatewayURL, "gateway base URL")
	fs.StringVar(&o.GatewayAdminURL, "gateway-admin", o.GatewayAdminURL, "gateway admin base URL, for its peak memory (empty: skip)")
	fs.StringVar(&o.AdminURL, "admin", o.AdminURL, "order service admin base URL")
	fs.StringVar(&o.AdminToken, "admin-token", getenv("FLASHSALE_ADMIN_TOKEN"), "admin bearer token (env FLASHSALE_ADMIN_TOKEN)")
	fs.StringVar(&jwtKey, "jwt-key", getenv("FLASHSALE_JWT_HS256_KEY"), "HS256 key to mint shopper tokens (env FLASHSALE_JWT_HS256_KEY)")
	fs.StringVar(&o.JWTIssuer, "jwt-issuer", envOr("FLASHSALE_JWT_ISSUER", o.JWTIssuer), "issuer of minted tokens")
	fs.StringVar(&o.PostgresDSN, "pg", envOr("FLASHSALE_PG_DSN", o.PostgresDSN), "PostgreSQL DSN for the audit")
	fs.StringVar(&o.RedisAddr, "redis", envOr("FLASHSALE_REDIS_ADDR", o.RedisAddr), "Redis address for the audit")
	fs.IntVar(&o.Users, "users", o.Users, "distinct shoppers, one purchase each")
	fs.IntVar(&o.Stock, "stock", o.Stock, "units on sale in all")
	fs.IntVar(&o.Items, "items", o.Items, "items the stock is split over")
	fs.IntVar(&o.Shards, "shards", o.Shards, "Redis shards per item's stock (for a Redis Cluster)")
	fs.StringVar(&o.Profile, "profile", o.Profile, "herd (everyone at the opening), steady or ramp")
	fs.IntVar(&o.Rate, "rate", o.Rate, "requests per second (0 with herd: as fast as the machine allows)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "hard bound on the attack")
	fs.IntVar(&o.Connections, "connections", o.Connections, "HTTP connections")
	fs.Uint64Var(&o.Workers, "workers", o.Workers, "initial vegeta workers")
	fs.Uint64Var(&o.MaxWorkers, "max-workers", o.MaxWorkers, "maximum vegeta workers")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "per-request timeout")
	fs.BoolVar(&o.Queue, "queue", false, "send the crowd through the virtual queue (pre-queue, draw, admission)")
	fs.Int64Var(&o.AdmissionRate, "admission-rate", o.AdmissionRate, "with -queue: shoppers admitted per second")
	fs.Float64Var(&o.PayShare, "pay-share", 0, "fraction of winners who pay (the rest expire)")
	fs.DurationVar(&o.OpenIn, "open-in", o.OpenIn, "the sale opens this long after setup")
	fs.DurationVar(&o.PersistTimeout, "persist-timeout", o.PersistTimeout, "bound on waiting for accepted orders to be persisted")
	fs.IntVar(&o.PollSample, "poll-sample", o.PollSample, "accepted orders checked through the polling endpoint")
	fs.StringVar(&o.OutDir, "out", o.OutDir, "directory for results.bin, report.json and plot.html")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow targets that are not loopback")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.JWTKey = []byte(jwtKey)
	_, err := run.Run(ctx, o, stdout, stderr)
	if errors.Is(err, run.ErrAuditFailed) {
		return fmt.Errorf("the audit found broken invariants (see the report above)")
	}
	return err
}
