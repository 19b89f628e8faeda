// Package report is the arithmetic of the benchmark: one Row per attack,
// the ratios between targets measured in the same run, and the markdown
// table written to the terminal and to benchmarks/out/.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Scenarios of a run.
const (
	// SoldOut: a sale with no stock; every request should answer 410.
	SoldOut = "sold-out"
	// Selling: a sale with stock and a crowd several times larger.
	Selling = "selling"
)

// Targets, as named in the table.
const (
	Gateway    = "gateway"
	Bare       = "bare"
	PGUpdate   = "pg-update"
	PGLock     = "pg-lock"
	RedisNaive = "redis-naive"
)

// Row is one attack: a target under a scenario.
type Row struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Stock    int    `json:"stock"`
	Shoppers int    `json:"shoppers"` // the crowd's size; each sends once
	// Counts by outcome kind name (tools/outcome), zero kinds left out.
	Counts   map[string]int `json:"counts"`
	Requests int            `json:"requests"`
	// Elapsed is first request sent to last answer received.
	Elapsed time.Duration `json:"elapsed_ns"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	// SellOut is first request to the last accepted answer, when every unit
	// was sold; negative when the stock was not sold out.
	SellOut time.Duration `json:"sell_out_ns"`
	// Persisted is first request to every accepted order being in
	// PostgreSQL; negative when not measured or not reached.
	Persisted time.Duration `json:"persisted_ns"`
	// ServerCPU is the user+system CPU the answering process used during
	// the attack (not its database, Redis or broker); negative unknown.
	ServerCPU time.Duration `json:"server_cpu_ns"`
	// StackCPU is the CPU every process of the local stack (our gateway,
	// the broker, the order service, Redis, PostgreSQL) used from the first
	// request to the last unit sold, when measured (our gateway selling);
	// negative otherwise. StackCPUByComponent splits it (and names the load
	// generator's own, not in StackCPU).
	StackCPU            time.Duration            `json:"stack_cpu_ns"`
	StackCPUByComponent map[string]time.Duration `json:"stack_cpu_by_component_ns,omitempty"`
	// StoreOversold is what the design's own store says was sold beyond
	// the stock (PostgreSQL rows, or a negative Redis counter); -1 unknown.
	StoreOversold int    `json:"store_oversold"`
	Note          string `json:"note,omitempty"`
	// Bounded: the attack hit its duration bound before the crowd was through.
	Bounded bool `json:"bounded"`
	// RoundsRPS are the requests/s of every round when the row is a median.
	RoundsRPS []float64 `json:"rounds_rps,omitempty"`
}

// Accepted is the number of 202 answers.
func (r Row) Accepted() int { return r.Counts["accepted"] }

// RPS is requests per second over the attack.
func (r Row) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Oversold is the units sold beyond the stock: the larger of what the
// shoppers were told (202s beyond the stock) and what the store holds.
func (r Row) Oversold() int {
	return max(r.Accepted()-r.Stock, r.StoreOversold, 0)
}

// CPUPerRequest is ServerCPU over the requests; negative unknown.
func (r Row) CPUPerRequest() time.Duration {
	if r.ServerCPU < 0 || r.Requests == 0 {
		return -1
	}
	return r.ServerCPU / time.Duration(r.Requests)
}

// StackCPUPerOrder is StackCPU over the units sold; negative unknown.
func (r Row) StackCPUPerOrder() time.Duration {
	if r.StackCPU < 0 || r.Stock <= 0 {
		return -1
	}
	return r.StackCPU / time.Duration(r.Stock)
}

// Other is every answer that is neither accepted nor sold out.
func (r Row) Other() int {
	n := 0
	for k, c := range r.Counts {
		if k != "accepted" && k != "sold_out" {
			n += c
		}
	}
	return n
}

// Ratio compares two rows of the same run.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"` // NaN when a side is missing or zero
	Target float64 `json:"target"`
	// Higher says whether a higher value is better (requests/s) or a lower
	// one.
	Higher bool `json:"higher_is_better"`
	// AtLeast: the true ratio is at least Value, because the baseline was
	// stopped by the time bound before it got there.
	AtLeast bool `json:"at_least"`
}

// Met reports whether the ratio reaches its target. A lower bound that
// reaches a "higher is better" target is enough.
func (q Ratio) Met() bool {
	switch {
	case math.IsNaN(q.Value):
		return false
	case q.Higher:
		return q.Value >= q.Target
	case q.AtLeast:
		return false // a lower bound says nothing against a ceiling
	}
	return q.Value <= q.Target
}

// MarshalJSON writes a ratio that could not be computed as null: JSON has
// no NaN.
func (q Ratio) MarshalJSON() ([]byte, error) {
	type plain Ratio
	v := struct {
		plain
		Value *float64 `json:"value"`
		Met   bool     `json:"met"`
	}{plain: plain(q), Met: q.Met()}
	if !math.IsNaN(q.Value) {
		v.Value = &q.Value
	}
	return json.Marshal(v)
}

// Find returns the row of a target under a scenario.
func Find(rows []Row, scenario, target string) (Row, bool) {
	for _, r := range rows {
		if r.Scenario == scenario && r.Target == target {
			return r, true
		}
	}
	return Row{}, false
}

func div(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Ratios are the targets, computed from rows of one run:
// gateway ≥ 0.8× bare on the sold-out path, ≥ 10× each PostgreSQL design
// while selling; plus how much sooner the gateway sells out (informative,
// target 10× as well).
func Ratios(rows []Row) []Ratio {
	var out []Ratio
	if g, ok := Find(rows, SoldOut, Gateway); ok {
		if b, ok := Find(rows, SoldOut, Bare); ok {
			out = append(out, Ratio{Name: "sold-out req/s: gateway / bare", Value: div(g.RPS(), b.RPS()), Target: 0.95, Higher: true})
			// The same comparison in server CPU per request, which the
			// generator and the neighbours disturb less than requests/s.
			out = append(out, Ratio{Name: "sold-out server CPU per request: bare / gateway",
				Value: div(b.CPUPerRequest().Seconds(), g.CPUPerRequest().Seconds()), Target: 0.8, Higher: true})
		}
	}
	if g, ok := Find(rows, Selling, Gateway); ok {
		// The floor: the same crowd on a design with no durability at all
		// (and an oversell); the durable path's cost is how far above it
		// the gateway sells out.
		if n, ok := Find(rows, Selling, RedisNaive); ok && n.SellOut > 0 && g.SellOut > 0 {
			out = append(out, Ratio{Name: "time to sell out: gateway / redis-naive (no durability)",
				Value: div(g.SellOut.Seconds(), n.SellOut.Seconds()), Target: 1.2})
		}
		for _, t := range []string{PGUpdate, PGLock} {
			b, ok := Find(rows, Selling, t)
			if !ok {
				continue
			}
			out = append(out, Ratio{Name: "selling req/s: gateway / " + t, Value: div(g.RPS(), b.RPS()), Target: 10, Higher: true})
			q := Ratio{Name: "time to sell out: " + t + " / gateway", Value: div(b.SellOut.Seconds(), g.SellOut.Seconds()), Target: 10, Higher: true}
			if b.SellOut < 0 && b.Bounded {
				// Still selling when the bound stopped it: its time to
				// sell out is longer than the whole attack.
				q.Value, q.AtLeast = div(b.Elapsed.Seconds(), g.SellOut.Seconds()), true
			}
			out = append(out, q)
		}
	}
	return out
}

// Meta describes the run for the table's heading.
type Meta struct {
	When        time.Time
	Machine     string // e.g. "2 cores, loopback, generator on the same machine"
	Shoppers    int
	Stock       int
	Connections int
	Workers     uint64
	Client      string        // the generator's HTTP client
	Bound       time.Duration // per attack
	PGConns     int
	Rounds      int // of the sold-out scenario
	Command     string
}

func ms(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
}

func us(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", float64(d.Nanoseconds())/1000)
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", v)
}

// Markdown writes the results table and the ratios.
func Markdown(w io.Writer, m Meta, rows []Row, ratios []Ratio) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## flashsale benchmark, %s\n\n", m.When.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%s; crowd of %d distinct shoppers (one request each), %d connections / %d workers (%s client), every attack bounded to %s; sold-out scenario: median of %d alternating rounds; selling: stock %d, one round; pg-* pool %d connections.\n\n",
		m.Machine, m.Shoppers, m.Connections, m.Workers, m.Client, m.Bound, m.Rounds, m.Stock, m.PGConns)
	if m.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", m.Command)
	}
	b.WriteString("| scenario | target | requests | req/s | p50 ms | p99 ms | server CPU µs/req | accepted | sold out | other | sell-out ms | persisted ms | oversold | note |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		note := r.Note
		if r.Bounded {
			note = strings.TrimSpace("stopped by the time bound " + note)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %s | %s | %s | %d | %d | %d | %s | %s | %d | %s |\n",
			r.Scenario, r.Target, r.Requests, r.RPS(), ms(r.P50), ms(r.P99), us(r.CPUPerRequest()), r.Accepted(), r.Counts["sold_out"], r.Other(),
			ms(r.SellOut), ms(r.Persisted), r.Oversold(), note)
	}
	for _, r := range rows {
		if r.StackCPUPerOrder() >= 0 {
			fmt.Fprintf(&b, "\nCPU of the whole stack per order while %s sold out (first request to last unit sold, read from /proc): **%s µs** (%s).\n",
				r.Target, us(r.StackCPUPerOrder()), ComponentsCPU(r.StackCPUByComponent))
		}
	}
	if len(ratios) > 0 {
		b.WriteString("\n| ratio (same run) | value | target | met |\n|---|---:|---:|---|\n")
		for _, q := range ratios {
			op := "≥"
			if !q.Higher {
				op = "≤"
			}
			met := "yes"
			if !q.Met() {
				met = "**no**"
			}
			v := fmtRatio(q.Value)
			if q.AtLeast && !math.IsNaN(q.Value) {
				v = "> " + v
			}
			fmt.Fprintf(&b, "| %s | %s | %s %g× | %s |\n", q.Name, v, op, q.Target, met)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ComponentsCPU lists each component's CPU in milliseconds, the largest
// first.
func ComponentsCPU(cpu map[string]time.Duration) string {
	names := make([]string, 0, len(cpu))
	for n := range cpu {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if cpu[names[i]] != cpu[names[j]] {
			return cpu[names[i]] > cpu[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d ms", n, cpu[n].Milliseconds())
	}
	return strings.Join(parts, ", ")
}

// Median returns the round with the median requests/s (the lower of the two
// middle ones for an even count), noting every round's figure. Rows are of
// one target and scenario.
func Median(rounds []Row) Row {
	if len(rounds) == 0 {
		return Row{}
	}
	sorted := slices.Clone(rounds)
	slices.SortStableFunc(sorted, func(a, b Row) int { return cmp.Compare(a.RPS(), b.RPS()) })
	m := sorted[(len(sorted)-1)/2]
	if len(rounds) == 1 {
		return m
	}
	m.RoundsRPS = make([]float64, len(rounds))
	figs := make([]string, len(rounds))
	for i, r := range rounds {
		m.RoundsRPS[i] = r.RPS()
		figs[i] = fmt.Sprintf("%.0f", r.RPS())
	}
	m.Note = strings.TrimSpace(fmt.Sprintf("median of %d rounds (%s req/s) %s", len(rounds), strings.Join(figs, ", "), m.Note))
	return m
}
