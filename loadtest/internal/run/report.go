package run

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Summary is the one-line JSON a script reads from the end of stdout.
func (r Report) Summary() map[string]any {
	m := map[string]any{
		"sale_id":                  r.SaleID,
		"requests":                 r.Requests,
		"rps":                      int(r.RPS),
		"sell_out_ms":              r.SellOutMs,
		"persist_ms":               r.PersistMs,
		"p50_ms":                   r.Latency["all"].P50,
		"p99_ms":                   r.Latency["all"].P99,
		"oversold":                 r.Audit.Oversold,
		"lost":                     r.Audit.Lost,
		"duplicates":               r.Audit.Duplicates,
		"stock_conserved":          r.Audit.StockConserved,
		"audit_ok":                 r.Audit.OK(),
		"sold":                     r.Sold,
		"every_unit_sold":          r.Sold >= r.Stock,
		"gateway_peak_rss_mib":     int(r.GatewayPeakRSSMiB),
		"publish_ack_p50_ms":       r.PublishAckMs.P50,
		"publish_ack_p99_ms":       r.PublishAckMs.P99,
		"gateway_purchase_p50_ms":  r.PurchaseMs.P50,
		"gateway_purchase_p99_ms":  r.PurchaseMs.P99,
		"stack_cpu_per_order_us":   int(r.StackCPUPerOrderUs),
		"gateway_cpu_per_order_us": int(r.GatewayCPUPerOrderUs),
	}
	for k, v := range r.Outcomes {
		m[k] = v
	}
	return m
}

func writeHuman(w io.Writer, r Report) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== flash sale %d: %d requests in %.2fs (%.0f req/s)\n", r.SaleID, r.Requests, r.AttackSecs, r.RPS)
	fmt.Fprintf(&b, "%-18s %9s %9s %9s %9s %9s\n", "outcome", "count", "p50 ms", "p90 ms", "p99 ms", "max ms")
	keys := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.Outcomes[keys[i]] > r.Outcomes[keys[j]] })
	for _, k := range keys {
		if r.Outcomes[k] == 0 {
			continue
		}
		l := r.Latency[k]
		fmt.Fprintf(&b, "%-18s %9d %9.2f %9.2f %9.2f %9.2f\n", k, r.Outcomes[k], l.P50, l.P90, l.P99, l.Max)
	}
	l := r.Latency["all"]
	fmt.Fprintf(&b, "%-18s %9d %9.2f %9.2f %9.2f %9.2f\n", "all", r.Requests, l.P50, l.P90, l.P99, l.Max)
	ms := func(v int64) string {
		if v < 0 {
			return "not reached"
		}
		return fmt.Sprintf("%d ms", v)
	}
	fmt.Fprintf(&b, "units sold:              %d of %d%s\n", r.Sold, r.Stock, notSoldOut(r))
	fmt.Fprintf(&b, "last unit sold:          %s after the first request\n", ms(r.SellOutMs))
	fmt.Fprintf(&b, "all accepted persisted:  %s after the first request\n", ms(r.PersistMs))
	fmt.Fprintf(&b, "polled orders:           %v\n", r.Polled)
	if r.Paid > 0 {
		fmt.Fprintf(&b, "paid:                    %d winners (the rest expire after the payment window)\n", r.Paid)
	}
	if r.GatewayPeakRSSMiB >= 0 {
		fmt.Fprintf(&b, "gateway peak memory:     %.0f MiB resident\n", r.GatewayPeakRSSMiB)
	}
	if len(r.SellingCPUMs) > 0 {
		names := make([]string, 0, len(r.SellingCPUMs))
		for k := range r.SellingCPUMs {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return r.SellingCPUMs[names[i]] > r.SellingCPUMs[names[j]] })
		parts := make([]string, 0, len(names))
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, r.SellingCPUMs[k]))
		}
		fmt.Fprintf(&b, "CPU while selling:       %s ms; stack %.0f µs per order (gateway %.0f µs)\n",
			strings.Join(parts, ", "), r.StackCPUPerOrderUs, r.GatewayCPUPerOrderUs)
	}
	if r.BacklogAtStart > 0 {
		fmt.Fprintf(&b, "earlier sales' backlog:  %d orders and releases were still due at the start; the order service worked on them during this sale (raise -quiet-wait)\n", r.BacklogAtStart)
	}
	if r.PublishAckMs.P50 >= 0 {
		fmt.Fprintf(&b, "publish → broker ack:    p50 %.2f ms, p99 %.2f ms (gateway's histogram)\n", r.PublishAckMs.P50, r.PublishAckMs.P99)
	}
	if r.PurchaseMs.P50 >= 0 {
		fmt.Fprintf(&b, "gateway's purchase time: p50 %.2f ms, p99 %.2f ms (reservation to answer, gateway's histogram; a shopper's latency adds her wait to be read)\n",
			r.PurchaseMs.P50, r.PurchaseMs.P99)
	}
	verdict := "PASS"
	if !r.Audit.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "audit:                   %s (oversold=%d lost=%d duplicates=%d stock_conserved=%v unreleased_rejects=%d)\n",
		verdict, r.Audit.Oversold, r.Audit.Lost, r.Audit.Duplicates, r.Audit.StockConserved, r.Audit.UnreleasedRejects)
	for _, it := range r.Audit.Items {
		fmt.Fprintf(&b, "  item %d: quantity=%d active=%d sold=%d rejected=%d redis_left=%d\n", it.ID, it.Quantity, it.Active, it.Sold, it.Rejected, it.RedisLeft)
	}
	for _, p := range r.Audit.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	for k, f := range r.Files {
		fmt.Fprintf(&b, "%-8s %s\n", k+":", f)
	}
	if f, ok := r.Files["results"]; ok {
		fmt.Fprintf(&b, "read the raw results with: vegeta report %s   (vegeta plot %s > plot.html)\n", f, f)
	}
	fmt.Fprint(w, b.String())
}

// notSoldOut says why a run whose crowd could buy every unit and did not
// fails ("" otherwise).
func notSoldOut(r Report) string {
	if !r.SoldOutExpected || r.Sold >= r.Stock {
		return ""
	}
	return " — FAIL: the crowd could buy every unit; look at the outcomes above (503s: a broker or Redis down)"
}
