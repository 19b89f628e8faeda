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
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"flashsale/loadtest/internal/run"
	"flashsale/pkg/config"
	"flashsale/pkg/profiling"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runMain(ctx, os.Args[1:], config.Environ(os.Environ()), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// runMain runs the sale env and the flags describe. -h prints the flags
// and needs no configuration.
func runMain(ctx context.Context, args []string, env config.Env, stdout, stderr io.Writer) error {
	o, envErr := run.FromEnv(env)
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	// The secrets' flags default to nothing, so that -h never prints one.
	var adminToken, jwtKey string
	var prof profiling.Config
	var gcPercent int
	fs.StringVar(&o.GatewayURL, "gateway", o.GatewayURL, "gateway base URL")
	fs.StringVar(&o.GatewayAdminURL, "gateway-admin", o.GatewayAdminURL, "gateway admin base URL, for its peak memory (empty: skip)")
	fs.StringVar(&o.AdminURL, "admin", o.AdminURL, "order service admin base URL")
	fs.StringVar(&adminToken, "admin-token", "", "admin bearer token (default FLASHSALE_ADMIN_TOKEN or FLASHSALE_ADMIN_TOKEN_FILE; a flag shows in ps)")
	fs.StringVar(&jwtKey, "jwt-key", "", "HS256 key to mint shopper tokens (default FLASHSALE_JWT_HS256_KEY or FLASHSALE_JWT_HS256_KEY_FILE; a flag shows in ps)")
	fs.StringVar(&o.JWTIssuer, "jwt-issuer", o.JWTIssuer, "issuer of minted tokens (FLASHSALE_JWT_ISSUER)")
	fs.StringVar(&o.PostgresDSN, "pg", o.PostgresDSN, "PostgreSQL DSN for the audit (FLASHSALE_PG_DSN)")
	fs.StringVar(&o.RedisAddr, "redis", o.RedisAddr, "Redis address for the audit (FLASHSALE_REDIS_ADDR)")
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
	fs.TextVar(&o.Client, "client", o.Client, "the generator's HTTP client: fasthttp (behind vegeta's attacker; about a third less of the generator's CPU per request) or net/http (vegeta's stock client)")
	fs.BoolVar(&o.Queue, "queue", false, "send the crowd through the virtual queue (pre-queue, draw, admission)")
	fs.Int64Var(&o.AdmissionRate, "admission-rate", o.AdmissionRate, "with -queue: shoppers admitted per second")
	fs.Float64Var(&o.PayShare, "pay-share", 0, "fraction of winners who pay (the rest expire)")
	fs.DurationVar(&o.OpenIn, "open-in", o.OpenIn, "the sale opens this long after setup")
	fs.DurationVar(&o.QuietWait, "quiet-wait", o.QuietWait, "bound on waiting, before the sale, for the order service to expire what earlier sales left due (0: do not wait)")
	fs.DurationVar(&o.PersistTimeout, "persist-timeout", o.PersistTimeout, "bound on waiting for accepted orders to be persisted")
	fs.IntVar(&o.PollSample, "poll-sample", o.PollSample, "accepted orders checked through the polling endpoint")
	fs.StringVar(&o.OutDir, "out", o.OutDir, "directory for results.bin, report.json and plot.html")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow targets that are not loopback")
	fs.StringVar(&prof.CPUProfile, "cpuprofile", "", "write the generator's own CPU profile to this file (go tool pprof)")
	fs.IntVar(&gcPercent, "gc-percent", defaultGCPercent, "the generator's garbage-collection target while it runs (as GOGC, which it overrides; -1: off)")
	fs.StringVar(&prof.AllocProfile, "allocprofile", "", "write the generator's own allocation profile to this file at the end (go tool pprof -sample_index=alloc_objects)")
	redactDefault(fs.Lookup("pg"))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("command line: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("command line: unexpected arguments %q (see loadtest -h)", fs.Args())
	}
	if envErr != nil {
		return fmt.Errorf("configuration:\n%w", envErr)
	}
	if adminToken != "" {
		o.AdminToken = adminToken
	}
	if jwtKey != "" {
		o.JWTKey = []byte(jwtKey)
	}
	sayDatabase(stderr, o.PostgresDSN)
	debug.SetGCPercent(gcPercent)
	stopProfile, err := profiling.Start(prof)
	if err != nil {
		return err
	}
	_, err = run.Run(ctx, o, stdout, stderr)
	if perr := stopProfile(); perr != nil {
		fmt.Fprintln(stderr, "loadtest:", perr)
	}
	if errors.Is(err, run.ErrAuditFailed) {
		return fmt.Errorf("the audit found broken invariants (see the report above)")
	}
	if errors.Is(err, run.ErrNotSoldOut) {
		return fmt.Errorf("the sale did not sell out although the crowd could buy every unit (see the report above)")
	}
	return err
}

// defaultGCPercent is the generator's GOGC. Its 500,000 tokens and what it
// keeps of the answers hold about 130 MB live through a demo; at Go's
// default of 100 it collected every 350 ms while selling, each time 11-16
// ms of marking on the two cores the stack under test shares, and the
// shoppers whose answers waited meanwhile made the accepted p99. At 400
// it collects about once in a sale (benchmarks/README.md: sell-out 579
// against 648 ms, accepted p99 22 against 29 ms), for a peak heap of
// about 650 MB.
const defaultGCPercent = 400

// sayDatabase tells the operator which database the audit reads (and the
// sale is created in): without configuration it is the development one.
func sayDatabase(stderr io.Writer, dsn string) {
	from := "FLASHSALE_PG_DSN or -pg"
	if dsn == run.Defaults().PostgresDSN {
		from = "the development default: FLASHSALE_PG_DSN and -pg not set"
	}
	fmt.Fprintf(stderr, "loadtest: using database %s (%s)\n", config.RedactedDSN(dsn), from)
}

const usage = `usage: loadtest [flags]

Runs one whole flash sale against a running stack: creates the sale, sends a
crowd of distinct shoppers at it with vegeta, waits until every accepted order
is persisted, audits the invariants and reports (the last line on stdout is a
JSON summary). The secrets, the issuer, the database and Redis come from the
environment or the FLASHSALE_CONFIG file as the services read them (NAME or
NAME_FILE for a secret); a flag overrides them.

flags:
`

// redactDefault hides the password of the DSN -h would print as a default.
func redactDefault(f *flag.Flag) {
	if u, err := url.Parse(f.DefValue); err == nil {
		f.DefValue = u.Redacted()
	}
}
