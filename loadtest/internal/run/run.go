package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"

	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
	"flashsale/tools/audit"
	"flashsale/tools/crowd"
	"flashsale/tools/outcome"
	"flashsale/tools/stackapi"
)

// Report is everything a run found out.
type Report struct {
	SaleID     int64          `json:"sale_id"`
	Options    map[string]any `json:"options"`
	Outcomes   map[string]int `json:"outcomes"`
	Latency    map[string]Lat `json:"latency_ms"`
	Requests   int            `json:"requests"`
	AttackSecs float64        `json:"attack_seconds"`
	RPS        float64        `json:"requests_per_second"`
	SellOutMs  int64          `json:"sell_out_ms"` // first request to last unit sold; -1 if not sold out
	PersistMs  int64          `json:"persist_ms"`  // first request to every accepted order in PostgreSQL; -1 if not
	Polled     map[string]int `json:"polled"`      // statuses seen through the polling endpoint
	// Paid is how many winners paid (-pay-share); the rest are left to expire.
	Paid int `json:"paid"`
	// GatewayPeakRSSMiB is the gateway's peak resident memory (-1 unknown).
	GatewayPeakRSSMiB float64 `json:"gateway_peak_rss_mib"`
	// PublishAckMs is the gateway's time from handing an order to the Kafka
	// producer to the broker's acknowledgement (its histogram's p50 and
	// p99, interpolated within buckets; -1 unknown).
	PublishAckMs struct{ P50, P99 float64 } `json:"publish_ack_ms"`
	// SellingCPUMs is the CPU time each component of the stack used from the
	// first request to the last unit sold (read from /proc, 10 ms ticks);
	// StackCPUPerOrderUs divides the stack's (the load generator excluded)
	// by the units sold, GatewayCPUPerOrderUs the gateways' alone.
	SellingCPUMs         map[string]float64 `json:"selling_cpu_ms,omitempty"`
	StackCPUPerOrderUs   float64            `json:"stack_cpu_per_order_us,omitempty"`
	GatewayCPUPerOrderUs float64            `json:"gateway_cpu_per_order_us,omitempty"`
	Audit                audit.Verdict      `json:"audit"`
	Files                map[string]string
}

// Lat is a latency summary in milliseconds.
type Lat struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func lat(p outcome.Percentiles) Lat {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Lat{P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), Max: ms(p.Max)}
}

// ErrAuditFailed is returned when an invariant does not hold.
var ErrAuditFailed = errors.New("audit failed")

// Run performs one flash sale. Progress goes to progress (one line a
// second), the human report and the final JSON summary line to out.
func Run(ctx context.Context, o Options, out, progress io.Writer) (Report, error) {
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	rep := Report{Files: map[string]string{}, SellOutMs: -1, PersistMs: -1}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return rep, fmt.Errorf("output dir: %w", err)
	}
	pool, err := pgxpool.New(ctx, o.PostgresDSN)
	if err != nil {
		return rep, fmt.Errorf("postgres: %w", err)
	}
	defer pool.Close()
	rc, err := redisconn.New(o.RedisAddr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
		return rep, err
	}
	defer rc.Close()
	st := stock.New(rc, stock.WithShards(func(int64) (int, error) { return max(o.Shards, 1), nil }))
	api := &stackapi.Client{GatewayURL: o.GatewayURL, AdminURL: o.AdminURL, AdminToken: o.AdminToken,
		HTTP: &http.Client{Timeout: 10 * time.Second}}

	fmt.Fprintf(progress, "minting %d shopper tokens...\n", o.Users)
	prefix := "lt" + strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	cr, err := crowd.Mint(o.JWTKey, o.JWTIssuer, prefix, o.Users, 2*time.Hour)
	if err != nil {
		return rep, err
	}

	// Setup: the sale, its stock warmed up from PostgreSQL.
	opens := time.Now().Add(o.OpenIn)
	ns := stackapi.NewSale{Name: "loadtest " + prefix, StartsAt: opens, EndsAt: opens.Add(time.Hour), PaymentTTLSeconds: 600,
		StockShards: o.Shards}
	if o.Queue {
		ns.Queue = &stackapi.SaleQueue{Enabled: true, Draw: true, AdmissionRate: o.AdmissionRate}
	}
	for i := range o.Items {
		q := o.Stock / o.Items
		if i < o.Stock%o.Items {
			q++
		}
		ns.Items = append(ns.Items, stackapi.NewSaleItem{ProductID: fmt.Sprintf("sku-%d", i), Name: fmt.Sprintf("Flash item %d", i), Price: "19.99", Quantity: int64(q)})
	}
	sale, err := api.CreateSale(ctx, ns)
	if err != nil {
		return rep, err
	}
	rep.SaleID = sale.ID
	if err := api.LoadStock(ctx, sale.ID); err != nil {
		return rep, err
	}
	var items []int64
	for _, it := range sale.Items {
		items = append(items, it.ID)
	}
	fmt.Fprintf(progress, "sale %d: %d units over %d items, opens at %s\n", sale.ID, o.Stock, len(items), opens.Format(time.TimeOnly))

	var room *waitingRoom
	if o.Queue {
		// Everyone joins before the opening: the pre-queue is drawn at random.
		room = newWaitingRoom(api, cr, sale.ID)
		if err := waitKnown(ctx, api, sale.ID, opens); err != nil {
			return rep, err
		}
		fmt.Fprintf(progress, "queue: %d shoppers joining before the opening...\n", o.Users)
		if err := room.join(ctx, o.Connections); err != nil {
			return rep, err
		}
		if time.Now().After(opens) {
			fmt.Fprintf(progress, "queue: joining took past the opening; later joiners queued FIFO (raise -open-in)\n")
		}
	}
	info, err := waitOpen(ctx, api, sale.ID, opens.Add(30*time.Second), o.Queue)
	if err != nil {
		return rep, err
	}
	targeter := cr.Targeter(o.GatewayURL, info.PurchasePath, items)
	soldOut := make(chan struct{})
	if room != nil {
		go room.poll(ctx, o.Connections, time.Now().Add(o.Duration), soldOut)
		targeter = room.targeter(o.GatewayURL, items)
	}

	// Attack.
	atk := vegeta.NewAttacker(
		vegeta.Connections(o.Connections), vegeta.MaxConnections(o.Connections),
		vegeta.Workers(o.Workers), vegeta.MaxWorkers(o.MaxWorkers),
		vegeta.Timeout(o.Timeout), vegeta.KeepAlive(true), vegeta.MaxBody(4096),
	)
	pacer := crowd.Limit(pacerFor(o), uint64(o.Users))
	resultsPath := filepath.Join(o.OutDir, "results.bin")
	rf, err := os.Create(resultsPath)
	if err != nil {
		return rep, fmt.Errorf("results file: %w", err)
	}
	defer rf.Close()
	enc := vegeta.NewEncoder(rf)
	pl := plot.New(plot.Title(fmt.Sprintf("flashsale: %d shoppers, %d units", o.Users, o.Stock)), plot.Downsample(4000),
		plot.Label(func(r *vegeta.Result) string { k, _ := outcome.Classify(r); return k.String() }))

	var (
		tally    outcome.Tally
		accepted = map[string]string{}
		counts   [16]atomic.Int64
		sold     atomic.Int64
	)
	stopProgress := startProgress(ctx, progress, &counts, &sold, int64(o.Stock))
	// Rows are counted while the attack runs, so the time until every
	// accepted order is persisted is measured, not bounded by the attack.
	rowsSeen := watchRows(ctx, pool, sale.ID)
	attackCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-attackCtx.Done(); atk.Stop() }()
	// CPU of every process of the stack from the first request to the last
	// unit sold: what selling costs, per accepted order.
	cpuStart, cpuSold := sampleCPU(), map[string]time.Duration(nil)
	for r := range atk.Attack(targeter, pacer, o.Duration, "flashsale") {
		if r.Method == "" { // the targeter ran dry; no request was sent
			continue
		}
		k, id := tally.Add(r)
		counts[k].Add(1)
		if k == outcome.Accepted {
			if sold.Add(1) == int64(o.Stock) {
				close(soldOut)
				cpuSold = sampleCPU().since(cpuStart)
			}
			if i, err := crowd.ShopperOf(r.URL); err == nil {
				accepted[id] = cr.Users[i]
			}
		}
		_ = enc.Encode(r)
		_ = pl.Add(r)
	}
	cancel()
	stopProgress()
	attackEnd := time.Now()
	rep.Files["results"] = resultsPath

	// Drain: wait until every accepted order is in PostgreSQL.
	if _, err := waitPersisted(ctx, pool, accepted, o.PersistTimeout); err != nil {
		fmt.Fprintf(progress, "drain: %v\n", err)
	}
	if at := rowsSeen.stop(len(accepted)); !at.IsZero() && !tally.First.IsZero() {
		rep.PersistMs = at.Sub(tally.First).Milliseconds()
	}
	if room != nil {
		room.summary(progress)
	}
	if o.PayShare > 0 {
		rep.Paid = payShare(ctx, api, cr, accepted, o.PayShare)
	}
	waitReleases(ctx, pool, sale.ID, 10*time.Second)
	rep.Polled = pollSample(ctx, api, cr, accepted, o.PollSample)
	rep.GatewayPeakRSSMiB = -1
	rep.PublishAckMs.P50, rep.PublishAckMs.P99 = -1, -1
	if o.GatewayAdminURL != "" {
		if fams, err := api.Metrics(ctx, o.GatewayAdminURL); err == nil {
			if mf := fams["flashsale_process_peak_resident_memory_bytes"]; mf != nil && len(mf.GetMetric()) > 0 {
				rep.GatewayPeakRSSMiB = mf.GetMetric()[0].GetGauge().GetValue() / (1 << 20)
			}
			ack := fams["flashsale_gateway_publish_ack_seconds"]
			if v, ok := stackapi.HistogramQuantile(ack, 0.5); ok {
				rep.PublishAckMs.P50 = v * 1000
			}
			if v, ok := stackapi.HistogramQuantile(ack, 0.99); ok {
				rep.PublishAckMs.P99 = v * 1000
			}
		}
	}

	rep.Audit, err = audit.Run(ctx, pool, st, sale.ID, accepted)
	if err != nil {
		return rep, err
	}

	// Figures.
	rep.Requests = tally.Total()
	rep.Outcomes = map[string]int{}
	rep.Latency = map[string]Lat{"all": lat(tally.LatencyAll())}
	for _, k := range outcome.Kinds() {
		rep.Outcomes[k.String()] = tally.Count[k]
		if tally.Count[k] > 0 {
			rep.Latency[k.String()] = lat(tally.Latency(k))
		}
	}
	if d := tally.Last.Sub(tally.First); d > 0 {
		rep.AttackSecs = d.Seconds()
		rep.RPS = float64(rep.Requests) / d.Seconds()
	}
	if int(sold.Load()) >= o.Stock {
		rep.SellOutMs = tally.LastAccepted.Sub(tally.First).Milliseconds()
	}
	if cpuSold != nil {
		rep.SellingCPUMs = map[string]float64{}
		var total time.Duration
		for k, v := range cpuSold {
			rep.SellingCPUMs[k] = float64(v.Microseconds()) / 1000
			if k != "loadtest" {
				total += v
			}
		}
		rep.StackCPUPerOrderUs = float64(total.Microseconds()) / float64(o.Stock)
		rep.GatewayCPUPerOrderUs = float64(cpuSold["gateway"].Microseconds()) / float64(o.Stock)
	}
	_ = attackEnd
	rep.Options = map[string]any{"users": o.Users, "stock": o.Stock, "items": o.Items, "profile": o.Profile, "rate": o.Rate,
		"connections": o.Connections, "max_workers": o.MaxWorkers, "gateway": o.GatewayURL}

	plotPath := filepath.Join(o.OutDir, "plot.html")
	if f, err := os.Create(plotPath); err == nil {
		pl.Close()
		_, _ = pl.WriteTo(f)
		f.Close()
		rep.Files["plot"] = plotPath
	}
	reportPath := filepath.Join(o.OutDir, "report.json")
	rep.Files["report"] = reportPath
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = os.WriteFile(reportPath, b, 0o644)
	}
	writeHuman(out, rep)
	line, _ := json.Marshal(rep.Summary())
	fmt.Fprintln(out, string(line))
	if !rep.Audit.OK() {
		return rep, ErrAuditFailed
	}
	return rep, nil
}

func pacerFor(o Options) vegeta.Pacer {
	switch o.Profile {
	case "steady":
		return vegeta.Rate{Freq: o.Rate, Per: time.Second}
	case "ramp":
		// from a tenth of the rate to the full rate over the duration
		start := max(1, o.Rate/10)
		return vegeta.LinearPacer{StartAt: vegeta.Rate{Freq: start, Per: time.Second},
			Slope: float64(o.Rate-start) / o.Duration.Seconds()}
	}
	if o.Rate > 0 {
		return vegeta.Rate{Freq: o.Rate, Per: time.Second}
	}
	return vegeta.Rate{Freq: 0} // as fast as the workers go
}

// waitKnown waits until the gateway's catalog has the sale.
func waitKnown(ctx context.Context, api *stackapi.Client, saleID int64, deadline time.Time) error {
	for {
		_, err := api.SaleInfo(ctx, saleID)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway does not know sale %d before its opening: %w", saleID, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitOpen waits until the gateway knows the sale and it is open. A queued
// sale never shows its purchase path: its state says it is open.
func waitOpen(ctx context.Context, api *stackapi.Client, saleID int64, deadline time.Time, queued bool) (stackapi.SaleInfo, error) {
	for {
		info, err := api.SaleInfo(ctx, saleID)
		if err == nil && (info.PurchasePath != "" || queued && (info.State == "OPEN" || info.State == "SOLD_OUT")) {
			return info, nil
		}
		if time.Now().After(deadline) {
			return info, fmt.Errorf("sale %d not open on the gateway in time (state %q, last error %v)", saleID, info.State, err)
		}
		wait := 20 * time.Millisecond
		if err == nil && info.ServerTime.Before(info.StartsAt) {
			// sleep until just before the opening by the server's clock
			wait = max(wait, info.StartsAt.Sub(info.ServerTime)-50*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func startProgress(ctx context.Context, w io.Writer, counts *[16]atomic.Int64, sold *atomic.Int64, stockTotal int64) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start := time.Now()
		var prev int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var total int64
			line := ""
			for _, k := range outcome.Kinds() {
				n := counts[k].Load()
				total += n
				if n > 0 {
					line += fmt.Sprintf(" %s=%d", k, n)
				}
			}
			fmt.Fprintf(w, "[%3.0fs] %7d req/s  total=%d%s  units_left=%d\n",
				time.Since(start).Seconds(), total-prev, total, line, stockTotal-sold.Load())
			prev = total
		}
	}()
	return func() { cancel(); wg.Wait() }
}
