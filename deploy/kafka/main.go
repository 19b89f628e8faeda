// Command kafka-admin prepares and checks the Apache Kafka brokers of the
// local stack: deploy/stack/kafka-node.sh runs `probe` until a node (or the whole
// cluster) answers, then `topics` to create the orders topic and its
// dead-letter topic with the settings production uses. It speaks to the
// brokers through confluent-kafka-go's AdminClient, the client the services
// use, so a broker it accepts is one they can use.
package main

import (
	"context"
	"errors"
	"flag"
	"flashsale/tools/kafkatopic"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-admin:", err)
		os.Exit(1)
	}
}

const usage = `usage: kafka-admin COMMAND [flags]

  probe    succeed once the brokers answer metadata (-brokers: how many must be registered)
  topics   create the orders topic and its dead-letter topic if missing, check them if present,
           and wait until every partition has a leader

Run kafka-admin COMMAND -h for the flags of one command.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "probe":
		cfg, err := parseProbe(args[1:], stderr)
		if err != nil {
			return err
		}
		return withAdmin(ctx, cfg.Bootstrap, cfg.Timeout, func(ctx context.Context, ac *kafka.AdminClient) error {
			return probe(ctx, ac, cfg, stdout)
		})
	case "topics":
		cfg, err := parseTopics(args[1:], stderr)
		if err != nil {
			return err
		}
		return withAdmin(ctx, cfg.Bootstrap, cfg.Timeout, func(ctx context.Context, ac *kafka.AdminClient) error {
			return kafkatopic.Ensure(ctx, ac, cfg.Spec, stdout)
		})
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return flag.ErrHelp
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
