// Package app is the ordersvc command line: one Run over subcommands,
// each in its own file. main only wires signals and exits.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/logging"
	"flashsale/pkg/profiling"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
)

// ErrUsage marks a bad command line.
var ErrUsage = errors.New("usage")

const usage = `usage: ordersvc [command] [flags]

commands:
  serve        migrate, then run the consumer, relay, public and admin APIs (default)
  migrate      apply the database migrations
  create-sale  --name N --starts-at (RFC3339|+30s) --duration 1h --payment-ttl 10m --item name:price:quantity[:productId] ...
               [--idempotency-key K]   (a retry with the same key and flags gets the same sale)
  load-stock   --sale ID [--force]   load a sale's stock and holders into Redis from PostgreSQL;
               refused for an open sale already loaded (it would drop orders in flight) unless --force
  reconcile    --sale ID [--repair]   compare Redis with PostgreSQL (one JSON line per difference,
               exit code 1 when they differ); --repair rewrites Redis, keeping orders in flight
  help         this text; ordersvc COMMAND -h lists a command's flags

load-stock and reconcile --repair first wait (FLASHSALE_RECONCILE_CATCHUP_TIMEOUT) until the
consumer group has committed every order in the orders topic, and fail if it has not.

Configuration comes from FLASHSALE_* environment variables over the file named by
FLASHSALE_CONFIG (KEY=VALUE lines); README.md, "Configuration", lists them. A variable or
file key no flashsale program reads is an error. The commands other than serve need no
secrets, and say on stderr which database they use.
`

// action runs a command once its flags are parsed and the configuration
// is loaded: output to stdout, logs and notes to stderr.
type action func(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error

// command is one subcommand: define declares its flags on fs and returns
// its action, so that -h lists them before any configuration is read.
type command struct {
	mode    config.Mode
	summary string
	define  func(fs *flag.FlagSet) action
}

var commands = map[string]command{
	"serve":       {config.Serve, "migrate, then run the consumer, relay, public and admin APIs", defineServe},
	"migrate":     {config.Tool, "apply the database migrations", defineMigrate},
	"create-sale": {config.Tool, "create a sale and its items in PostgreSQL (its stock is loaded by load-stock)", defineCreateSale},
	"load-stock":  {config.Tool, "load a sale's stock and holders into Redis from PostgreSQL", defineLoadStock},
	"reconcile":   {config.Tool, "compare a sale's Redis copy with PostgreSQL, and with --repair rewrite it", defineReconcile},
}

// Run executes the command in args (without the program name) and returns
// its error; it prints command output to stdout, and logs and notes to
// stderr. Help (help, -h, --help, COMMAND -h) needs no configuration.
func Run(ctx context.Context, args []string, env pkgconfig.Env, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			fmt.Fprint(stdout, usage)
			return nil
		}
		if !strings.HasPrefix(args[0], "-") {
			cmd, args = args[0], args[1:]
		}
	}
	c, ok := commands[cmd]
	if !ok {
		return fmt.Errorf("%w: unknown command %q\n%s", ErrUsage, cmd, usage)
	}
	fs := newFlags(cmd, stdout)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ordersvc %s [flags]\n\n%s.\n", cmd, c.summary)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
		fmt.Fprintln(fs.Output(), "\nConfiguration: see ordersvc -h.")
	}
	act := c.define(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	cfg, err := config.Load(env, c.mode)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return act(ctx, cfg, stdout, stderr)
}

func defineServe(*flag.FlagSet) action {
	return func(ctx context.Context, cfg config.Config, _, stderr io.Writer) error {
		log := logging.New(stderr, cfg.Log, "ordersvc")
		stopProfile, err := profiling.StartLogged(cfg.Profile, log)
		if err != nil {
			return err
		}
		defer stopProfile()
		return Serve(ctx, cfg, log)
	}
}

// sayDatabase tells the operator of a command-line tool which database it
// is about to change: without configuration it is the development one.
func sayDatabase(stderr io.Writer, cfg config.Config) {
	from := "FLASHSALE_PG_DSN"
	if cfg.PGDSNDefault {
		from = "FLASHSALE_PG_DSN not set"
	}
	fmt.Fprintf(stderr, "ordersvc: using database %s (%s)\n", config.RedactedDSN(cfg.PGDSN), from)
}

// idleInTransaction is how long PostgreSQL keeps a session of the
// service idle inside a transaction before ending it, unless the DSN sets
// idle_in_transaction_session_timeout itself (as a parameter or in
// options=-c...). A startup parameter wins over a role's or a database's
// setting (ALTER ROLE ... SET): set it in the DSN to change it. None of the service's
// transactions waits on anything but the database; one whose client went
// silent (a link that drops packets) kept its batch's item rows locked
// until the server's TCP keepalive gave up, about two hours, and every
// other writer of those items queued behind it.
const idleInTransaction = "60s"

func openPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.PGDSN)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	_, set := pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]
	if !set && !strings.Contains(pc.ConnConfig.RuntimeParams["options"], "idle_in_transaction_session_timeout") {
		pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTransaction
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	return pool, nil
}

// openMigrated opens the pool and brings the schema up to date (both the
// service and `ordersvc migrate` start so); the caller closes the pool.
func openMigrated(ctx context.Context, cfg config.Config) (pool *pgxpool.Pool, from, to int32, err error) {
	pool, err = openPool(ctx, cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	from, to, err = store.Migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, 0, 0, err
	}
	return pool, from, to, nil
}

// openLag reads the consumer group's lag on the orders topic; load-stock
// and a reconcile repair wait on it.
func openLag(cfg config.Config) (*lag.Reader, error) {
	return lag.New(lag.Config{Brokers: cfg.KafkaBrokers, Topic: cfg.OrdersTopic, Group: cfg.ConsumerGroup,
		Security: cfg.KafkaSecurity})
}

// openRedis connects to Redis and refuses one that may evict the sale's
// keys (log says when the policy cannot be read).
func openRedis(ctx context.Context, cfg config.Config, log *slog.Logger) (rueidis.Client, error) {
	// The stock keys are written by scripts and read once per admin call:
	// client-side caching would only add invalidation traffic.
	// One node or a cluster's seed list: redisconn lets rueidis pick the mode.
	rc, err := redisconn.New(cfg.RedisAddr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
		return nil, err
	}
	if err := redisconn.RefuseEviction(ctx, rc, log); err != nil {
		rc.Close()
		return nil, err
	}
	return rc, nil
}

// shardLookupTimeout bounds reading a sale's shard count from PostgreSQL.
const shardLookupTimeout = 5 * time.Second

// stockStore is the stock store every part of the service uses: it learns
// each sale's shard count from PostgreSQL (see store.ShardsOf).
func stockStore(rc rueidis.Client, st *store.Store) *stock.Store {
	return stock.New(rc, stock.WithShards(st.ShardsOf(shardLookupTimeout)))
}

// openSales opens PostgreSQL, Redis and the lag reader for a one-shot sale
// command (load-stock, reconcile) and builds the sale service over them,
// waiting for the consumer as the server does; closeAll releases all three.
func openSales(ctx context.Context, cfg config.Config, stderr io.Writer) (svc *sale.Service, closeAll func(), err error) {
	sayDatabase(stderr, cfg)
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	rc, err := openRedis(ctx, cfg, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	lr, err := openLag(cfg)
	if err != nil {
		rc.Close()
		pool.Close()
		return nil, nil, err
	}
	st := store.New(pool)
	svc = sale.NewService(st, stockStore(rc, st), sale.WithAcceptedRecords(rc), sale.WithCatchUp(lr, cfg.CatchUpTimeout),
		sale.WithInFlightWindow(cfg.InFlightWindow))
	return svc, func() { lr.Close(); rc.Close(); pool.Close() }, nil
}
