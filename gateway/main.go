// Command gateway is the flash-sale edge: it admits shoppers, reserves
// units in Redis and publishes accepted orders to Kafka.
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

	"golang.org/x/sync/errgroup"

	"flashsale/gateway/internal/app"
	"flashsale/gateway/internal/config"
	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/logging"
	"flashsale/pkg/profiling"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], pkgconfig.Environ(os.Environ()), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

const usage = `usage: gateway [-h]

The flash-sale edge: rate limits, the virtual queue, the purchase path
(Redis reserve, Kafka publish) on FLASHSALE_GATEWAY_ADDR, and the operator
endpoints (metrics, health, limits, dashboard) on FLASHSALE_GATEWAY_ADMIN_ADDR.

It takes no arguments. Configuration comes from FLASHSALE_* environment
variables over the file named by FLASHSALE_CONFIG (KEY=VALUE lines); the
variables are listed in README.md, "Configuration". Secrets can come from
files: NAME_FILE=/path. A variable or file key no flashsale program reads is
an error.

SIGHUP re-reads the configuration and applies the rate limits whose value in
it changed since the last load (limits set with PUT /admin/limits otherwise
stay) and FLASHSALE_QUEUE_BYPASS; other settings need a restart, and a
warning names those whose value changed.
`

// run starts the gateway with env (a snapshot of the environment) until ctx
// ends, logging to stderr. -h prints the usage on stdout, needing no
// configuration.
func run(ctx context.Context, args []string, env pkgconfig.Env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("command line: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("command line: unexpected arguments %q (see gateway -h)", fs.Args())
	}
	// SIGHUP re-reads the configuration (the FLASHSALE_CONFIG file) and
	// applies the live settings; a bad file is reported and changes nothing.
	// It is caught from here on: app.New dials Redis and reads the catalog,
	// and a HUP meanwhile (a configuration push to every gateway) would
	// otherwise kill the process. One that came during the start is applied
	// once it is up.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := config.Load(env)
	if err != nil {
		return err
	}
	log := logging.New(stderr, cfg.Log, "gateway")
	for _, a := range cfg.Advice() {
		log.Warn("configuration works against itself", "advice", a)
	}
	stopProfile, err := profiling.StartLogged(cfg.Profile, log)
	if err != nil {
		return err
	}
	defer stopProfile()
	g, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				next, err := config.Load(env)
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
