// Command baseline serves one of the designs our gateway is measured
// against (see package baseline) until SIGINT or SIGTERM. It starts
// listening only once its dependencies answer, so an open port means ready.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"flashsale/benchmarks/baseline"
	pkgconfig "flashsale/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], pkgconfig.Environ(os.Environ()), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, env pkgconfig.Env, stdout io.Writer) error {
	src := pkgconfig.NewSource(env)
	cfg := baseline.Config{
		JWTKey:      src.Secret("FLASHSALE_JWT_HS256_KEY"),
		JWTIssuer:   src.String("FLASHSALE_JWT_ISSUER", "flashsale"),
		PostgresDSN: src.String("FLASHSALE_PG_DSN", "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable"),
		RedisAddr:   src.String("FLASHSALE_REDIS_ADDR", "127.0.0.1:16379"),
	}
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&cfg.Design, "design", "", "one of "+strings.Join(baseline.Designs(), ", "))
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:18180", "listen address")
	fs.IntVar(&cfg.PGConns, "pg-conns", 32, "PostgreSQL pool size of the pg-* designs")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 10*time.Second, "bound on one request's database or Redis work")
	fs.DurationVar(&cfg.PaymentTTL, "payment-ttl", 10*time.Minute, "expiry of the orders the pg-* designs write")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on draining at exit")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
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
	log := slog.New(slog.NewTextHandler(stdout, nil))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	s, err := baseline.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	log.Info("baseline listening", "design", cfg.Design, "addr", ln.Addr().String(), "pg_conns", cfg.PGConns)
	err = s.Serve(ctx, ln)
	log.Info("baseline stopped", "design", cfg.Design)
	return err
}
