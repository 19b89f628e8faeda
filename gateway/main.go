// Command gateway is the flash-sale edge: it admits shoppers, reserves
// units in Redis and publishes accepted orders to Kafka.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sync/errgroup"

	"flashsale/gateway/internal/app"
	"flashsale/gateway/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("FLASHSALE_LOG_LEVEL: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: level}))
	g, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	// SIGHUP re-reads the configuration (the FLASHSALE_CONFIG file) and
	// applies the live settings; a bad file is reported and changes nothing.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				next, err := config.Load(getenv)
				if err != nil {
					log.Error("configuration not reloaded", "err", err)
					continue
				}
				g.Reload(ctx, next)
			}
		}
	})
	eg.Go(func() error { return g.Serve(ctx) })
	return eg.Wait()
}
