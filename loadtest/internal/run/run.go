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
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/rueidis"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"

	"flashsale/pkg/adminapi"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
	"flashsale/tools/audit"
	"flashsale/tools/crowd"
	"flashsale/tools/herd"
	"flashsale/tools/outcome"
	"flashsale/tools/proccpu"
	"flashsale/tools/quiet"
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
	// Sold counts the distinct orders answered 202, of Stock units. When
	// the crowd could buy every unit (users at least the stock) and did
	// not, the run fails (SoldOutExpected, ErrNotSoldOut): an audit of a
	// sale that sold nothing (a broker down, every purchase 503) passes.
	Sold            int   `json:"sold"`
	Stock           int   `json:"stock"`
	SoldOutExpected bool  `json:"sold_out_expected"`
	PersistMs       int64 `json:"persist_ms"` // first request to every accepted order in PostgreSQL; -1 if not
	// BacklogAtStart is what earlier sales still had due (orders to expire,
	// releases to apply) when this one was created: 0 on a quiet stack;
	// otherwise the order service worked on it during this sale.
	BacklogAtStart int64          `json:"backlog_at_start"`
	Polled         map[string]int `json:"polled"` // statuses seen through the polling endpoint
	// Paid is how many winners paid (-pay-share); the rest are left to expire.
	Paid int `json:"paid"`
	// GatewayPeakRSSMiB is the gateway's peak resident memory (-1 unknown).
	GatewayPeakRSSMiB float64 `json:"gateway_peak_rss_mib"`
	// PublishAckMs is the gateway's time from handing an order to the Kafka
	// producer to the broker's acknowledgement (its histogram's p50 and
	// p99, interpolated within buckets; -1 unknown).
	PublishAckMs struct{ P50, P99 float64 } `json:"publish_ack_ms"`
	// PurchaseMs is the gateway's own time for a purchase that reached
	// Redis, from the reservation to the answer (its histogram's p50 and
	// p99; -1 unknown). The shopper's latency is this plus the wait for
	// the gateway to read her request: with more shoppers in flight than
	// the cores serve, that wait is most of it.
	PurchaseMs struct{ P50, P99 float64 } `json:"gateway_purchase_ms"`
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

// ErrNotSoldOut is returned when the crowd could buy every unit and did
// not: the invariants may hold, but the sale did not happen.
var ErrNotSoldOut = errors.New("the sale did not sell out")

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
	c, err := dial(ctx, o)
	if err != nil {
		return rep, err
	}
	defer c.close()

	if rep.BacklogAtStart, err = quiet.Wait(ctx, quiet.Backlog(c.pool), o.QuietWait, 500*time.Millisecond, progress); err != nil {
		return rep, err
	}
	s, err := prepareSale(ctx, o, c.api, progress)
	rep.SaleID = s.id // known once created, even when loading its stock failed
	if err != nil {
		return rep, err
	}
	h, err := arrive(ctx, o, c.api, s, progress)
	if err != nil {
		return rep, err
	}
	room, err := joinQueue(ctx, o, c.api, s, progress)
	if err != nil {
		return rep, err
	}
	info, err := waitOpen(ctx, c.api, s.id, s.opens.Add(30*time.Second), o.Queue)
	if err != nil {
		return rep, err
	}
	att, err := attack(ctx, o, c.pool, s, room, h, info.PurchasePath, progress)
	if err != nil {
		return rep, err
	}
	rep.Files["results"] = att.resultsPath

	drain(ctx, o, c.pool, room, att, &rep, progress)
	afterSale(ctx, o, c, s, att.accepted, &rep)
	readGatewayMetrics(ctx, c.api, o.GatewayAdminURL, &rep)
	rep.Audit, err = audit.Run(ctx, c.pool, c.stock, s.id, att.accepted)
	if err != nil {
		return rep, err
	}

	addFigures(&rep, o, att)
	writeOutputs(out, o.OutDir, &rep, att.plot)
	if !rep.Audit.OK() {
		return rep, ErrAuditFailed
	}
	if rep.SoldOutExpected && rep.Sold < rep.Stock {
		return rep, ErrNotSoldOut
	}
	return rep, nil
}

// clients are the run's connections to the stack under test.
type clients struct {
	pool  *pgxpool.Pool
	redis rueidis.Client
	stock *stock.Store
	api   *stackapi.Client
}

// dial connects to PostgreSQL and Redis (for the drain and the audit) and
// prepares the HTTP client of the gateway and the admin API.
func dial(ctx context.Context, o Options) (*clients, error) {
	pool, err := pgxpool.New(ctx, o.PostgresDSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	rc, err := redisconn.New(o.RedisAddr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &clients{
		pool:  pool,
		redis: rc,
		stock: stock.New(rc, stock.WithShards(func(int64) (int, error) { return max(o.Shards, 1), nil })),
		api: &stackapi.Client{GatewayURL: o.GatewayURL, AdminURL: o.AdminURL, AdminToken: o.AdminToken,
			HTTP: &http.Client{Timeout: 10 * time.Second}},
	}, nil
}

func (c *clients) close() {
	c.redis.Close()
	c.pool.Close()
}

// sale is the sale a run created and the crowd that shops it.
type sale struct {
	id    int64
	items []int64
	opens time.Time
	crowd *crowd.Crowd
}

// prepareSale mints the crowd's tokens, creates the sale through the admin
// API and warms its stock up from PostgreSQL. The sale's id is set once it
// is created, even when a later step fails.
func prepareSale(ctx context.Context, o Options, api *stackapi.Client, progress io.Writer) (sale, error) {
	var s sale
	fmt.Fprintf(progress, "minting %d shopper tokens...\n", o.Users)
	prefix := "lt" + strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	cr, err := crowd.Mint(o.JWTKey, o.JWTIssuer, prefix, o.Users, 2*time.Hour)
	if err != nil {
		return s, err
	}
	s.crowd = cr

	s.opens = time.Now().Add(o.OpenIn)
	created, err := api.CreateSale(ctx, newSale(o, "loadtest "+prefix, s.opens))
	if err != nil {
		return s, err
	}
	s.id = created.ID
	if err := api.LoadStock(ctx, s.id); err != nil {
		return s, err
	}
	for _, it := range created.Items {
		s.items = append(s.items, it.ID)
	}
	fmt.Fprintf(progress, "sale %d: %d units over %d items, opens at %s\n", s.id, o.Stock, len(s.items), s.opens.Format(time.TimeOnly))
	return s, nil
}

// saleLength is how long a run's sale stays open: long enough for its
// payments, polls and audit, short enough that the sales of a morning of
// runs do not stay open for the gateway's catalog refresh and queue
// advance to walk through on every tick of the next runs (an idle gateway
// with 64 open sales used 5 % of a core).
const saleLength = 15 * time.Minute

// newSale is the sale to create: o.Stock units spread over o.Items items,
// the first ones taking the remainder, open for saleLength from opens.
func newSale(o Options, name string, opens time.Time) adminapi.NewSale {
	ns := adminapi.NewSale{Name: name, StartsAt: opens, EndsAt: opens.Add(saleLength), PaymentTTLSeconds: 600,
		StockShards: o.Shards}
	if o.Queue {
		ns.Queue = &adminapi.SaleQueue{Enabled: true, Draw: true, AdmissionRate: o.AdmissionRate}
	}
	for i := range o.Items {
		q := o.Stock / o.Items
		if i < o.Stock%o.Items {
			q++
		}
		ns.Items = append(ns.Items, adminapi.NewSaleItem{ProductID: fmt.Sprintf("sku-%d", i), Name: fmt.Sprintf("Flash item %d", i), Price: "19.99", Quantity: int64(q)})
	}
	return ns
}

// arrive puts the shoppers in flight on the sale's page once the gateway
// knows the sale, before it opens, each on a connection of its own
// (herd.Arrive says why), and returns the herd that will buy through them.
func arrive(ctx context.Context, o Options, api *stackapi.Client, s sale, progress io.Writer) (*herd.Herd, error) {
	if err := waitKnown(ctx, api, s.id, s.opens.Add(30*time.Second)); err != nil {
		return nil, err
	}
	h := herd.New(herd.Options{Connections: o.Connections, Workers: o.Workers, MaxWorkers: o.MaxWorkers,
		Timeout: o.Timeout, MaxBody: 4096, Client: o.Client})
	start := time.Now()
	codes, err := h.Arrive(ctx, fmt.Sprintf("%s/api/flash-sales/%d", o.GatewayURL, s.id))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "%d shoppers on the sale page, a connection each, in %s (answers %v)\n",
		o.Connections, time.Since(start).Round(time.Millisecond), codes)
	return h, nil
}

// joinQueue has the whole crowd join a queued sale's waiting room before it
// opens: the pre-queue is drawn at random. It returns nil without a queue.
func joinQueue(ctx context.Context, o Options, api *stackapi.Client, s sale, progress io.Writer) (*waitingRoom, error) {
	if !o.Queue {
		return nil, nil
	}
	room := newWaitingRoom(api, s.crowd, s.id)
	if err := waitKnown(ctx, api, s.id, s.opens); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "queue: %d shoppers joining before the opening...\n", o.Users)
	if err := room.join(ctx, o.Connections); err != nil {
		return nil, err
	}
	if time.Now().After(s.opens) {
		fmt.Fprintf(progress, "queue: joining took past the opening; later joiners queued FIFO (raise -open-in)\n")
	}
	return room, nil
}

// attackResult is what the attack saw.
type attackResult struct {
	tally outcome.Tally
	// accepted maps the order id of every 202 to the user it was answered to.
	accepted map[string]string
	// sold counts the 202s.
	sold int64
	// cpuSold is the CPU each component used from the first request to the
	// last unit sold; nil when the sale did not sell out.
	cpuSold map[string]time.Duration
	// rows counts the sale's order rows from the start of the attack; the
	// drain stops it.
	rows        *rowWatch
	plot        *plot.Plot
	resultsPath string
}

// attack sends the crowd at the sale (through the waiting room when there
// is one) and classifies every answer as it comes, recording each result
// to results.bin and the plot.
func attack(ctx context.Context, o Options, pool *pgxpool.Pool, s sale, room *waitingRoom, h *herd.Herd, purchasePath string, progress io.Writer) (*attackResult, error) {
	targeter := s.crowd.Targeter(o.GatewayURL, purchasePath, s.items)
	soldOut := make(chan struct{})
	if room != nil {
		go room.poll(ctx, o.Connections, time.Now().Add(o.Duration), soldOut)
		targeter = room.targeter(o.GatewayURL, s.items)
	}
	atk := h.Attacker()
	pacer := crowd.Limit(pacerFor(o), uint64(o.Users))
	res := &attackResult{accepted: map[string]string{}, resultsPath: filepath.Join(o.OutDir, "results.bin")}
	rf, err := os.Create(res.resultsPath)
	if err != nil {
		return nil, fmt.Errorf("results file: %w", err)
	}
	defer rf.Close()
	enc := vegeta.NewEncoder(rf)
	res.plot = plot.New(plot.Title(fmt.Sprintf("flashsale: %d shoppers, %d units", o.Users, o.Stock)), plot.Downsample(4000),
		plot.Label(func(r *vegeta.Result) string { k, _ := outcome.Classify(r); return k.String() }))

	var (
		counts [16]atomic.Int64
		sold   atomic.Int64
	)
	stopProgress := startProgress(ctx, progress, &counts, &sold, int64(o.Stock))
	// Rows are counted while the attack runs, so the time until every
	// accepted order is persisted is measured, not bounded by the attack.
	res.rows = watchRows(ctx, pool, s.id)
	attackCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-attackCtx.Done(); atk.Stop() }()
	// CPU of every process of the stack from the first request to the last
	// unit sold: what selling costs, per accepted order.
	cpuRoot := proccpu.Root()
	cpuStart := proccpu.Sample(cpuRoot)
	// While units are left, results are only classified and kept: encoding
	// them and plotting them would take the generator's CPU from the sale
	// it measures (a tenth of the generator's CPU, by its profile). They
	// are written once the last unit is sold, then as they come.
	var held []*vegeta.Result
	record := func(r *vegeta.Result) {
		_ = enc.Encode(r)
		_ = res.plot.Add(r)
	}
	for r := range atk.Attack(targeter, pacer, o.Duration, "flashsale") {
		if r.Method == "" { // the targeter ran dry; no request was sent
			continue
		}
		k, id := res.tally.Add(r)
		counts[k].Add(1)
		if k == outcome.Accepted {
			if sold.Add(1) == int64(o.Stock) {
				close(soldOut)
				res.cpuSold = proccpu.Sample(cpuRoot).Since(cpuStart)
			}
			if i, err := crowd.ShopperOf(r.URL); err == nil {
				res.accepted[id] = s.crowd.Users[i]
			}
		}
		if sold.Load() < int64(o.Stock) {
			held = append(held, r)
			continue
		}
		for _, h := range held {
			record(h)
		}
		held = nil
		record(r)
	}
	for _, h := range held { // the sale did not sell out
		record(h)
	}
	cancel()
	stopProgress()
	res.sold = sold.Load()
	return res, nil
}

// drain waits until every accepted order is in PostgreSQL (a timeout is
// reported on progress, not an error: the audit counts what is missing)
// and sets PersistMs.
func drain(ctx context.Context, o Options, pool *pgxpool.Pool, room *waitingRoom, att *attackResult, rep *Report, progress io.Writer) {
	at, err := waitPersisted(ctx, pool, att.accepted, o.PersistTimeout)
	if err != nil {
		fmt.Fprintf(progress, "drain: %v\n", err)
	}
	// The watch during the attack sees the moment to 10 ms; when it never
	// saw every order sold (PostgreSQL refused one), the check by order id
	// after the attack gives a later bound.
	if watched := att.rows.stop(len(att.accepted)); !watched.IsZero() {
		at = watched
	}
	if !at.IsZero() && !att.tally.First.IsZero() {
		rep.PersistMs = at.Sub(att.tally.First).Milliseconds()
	}
	if room != nil {
		room.summary(progress)
	}
}

// afterSale plays the end of the sale before the audit: a share of the
// winners pay (Paid), the ended orders' units are given back, and a sample
// of the winners polls its order's status (Polled).
func afterSale(ctx context.Context, o Options, c *clients, s sale, accepted map[string]string, rep *Report) {
	if o.PayShare > 0 {
		rep.Paid = payShare(ctx, c.api, s.crowd, accepted, o.PayShare)
	}
	waitReleases(ctx, c.pool, s.id, 10*time.Second)
	rep.Polled = pollSample(ctx, c.api, s.crowd, accepted, o.PollSample)
}

// readGatewayMetrics sets GatewayPeakRSSMiB and PublishAckMs from the
// gateway's admin metrics; each stays -1 when unknown.
func readGatewayMetrics(ctx context.Context, api *stackapi.Client, adminURL string, rep *Report) {
	rep.GatewayPeakRSSMiB = -1
	rep.PublishAckMs.P50, rep.PublishAckMs.P99 = -1, -1
	rep.PurchaseMs.P50, rep.PurchaseMs.P99 = -1, -1
	if adminURL == "" {
		return
	}
	fams, err := api.Metrics(ctx, adminURL)
	if err != nil {
		return
	}
	if v, ok := fams.Value("flashsale_gateway_process_peak_resident_memory_bytes"); ok {
		rep.GatewayPeakRSSMiB = v / (1 << 20)
	}
	quantilesMs(fams["flashsale_gateway_publish_ack_duration_seconds"], &rep.PublishAckMs.P50, &rep.PublishAckMs.P99)
	quantilesMs(fams["flashsale_gateway_purchase_duration_seconds"], &rep.PurchaseMs.P50, &rep.PurchaseMs.P99)
}

// quantilesMs sets p50 and p99, in milliseconds, from a histogram in
// seconds; each stays as it was when the histogram does not tell.
func quantilesMs(h *dto.MetricFamily, p50, p99 *float64) {
	if v, ok := stackapi.HistogramQuantile(h, 0.5); ok {
		*p50 = v * 1000
	}
	if v, ok := stackapi.HistogramQuantile(h, 0.99); ok {
		*p99 = v * 1000
	}
}

// addFigures sets the report's figures from what the attack saw: counts
// and latencies by outcome, the rate, the sell-out time, the CPU of selling
// and the options of the run.
func addFigures(rep *Report, o Options, att *attackResult) {
	tally := &att.tally
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
	if int(att.sold) >= o.Stock {
		rep.SellOutMs = tally.LastAccepted.Sub(tally.First).Milliseconds()
	}
	rep.Sold, rep.Stock, rep.SoldOutExpected = len(att.accepted), o.Stock, o.Users >= o.Stock
	if att.cpuSold != nil {
		rep.SellingCPUMs, rep.StackCPUPerOrderUs, rep.GatewayCPUPerOrderUs = sellingCPU(att.cpuSold, o.Stock)
	}
	rep.Options = map[string]any{"users": o.Users, "stock": o.Stock, "items": o.Items, "profile": o.Profile, "rate": o.Rate,
		"connections": o.Connections, "max_workers": o.MaxWorkers, "client": o.Client.String(), "gateway": o.GatewayURL}
}

// sellingCPU turns the CPU each component used until the sale sold out
// into milliseconds by component and microseconds per unit sold: the
// stack's (every component but the load generator) and the gateways'.
func sellingCPU(cpu map[string]time.Duration, units int) (ms map[string]float64, stackPerOrderUs, gatewayPerOrderUs float64) {
	ms = map[string]float64{}
	for k, v := range cpu {
		ms[k] = float64(v.Microseconds()) / 1000
	}
	return ms, float64(proccpu.Stack(cpu).Microseconds()) / float64(units), float64(cpu["gateway"].Microseconds()) / float64(units)
}

// writeOutputs writes plot.html and report.json to dir (best effort: the
// run's outcome does not depend on them), then the human report and the
// JSON summary line to out.
func writeOutputs(out io.Writer, dir string, rep *Report, pl *plot.Plot) {
	plotPath := filepath.Join(dir, "plot.html")
	if f, err := os.Create(plotPath); err == nil {
		pl.Close()
		_, _ = pl.WriteTo(f)
		f.Close()
		rep.Files["plot"] = plotPath
	}
	reportPath := filepath.Join(dir, "report.json")
	rep.Files["report"] = reportPath
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = os.WriteFile(reportPath, b, 0o644)
	}
	writeHuman(out, *rep)
	line, _ := json.Marshal(rep.Summary())
	fmt.Fprintln(out, string(line))
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
