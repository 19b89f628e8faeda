// Package metricdoc reads the metrics table of README.md ("## Metrics"),
// so that tests can hold it to what the services register and to what
// the alert rules use: a metric added, renamed or dropped in one place
// and not the others fails a test.
package metricdoc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Section is the README heading whose tables list the metrics.
const Section = "## Metrics"

// README is the repository's README.md, found from this source file.
func README() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "README.md")
}

// Documented returns the metric names in the first column of the tables
// of the Metrics section (a name in backquotes opens each row).
func Documented(readme string) (map[string]bool, error) {
	f, err := os.Open(readme)
	if err != nil {
		return nil, fmt.Errorf("read metrics table: %w", err)
	}
	defer f.Close()
	names := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == Section
			continue
		}
		cell, ok := strings.CutPrefix(line, "| `")
		if !in || !ok {
			continue
		}
		if name, _, ok := strings.Cut(cell, "`"); ok {
			names[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics table: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no metrics table under %q", readme, Section)
	}
	return names, nil
}

// Compare gathers g and compares the names under prefix with README.md's
// table: "" when they agree, else what differs.
func Compare(g prometheus.Gatherer, prefix string) (string, error) {
	fams, err := g.Gather()
	if err != nil {
		return "", fmt.Errorf("gather metrics: %w", err)
	}
	exist := map[string]bool{}
	for _, f := range fams {
		exist[f.GetName()] = true
	}
	doc, err := Documented(README())
	if err != nil {
		return "", err
	}
	return Diff(doc, exist, prefix), nil
}

// Diff compares the names under prefix that are documented with those
// that exist; it describes each name missing on one side, "" when both
// agree.
func Diff(documented, exist map[string]bool, prefix string) string {
	var undocumented, stale []string
	for n := range exist {
		if strings.HasPrefix(n, prefix) && !documented[n] {
			undocumented = append(undocumented, n)
		}
	}
	for n := range documented {
		if strings.HasPrefix(n, prefix) && !exist[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(stale)
	var b strings.Builder
	if len(undocumented) > 0 {
		fmt.Fprintf(&b, "registered but not in README.md's %q table: %s\n", Section, strings.Join(undocumented, ", "))
	}
	if len(stale) > 0 {
		fmt.Fprintf(&b, "in README.md's %q table but not registered: %s\n", Section, strings.Join(stale, ", "))
	}
	return b.String()
}
