package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"flashsale/benchmarks/report"
)

// table is the markdown table of every run, then each variant's min /
// median / max of the figures that move from run to run.
func table(runs []result, vs []variant) string {
	var b strings.Builder
	b.WriteString("| run | variant | load | last unit sold | all persisted | accepted p50 / p99 | gateway's purchase p50 / p99 | publish → ack p50 / p99 | req/s | stack CPU / order | gateway CPU / order | CPU while selling | earlier sales' backlog | audit |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
	for i, r := range runs {
		acc := r.Latency["accepted"]
		fmt.Fprintf(&b, "| %d | %s | %.1f | %s ms | %s ms | %.0f / %.0f ms | %.1f / %.1f ms | %.1f / %.1f ms | %.0f | %.0f µs | %.0f µs | %s | %d | %s |\n",
			i+1, r.variant, r.load, thousands(r.SellOutMs), thousands(r.PersistMs), acc.P50, acc.P99,
			r.PurchaseMs.P50, r.PurchaseMs.P99, r.PublishAckMs.P50, r.PublishAckMs.P99, r.RPS, r.StackCPU, r.GatewayCPU, cpuByComponent(r.SellingCPUMs), r.Backlog, verdict(r))
	}
	b.WriteString("\n| variant | runs | last unit sold min / median / max | persisted after the last sale, median | accepted p99, median | stack CPU / order, median | gateway CPU / order, median |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, v := range vs {
		var sell, lag, p99, stack, gw []float64
		for _, r := range runs {
			if r.variant != v.label {
				continue
			}
			sell = append(sell, float64(r.SellOutMs))
			lag = append(lag, float64(r.PersistMs-r.SellOutMs))
			p99 = append(p99, r.Latency["accepted"].P99)
			stack = append(stack, r.StackCPU)
			gw = append(gw, r.GatewayCPU)
		}
		lo, mid, hi := spread(sell)
		fmt.Fprintf(&b, "| %s | %d | %s / %s / %s ms | %+.0f ms | %.0f ms | %.0f µs | %.0f µs |\n", v.label, len(sell),
			thousands(int64(lo)), thousands(int64(mid)), thousands(int64(hi)), median(lag), median(p99), median(stack), median(gw))
	}
	return b.String()
}

func verdict(r result) string {
	if r.auditOK() {
		return "pass"
	}
	return fmt.Sprintf("**FAIL** (oversold %d, lost %d, duplicates %d, conserved %v)",
		r.Audit.Oversold, r.Audit.Lost, r.Audit.Duplicates, r.Audit.StockConserved)
}

// cpuByComponent lists the components' CPU, the largest first, as the
// benchmark's table does.
func cpuByComponent(ms map[string]float64) string {
	cpu := make(map[string]time.Duration, len(ms))
	for n, v := range ms {
		cpu[n] = time.Duration(v * float64(time.Millisecond))
	}
	return report.ComponentsCPU(cpu)
}

// spread is the minimum, median and maximum of xs (zeros when empty).
func spread(xs []float64) (lo, mid, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[0], median(s), s[len(s)-1]
}

// median of xs: the middle value, or the mean of the two middle ones.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// thousands writes n with comma separators (-1, unknown, as "—").
func thousands(n int64) string {
	if n < 0 {
		return "—"
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
