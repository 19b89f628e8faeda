package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flashsale/benchmarks/report"
	pkgconfig "flashsale/pkg/config"
)

func TestRunReportsEveryProblemBeforeDialing(t *testing.T) {
	env := map[string]string{}
	err := run(context.Background(), []string{"-shoppers", "0", "-gateway", "http://192.0.2.1:80"},
		pkgconfig.Vars(env), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("run = nil, want the configuration problems")
	}
	for _, want := range []string{"-jwt-key", "-admin-token", "-shoppers", "not loopback"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v, want it to name %q", err, want)
		}
	}
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 15, 59, 12, 0, time.UTC)
	rows := []report.Row{{Scenario: report.SoldOut, Target: report.Bare, Requests: 10, Elapsed: time.Second,
		Counts: map[string]int{"sold_out": 10}, SellOut: -1, Persisted: -1, StoreOversold: -1, ServerCPU: -1}}
	if err := save(dir, at, report.Meta{When: at}, rows, report.Ratios(rows)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"latest.md", "bench-20261202T155912Z.md", "bench-20261202T155912Z.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !strings.Contains(string(b), "bare") {
			t.Errorf("%s lacks the bare row:\n%s", name, b)
		}
	}
}
