// Package app is the ordersvc command line: one Run over subcommands,
// each in its own file. main only wires signals and exits.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
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
  load-stock   --sale ID   load a sale's stock and holders into Redis from PostgreSQL
  reconcile    --sale ID [--repair]   compare Redis with PostgreSQL (one JSON line per difference,
               exit code 1 when they differ); --repair rewrites Redis, keeping orders in flight

load-stock and reconcile --repair first wait (FLASHSALE_RECONCILE_CATCHUP_TIMEOUT) until the
consumer group has committed every order in the orders topic, and fail if it has not.

configuration comes from FLASHSALE_* environment variables (see internal/config).
`

// Run executes the command in args (without the program name) and returns
// its error; it prints command output to stdout and logs to stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	mode := config.Tool
	if cmd == "serve" {
		mode = config.Serve
	}
	switch cmd {
	case "serve", "migrate", "create-sale", "load-stock", "reconcile":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return fmt.Errorf("%w: unknown command %q\n%s", ErrUsage, cmd, usage)
	}
	cfg, err := config.Load(getenv, mode)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("service", "ordersvc")
	switch cmd {
	case "migrate":
		return runMigrate(ctx, cfg, args, stdout)
	case "create-sale":
		return runCreateSale(ctx, cfg, args, stdout)
	case "load-stock":
		return runLoadStock(ctx, cfg, args, stdout)
	case "reconcile":
		return runReconcile(ctx, cfg, args, stdout)
	default:
		if len(args) > 0 {
			return fmt.Errorf("%w: serve takes no arguments, got %q", ErrUsage, args)
		}
		return Serve(ctx, cfg, log)
	}
}

func openPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, cfg.PGDSN)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	return pool, nil
}

// openLag reads the consumer group's lag on the orders topic; load-stock
// and a reconcile repair wait on it.
func openLag(cfg config.Config) (*lag.Reader, error) {
	return lag.New(lag.Config{Brokers: cfg.KafkaBrokers, Topic: cfg.OrdersTopic, Group: cfg.ConsumerGroup})
}

func openRedis(cfg config.Config) (rueidis.Client, error) {
	// The stock keys are written by scripts and read once per admin call:
	// client-side caching would only add invalidation traffic.
	// One node or a cluster's seed list: redisconn lets rueidis pick the mode.
	rc, err := redisconn.New(cfg.RedisAddr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
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
func openSales(ctx context.Context, cfg config.Config) (svc *sale.Service, closeAll func(), err error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	rc, err := openRedis(cfg)
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
