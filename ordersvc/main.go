// Command ordersvc persists the orders of flashsale: it consumes the
// OrderPlaced events, writes them to PostgreSQL, returns rejected units to
// Redis and answers order lookups. See internal/app for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"flashsale/ordersvc/internal/app"
	pkgconfig "flashsale/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; restoring the default
	// handlers lets a second one end the process at once.
	context.AfterFunc(ctx, stop)
	err := app.Run(ctx, os.Args[1:], pkgconfig.Environ(os.Environ()), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordersvc:", err)
		os.Exit(1)
	}
}
