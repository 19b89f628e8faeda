package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("print result: %w", err)
	}
	return nil
}

func newFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected arguments %q", ErrUsage, fs.Name(), fs.Args())
	}
	return nil
}

func defineMigrate(*flag.FlagSet) action {
	return func(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
		sayDatabase(stderr, cfg)
		pool, from, to, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		return printJSON(stdout, map[string]int32{"fromVersion": from, "toVersion": to})
	}
}

type itemFlags []string

func (f *itemFlags) String() string     { return strings.Join(*f, ",") }
func (f *itemFlags) Set(v string) error { *f = append(*f, v); return nil }

func defineCreateSale(fs *flag.FlagSet) action {
	name := fs.String("name", "", "sale name (required)")
	startsAt := fs.String("starts-at", "", "start time, RFC 3339 or +duration from now, e.g. +30s (required)")
	duration := fs.Duration("duration", time.Hour, "how long the sale stays open")
	ttl := fs.Duration("payment-ttl", 10*time.Minute, "time a PENDING order has to be paid")
	queued := fs.Bool("queue", false, "shoppers need an admission token from the virtual queue")
	draw := fs.Bool("queue-draw", store.DefaultQueue.Draw, "order early joiners by a random draw at the opening")
	rate := fs.Int64("admission-rate", store.DefaultQueue.AdmissionRate, "shoppers admitted per second at the start")
	pow := fs.Int("pow", 0, "proof-of-work difficulty (leading zero bits) to join the queue")
	shards := fs.Int("shards", 1, "Redis shards per item's stock (more for a hot item on a Redis Cluster)")
	key := fs.String("idempotency-key", "", "create the sale once: run again with the same key and flags, get the same sale (use an absolute --starts-at: +30s is another time on each run)")
	var items itemFlags
	fs.Var(&items, "item", "name:price:quantity[:productId], repeatable (at least one)")
	return func(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
		start, err := sale.ParseStart(*startsAt, time.Now())
		if err != nil {
			return err
		}
		ns := store.NewSale{Name: *name, StartsAt: start, EndsAt: start.Add(*duration), PaymentTTL: *ttl,
			Queue: store.Queue{Enabled: *queued, Draw: *draw, AdmissionRate: *rate, PowDifficulty: *pow}, StockShards: *shards}
		for _, spec := range items {
			it, err := sale.ParseItem(spec)
			if err != nil {
				return err
			}
			ns.Items = append(ns.Items, it)
		}
		if err := sale.Validate(ns); err != nil {
			return err
		}
		sayDatabase(stderr, cfg)
		pool, err := openPool(ctx, cfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		// No Redis here: loading stock is its own step (load-stock).
		v, replayed, err := sale.NewService(store.New(pool), nil).CreateOnce(ctx, *key, ns)
		if err != nil {
			return err
		}
		if replayed {
			fmt.Fprintf(stderr, "sale %d was made by an earlier run with this idempotency key; nothing created\n", v.ID)
		}
		return printJSON(stdout, v)
	}
}

func defineLoadStock(fs *flag.FlagSet) action {
	id := fs.Int64("sale", 0, "sale id (required)")
	force := fs.Bool("force", false, "load even when the sale is open and already loaded (drops the reservations in flight; reconcile --repair keeps them)")
	return func(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
		if *id <= 0 {
			return fmt.Errorf("%w: load-stock: --sale must be a positive sale id", ErrUsage)
		}
		sales, closeAll, err := openSales(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer closeAll()
		res, err := sales.LoadStock(ctx, *id, *force)
		if err != nil {
			return err
		}
		return printJSON(stdout, res)
	}
}
