package workspace_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// commandLines are the help requests each binary must answer, keyed by
// its package; every main package of the workspace must be here (the test
// fails for one that is not, so a new binary gets its help checked).
var commandLines = map[string][][]string{
	"flashsale/gateway": {{"-h"}, {"--help"}},
	"flashsale/ordersvc": {{"-h"}, {"--help"}, {"help"},
		{"serve", "-h"}, {"migrate", "-h"}, {"create-sale", "--help"}, {"load-stock", "-h"}, {"reconcile", "-h"}},
	"flashsale/loadtest":                {{"-h"}, {"--help"}},
	"flashsale/deploy/kafka":            {{"-h"}, {"--help"}, {"probe", "-h"}, {"topics", "--help"}},
	"flashsale/benchmarks/cmd/baseline": {{"-h"}, {"--help"}},
	"flashsale/benchmarks/cmd/bench":    {{"-h"}, {"--help"}},
	"flashsale/benchmarks/cmd/demoruns": {{"-h"}, {"--help"}},
}

// mainPackages lists the workspace's commands: import path -> directory.
func mainPackages(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range workModules(t, dir) {
		cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{.Dir}}{{end}}`, "./...")
		cmd.Dir = filepath.Join(dir, m)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", m, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if imp, d, ok := strings.Cut(line, " "); ok {
				out[imp] = d
			}
		}
	}
	return out
}

// Every binary, and every subcommand, answers -h and --help with its usage
// on exit status 0, without reading any configuration: the environment
// holds a config file that does not exist and a variable nothing reads,
// either of which would stop a binary that loaded its configuration.
func TestEveryBinaryHelps(t *testing.T) {
	dir := root(t)
	mains := mainPackages(t, dir)
	for imp := range mains {
		if _, ok := commandLines[imp]; !ok {
			t.Errorf("command %s has no help check: add it to commandLines", imp)
		}
	}
	bin := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"FLASHSALE_CONFIG=/nonexistent/flashsale.env", "FLASHSALE_NOT_A_SETTING=1"}
	for _, imp := range slices.Sorted(func(yield func(string) bool) {
		for k := range commandLines {
			if !yield(k) {
				return
			}
		}
	}) {
		pkgDir, ok := mains[imp]
		if !ok {
			t.Errorf("commandLines names %s, which is not a command of the workspace", imp)
			continue
		}
		exe := filepath.Join(bin, path.Base(imp))
		build := exec.Command("go", "build", "-o", exe, ".")
		build.Dir = pkgDir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", imp, err, out)
		}
		for _, args := range commandLines[imp] {
			t.Run(path.Base(imp)+" "+strings.Join(args, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				cmd := exec.CommandContext(t.Context(), exe, args...)
				cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
				cmd.WaitDelay = 5 * time.Second
				err := cmd.Run()
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					t.Fatalf("exit status %d, want 0\nstdout: %s\nstderr: %s", exit.ExitCode(), stdout.String(), stderr.String())
				} else if err != nil {
					t.Fatal(err)
				}
				if text := strings.ToLower(stdout.String() + stderr.String()); !strings.Contains(text, "usage") {
					t.Errorf("no usage text\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
				}
			})
		}
	}
}
