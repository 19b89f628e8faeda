// Command demoruns runs the demo (deploy/demo.sh) several times, in one or
// more variants, and prints one table of the figures a capacity engineer
// sizes from, with each variant's min / median / max. Variants alternate
// A B B A … so that a neighbour's load drifting during the run falls on
// each alike. It runs from the repository's root on a running stack with
// built binaries (make up build):
//
//	go run ./benchmarks/cmd/demoruns -rounds 5
//	go run ./benchmarks/cmd/demoruns -rounds 2 'c256:DEMO_ARGS=-connections 256 -max-workers 256' \
//	    'c1024:DEMO_ARGS=-connections 1024 -max-workers 1024'
//	go run ./benchmarks/cmd/demoruns -rounds 2 gw1:DEMO_GATEWAYS=1 gw2:DEMO_GATEWAYS=2 gw4:DEMO_GATEWAYS=4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

const usage = `usage: go run ./benchmarks/cmd/demoruns [-rounds N] [-out DIR] [LABEL:[KEY=VALUE[;KEY=VALUE...]] ...]

Runs bash deploy/demo.sh N times per variant (one variant, the defaults, when
none is given), alternating variants A B B A, and prints the figures of each
run and each variant's min / median / max. A variant's settings are extra
environment variables for the demo (DEMO_USERS, DEMO_GATEWAYS, DEMO_ARGS,
FLASHSALE_* of the services...), separated by ';'; a label with none
("new:") runs the defaults.

`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demoruns:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demoruns", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	rounds := fs.Int("rounds", 5, "runs per variant")
	outDir := fs.String("out", "benchmarks/out/demoruns", "directory for each run's output and report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	variants, err := parseVariants(fs.Args())
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join("deploy", "demo.sh")); err != nil {
		return fmt.Errorf("run from the repository's root (deploy/demo.sh: %w)", err)
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	var runs []result
	for i, v := range schedule(variants, *rounds) {
		fmt.Fprintf(stderr, "demoruns: run %d of %d: %s\n", i+1, len(variants)**rounds, v.label)
		r, err := demo(ctx, v, filepath.Join(*outDir, fmt.Sprintf("%02d-%s", i+1, v.label)))
		if err != nil {
			return fmt.Errorf("run %d (%s): %w", i+1, v.label, err)
		}
		runs = append(runs, r)
	}
	fmt.Fprint(stdout, table(runs, variants))
	return nil
}

// variant is one set of settings the demo runs with.
type variant struct {
	label string
	env   []string
}

// parseVariants reads LABEL:KEY=VALUE;KEY=VALUE arguments; none means the
// demo's defaults, and so does a label with nothing after its colon ("new:"
// beside "old:DEMO_BIN=/tmp/old").
func parseVariants(args []string) ([]variant, error) {
	if len(args) == 0 {
		return []variant{{label: "default"}}, nil
	}
	seen := map[string]bool{}
	var out []variant
	for _, a := range args {
		label, settings, ok := strings.Cut(a, ":")
		if !ok || label == "" || strings.ContainsAny(label, "/ ") {
			return nil, fmt.Errorf("variant %q: want LABEL:KEY=VALUE[;KEY=VALUE...], a label without / or spaces", a)
		}
		if seen[label] {
			return nil, fmt.Errorf("variant label %q given twice", label)
		}
		seen[label] = true
		v := variant{label: label}
		if settings == "" {
			out = append(out, v)
			continue
		}
		for _, kv := range strings.Split(settings, ";") {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, fmt.Errorf("variant %s: setting %q is not KEY=VALUE", label, kv)
			}
			v.env = append(v.env, kv)
		}
		out = append(out, v)
	}
	return out, nil
}

// schedule orders the runs: the variants forward in even rounds and
// backward in odd ones (A B, B A, A B, …).
func schedule(vs []variant, rounds int) []variant {
	var out []variant
	for r := range rounds {
		for i := range vs {
			if r%2 == 0 {
				out = append(out, vs[i])
			} else {
				out = append(out, vs[len(vs)-1-i])
			}
		}
	}
	return out
}
