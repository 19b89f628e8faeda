package main

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseVariants(t *testing.T) {
	vs, err := parseVariants([]string{"c256:DEMO_ARGS=-connections 256 -max-workers 256", "gw2:DEMO_GATEWAYS=2;FLASHSALE_PUBLISH_LINGER=5ms"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].label != "c256" || !slices.Equal(vs[0].env, []string{"DEMO_ARGS=-connections 256 -max-workers 256"}) ||
		!slices.Equal(vs[1].env, []string{"DEMO_GATEWAYS=2", "FLASHSALE_PUBLISH_LINGER=5ms"}) {
		t.Fatalf("parsed %+v", vs)
	}
	if vs, err := parseVariants(nil); err != nil || len(vs) != 1 || vs[0].label != "default" || vs[0].env != nil {
		t.Fatalf("no variant: %+v %v, want the defaults alone", vs, err)
	}
	// README's way to compare two builds: a label alone runs the defaults.
	if vs, err := parseVariants([]string{"old:DEMO_BIN=/tmp/old", "new:"}); err != nil || len(vs) != 2 || vs[1].label != "new" || vs[1].env != nil {
		t.Fatalf("a label alone: %+v %v, want the defaults under that label", vs, err)
	}
	for _, bad := range [][]string{{"nolabel"}, {":A=1"}, {"a:NOVALUE"}, {"a:A=1;"}, {"a/b:A=1"}, {"a:A=1", "a:B=2"}} {
		if _, err := parseVariants(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// Variants alternate A B, B A, so a drift in the machine's load falls on
// each alike.
func TestScheduleAlternates(t *testing.T) {
	vs := []variant{{label: "a"}, {label: "b"}}
	var got []string
	for _, v := range schedule(vs, 4) {
		got = append(got, v.label)
	}
	if want := []string{"a", "b", "b", "a", "a", "b", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("schedule %v, want %v", got, want)
	}
}

func TestTableSummarisesEachVariant(t *testing.T) {
	mk := func(v string, sell, persist int64, p99, stack float64, lost int64) result {
		r := result{variant: v, SellOutMs: sell, PersistMs: persist, StackCPU: stack,
			SellingCPUMs: map[string]float64{"gateway": 900, "kafka": 1200}}
		r.Latency = map[string]struct {
			P50 float64 `json:"p50"`
			P99 float64 `json:"p99"`
		}{"accepted": {P50: 10, P99: p99}}
		r.Audit.StockConserved, r.Audit.Lost = true, lost
		return r
	}
	runs := []result{mk("a", 2000, 2050, 100, 400, 0), mk("a", 3000, 3020, 300, 500, 0), mk("a", 2500, 2600, 200, 450, 1), mk("b", 1500, 1510, 50, 300, 0)}
	runs[1].Backlog = 8500
	out := table(runs, []variant{{label: "a"}, {label: "b"}})
	for _, want := range []string{
		"| a | 3 | 2,000 / 2,500 / 3,000 ms | +50 ms | 200 ms | 450 µs |",
		"| b | 1 | 1,500 / 1,500 / 1,500 ms | +10 ms | 50 ms | 300 µs |",
		"kafka 1200 ms, gateway 900 ms | 8500 | pass |",
		"kafka 1200 ms, gateway 900 ms | 0 | pass |",
		"**FAIL** (oversold 0, lost 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "usage: go run ./benchmarks/cmd/demoruns") {
		t.Fatalf("-h: %v\n%s", err, out.String())
	}
}
