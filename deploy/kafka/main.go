// Command kafka-broker is the Kafka-protocol broker of the local development
// stack. It wraps github.com/twmb/franz-go/pkg/kfake as a single broker on
// 127.0.0.1, persisting to a data folder, with the flash-sale topics seeded.
// Production points bootstrap.servers at a real Kafka cluster instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-broker:", err)
		os.Exit(1)
	}
}

// run serves the broker until ctx is cancelled, or with -probe checks a
// running one. Logs go to stdout so one redirect captures everything.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.Probe {
		return probe(ctx, cfg, stdout)
	}
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return serve(ctx, cfg, log)
}
