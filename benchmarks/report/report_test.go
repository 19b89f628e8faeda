package report

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func row(scenario, target string, requests int, elapsed time.Duration, counts map[string]int) Row {
	return Row{Scenario: scenario, Target: target, Requests: requests, Elapsed: elapsed, Counts: counts,
		SellOut: -1, Persisted: -1, StoreOversold: -1, ServerCPU: -1, StackCPU: -1}
}

func TestRowArithmetic(t *testing.T) {
	cases := []struct {
		name      string
		r         Row
		rps       float64
		oversold  int
		other     int
		cpuPerReq time.Duration
	}{
		{
			// 10,000 requests in 2 s; no CPU figure.
			name: "plain", r: row(SoldOut, Bare, 10_000, 2*time.Second, map[string]int{"sold_out": 10_000}),
			rps: 5000, oversold: 0, other: 0, cpuPerReq: -1,
		},
		{
			// An attack that never got an answer has no rate, not a division by zero.
			name: "empty", r: row(SoldOut, Bare, 0, 0, map[string]int{}),
			rps: 0, oversold: 0, other: 0, cpuPerReq: -1,
		},
		{
			// 202s beyond the stock are oversold, even if the store says less.
			name: "told beyond stock", r: func() Row {
				r := row(Selling, RedisNaive, 100, time.Second, map[string]int{"accepted": 12, "sold_out": 85, "errors": 3})
				r.Stock, r.StoreOversold = 10, 1
				return r
			}(),
			rps: 100, oversold: 2, other: 3, cpuPerReq: -1,
		},
		{
			// The store holding more than the shoppers were told also counts.
			name: "store beyond stock", r: func() Row {
				r := row(Selling, PGUpdate, 100, time.Second, map[string]int{"accepted": 10, "sold_out": 90})
				r.Stock, r.StoreOversold = 10, 4
				return r
			}(),
			rps: 100, oversold: 4, other: 0, cpuPerReq: -1,
		},
		{
			// Any 202 on a sale with no stock is an oversell.
			name: "sold-out scenario accepted", r: row(SoldOut, Gateway, 10, time.Second, map[string]int{"accepted": 1, "sold_out": 9}),
			rps: 10, oversold: 1, other: 0, cpuPerReq: -1,
		},
		{
			// 1 s of server CPU over 50,000 requests is 20 µs each.
			name: "cpu per request", r: func() Row {
				r := row(SoldOut, Gateway, 50_000, 4*time.Second, map[string]int{"sold_out": 50_000})
				r.ServerCPU = time.Second
				return r
			}(),
			rps: 12_500, oversold: 0, other: 0, cpuPerReq: 20 * time.Microsecond,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.r.RPS(); math.Abs(got-c.rps) > 1e-9 {
				t.Errorf("RPS() = %v, want %v", got, c.rps)
			}
			if got := c.r.Oversold(); got != c.oversold {
				t.Errorf("Oversold() = %d, want %d", got, c.oversold)
			}
			if got := c.r.Other(); got != c.other {
				t.Errorf("Other() = %d, want %d", got, c.other)
			}
			if got := c.r.CPUPerRequest(); got != c.cpuPerReq {
				t.Errorf("CPUPerRequest() = %v, want %v", got, c.cpuPerReq)
			}
		})
	}
}

func TestRatios(t *testing.T) {
	full := []Row{
		row(SoldOut, Bare, 10_000, time.Second, nil),   // 10,000/s
		row(SoldOut, Gateway, 9_000, time.Second, nil), // 9,000/s
		func() Row {
			r := row(Selling, Gateway, 50_000, 5*time.Second, nil) // 10,000/s
			r.SellOut = 500 * time.Millisecond
			return r
		}(),
		func() Row {
			r := row(Selling, PGUpdate, 50_000, 50*time.Second, nil) // 1,000/s
			r.SellOut = 40 * time.Second
			return r
		}(),
		func() Row {
			r := row(Selling, PGLock, 20_000, 40*time.Second, nil) // 500/s, stopped by the bound unsold
			r.Bounded = true
			return r
		}(),
		func() Row {
			r := row(Selling, RedisNaive, 50_000, 4*time.Second, nil)
			r.SellOut = 400 * time.Millisecond
			return r
		}(),
	}
	full[0].ServerCPU, full[1].ServerCPU = 200*time.Millisecond, 360*time.Millisecond // 20 and 40 µs/request

	got := map[string]Ratio{}
	for _, q := range Ratios(full) {
		got[q.Name] = q
	}
	cases := []struct {
		name  string
		value float64 // NaN: not computable
		met   bool
	}{
		// 9,000 / 10,000, below 0.95
		{"sold-out req/s: gateway / bare", 0.9, false},
		// 20 µs / 40 µs per request
		{"sold-out server CPU per request: bare / gateway", 0.5, false},
		// 10,000 / 1,000
		{"selling req/s: gateway / pg-update", 10, true},
		// 40 s / 0.5 s
		{"time to sell out: pg-update / gateway", 80, true},
		// 10,000 / 500
		{"selling req/s: gateway / pg-lock", 20, true},
		// pg-lock was still selling after 40 s: at least 40 s / 0.5 s
		{"time to sell out: pg-lock / gateway", 80, true},
		// 0.5 s / 0.4 s, above 1.2 is a miss
		{"time to sell out: gateway / redis-naive (no durability)", 1.25, false},
	}
	if len(got) != len(cases) {
		t.Errorf("%d ratios, want %d: %v", len(got), len(cases), got)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, ok := got[c.name]
			if !ok {
				t.Fatal("missing")
			}
			if math.IsNaN(c.value) != math.IsNaN(q.Value) || (!math.IsNaN(c.value) && math.Abs(q.Value-c.value) > 1e-9) {
				t.Errorf("value %v, want %v", q.Value, c.value)
			}
			if q.Met() != c.met {
				t.Errorf("Met() = %v, want %v", q.Met(), c.met)
			}
		})
	}

	t.Run("unsold without the bound", func(t *testing.T) {
		// A baseline that ran the whole crowd and still did not sell out
		// gives no time to compare: n/a, not met.
		rows := slices.Clone(full)
		rows[4].Bounded = false
		for _, q := range Ratios(rows) {
			if q.Name == "time to sell out: pg-lock / gateway" && (!math.IsNaN(q.Value) || q.Met()) {
				t.Errorf("got %v, met %v; want NaN, not met", q.Value, q.Met())
			}
		}
	})
	t.Run("missing baseline", func(t *testing.T) {
		// Without the bare row there is nothing to compare the gateway with.
		if got := Ratios(full[1:2]); len(got) != 0 {
			t.Errorf("Ratios = %v, want none", got)
		}
	})
}

func TestRatioJSON(t *testing.T) {
	cases := []struct {
		name string
		q    Ratio
		want string
	}{
		// JSON has no NaN: a ratio that could not be computed is null.
		{"nan", Ratio{Name: "a", Value: math.NaN(), Target: 10, Higher: true},
			`{"name":"a","target":10,"higher_is_better":true,"at_least":false,"value":null,"met":false}`},
		{"value", Ratio{Name: "b", Value: 12.5, Target: 10, Higher: true, AtLeast: true},
			`{"name":"b","target":10,"higher_is_better":true,"at_least":true,"value":12.5,"met":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want {
				t.Errorf("got %s, want %s", b, c.want)
			}
		})
	}
}

func TestRatioMetLowerIsBetter(t *testing.T) {
	q := Ratio{Value: 0.5, Target: 1, Higher: false}
	if !q.Met() {
		t.Errorf("0.5 with target ≤ 1: Met() = false, want true")
	}
	q.Value = 2
	if q.Met() {
		t.Errorf("2 with target ≤ 1: Met() = true, want false")
	}
}

func TestMedian(t *testing.T) {
	mk := func(requests int) Row { return row(SoldOut, Gateway, requests, time.Second, nil) }
	cases := []struct {
		name     string
		rounds   []Row
		wantRPS  float64
		wantNote string
	}{
		// One round is itself, without a note.
		{"one", []Row{mk(100)}, 100, ""},
		// The middle one, whatever the order.
		{"odd", []Row{mk(300), mk(100), mk(200)}, 200, "median of 3 rounds (300, 100, 200 req/s)"},
		// The lower of the two middle ones: the figure is one that was measured.
		{"even", []Row{mk(400), mk(100), mk(300), mk(200)}, 200, "median of 4 rounds (400, 100, 300, 200 req/s)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := Median(c.rounds)
			if m.RPS() != c.wantRPS {
				t.Errorf("RPS %v, want %v", m.RPS(), c.wantRPS)
			}
			if m.Note != c.wantNote {
				t.Errorf("note %q, want %q", m.Note, c.wantNote)
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	bare := row(SoldOut, Bare, 10_000, time.Second, map[string]int{"sold_out": 10_000})
	bare.P50, bare.P99, bare.ServerCPU = 1500*time.Microsecond, 12*time.Millisecond, 250*time.Millisecond
	naive := row(Selling, RedisNaive, 50_000, 5*time.Second, map[string]int{"accepted": 10_017, "sold_out": 39_983})
	naive.Stock, naive.StoreOversold, naive.SellOut, naive.Note = 10_000, 17, 1713*time.Millisecond, "Redis stock counter ends at -17"
	pg := row(Selling, PGLock, 24_677, 60*time.Second, map[string]int{"accepted": 10_000, "sold_out": 14_677})
	pg.Stock, pg.Bounded = 10_000, true
	gw := row(Selling, Gateway, 50_000, 3*time.Second, map[string]int{"accepted": 10_000, "sold_out": 40_000})
	gw.Stock, gw.StackCPU = 10_000, 2500*time.Millisecond
	gw.StackCPUByComponent = map[string]time.Duration{"gateway": time.Second, "kafka": 900 * time.Millisecond, "redis": 600 * time.Millisecond, "loadtest": 700 * time.Millisecond}
	var b strings.Builder
	meta := Meta{When: time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), Machine: "2 cores", Shoppers: 50_000, Stock: 10_000,
		Connections: 64, Workers: 64, Bound: time.Minute, PGConns: 32, Rounds: 3, Command: "bench"}
	ratios := []Ratio{{Name: "x / y", Value: math.NaN(), Target: 10, Higher: true}, {Name: "z / y", Value: 17.3, Target: 10, Higher: true, AtLeast: true}}
	if err := Markdown(&b, meta, []Row{bare, naive, pg, gw}, ratios); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## flashsale benchmark, 2026-12-02T15:00:00Z",
		"| sold-out | bare | 10000 | 10000 | 1.5 | 12.0 | 25 | 0 | 10000 | 0 | — | — | 0 |  |",
		"| selling | redis-naive | 50000 | 10000 | 0.0 | 0.0 | — | 10017 | 39983 | 0 | 1713.0 | — | 17 | Redis stock counter ends at -17 |",
		"| selling | pg-lock | 24677 | 411 | 0.0 | 0.0 | — | 10000 | 14677 | 0 | — | — | 0 | stopped by the time bound |",
		"CPU of the whole stack per order while gateway sold out (first request to last unit sold, read from /proc): **250 µs** (gateway 1000 ms, kafka 900 ms, loadtest 700 ms, redis 600 ms).",
		"| x / y | n/a | ≥ 10× | **no** |",
		"| z / y | > 17.30× | ≥ 10× | yes |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q; got:\n%s", want, b.String())
		}
	}
}
