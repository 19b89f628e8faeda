package faults

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// row is one line of the reliability table: what was injected, what the
// system answered, and the audit at the end. Tests fill it from what they
// measured, so the table printed at the end of `go test -v` is this run's.
type row struct {
	Fault    string
	Injected string
	Answered string
	Audit    string
	Took     time.Duration
	Failed   bool
}

var (
	reportMu sync.Mutex
	report   []row
)

// record adds t's row to the table once the test is over, marking it
// failed if the test failed.
func record(t *testing.T, r *row) {
	start := time.Now()
	t.Cleanup(func() {
		r.Took = time.Since(start)
		r.Failed = t.Failed()
		reportMu.Lock()
		report = append(report, *r)
		reportMu.Unlock()
	})
}

func TestMain(m *testing.M) {
	// A run killed by -timeout skips t.Cleanup: a broker it froze would
	// stay frozen. Continue it first (a no-op on a running broker).
	thawLeftover()
	start := time.Now()
	code := m.Run()
	printReport(os.Stdout, time.Since(start))
	os.Exit(code)
}

func printReport(w io.Writer, total time.Duration) {
	reportMu.Lock()
	defer reportMu.Unlock()
	if len(report) == 0 {
		return
	}
	sort.SliceStable(report, func(i, j int) bool { return report[i].Fault < report[j].Fault })
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }
	fmt.Fprintf(w, "\n## Reliability run %s (%s total)\n\n", time.Now().UTC().Format(time.RFC3339), total.Round(time.Second))
	fmt.Fprintln(w, "| fault or input | injected | answered | audit | took |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range report {
		audit := r.Audit
		if r.Failed {
			audit = "**TEST FAILED** " + audit
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", cell(r.Fault), cell(r.Injected), cell(r.Answered), cell(audit), r.Took.Round(100*time.Millisecond))
	}
	fmt.Fprintln(w)
}
