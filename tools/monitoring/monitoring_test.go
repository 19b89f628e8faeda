// Package monitoring tests deploy/monitoring: the Prometheus configuration
// and alert rules are checked and unit-tested with Debian's promtool, and
// every metric the rules use must be in README.md's metrics table (which
// the services' own tests hold to what they register).
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"flashsale/tools/metricdoc"
)

func dir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "monitoring")
}

// promtool runs promtool in deploy/monitoring; a missing promtool fails
// the test: make up (deploy/stack.sh) installs Debian's prometheus package.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): make up installs it (Debian package prometheus)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"rules are valid", []string{"check", "rules", "rules.yml"}},
		{"alerts fire and stay quiet as the tests say", []string{"test", "rules", "rules_test.yml", "rules_daily_test.yml"}},
		{"the configuration is valid and loads the rules", []string{"check", "config", "prometheus.yml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { promtool(t, tt.args...) })
	}
}

// metricName matches a service's metric in a rule expression; recording
// rules' names (level:metric:operations) carry colons and are left out.
var metricName = regexp.MustCompile(`(^|[^:a-z_])(flashsale_(?:gateway|ordersvc)_[a-z0-9_]+)`)

// The rules use no metric the services do not document (and so register).
func TestRulesUseDocumentedMetrics(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(dir(t), "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := metricdoc.Documented(metricdoc.README())
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, line := range strings.Split(string(rules), "\n") {
		if !strings.Contains(line, "expr:") {
			continue
		}
		for _, m := range metricName.FindAllStringSubmatch(line, -1) {
			name := m[2]
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && doc[base] {
					name = base
				}
			}
			used[name] = true
		}
	}
	var unknown []string
	for n := range used {
		if !doc[n] {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("rules.yml uses metrics README.md does not list: %s", strings.Join(unknown, ", "))
	}
	if len(used) < 10 {
		t.Errorf("found only %d metrics in the rules' expressions: %v", len(used), used)
	}
}
