// Package suite runs the benchmark: one crowd, one load generator, and in
// turn our gateway and each baseline design under it, on loopback, every
// attack bounded in count and in time. It returns one report.Row per
// attack; the caller prints the table.
package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/benchmarks/report"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
	"flashsale/tools/crowd"
	"flashsale/tools/herd"
	"flashsale/tools/proccpu"
	"flashsale/tools/quiet"
)

// Options of a run.
type Options struct {
	GatewayURL  string // our gateway's public listener
	AdminURL    string // the order service's admin listener
	AdminToken  string
	JWTKey      []byte
	JWTIssuer   string
	PostgresDSN string
	RedisAddr   string
	// GatewayPID, when set, lets the run read the gateway's resident memory.
	GatewayPID int

	BaselineBin string // the baseline command, started once per design
	LogDir      string // baseline processes' logs
	// ProfileDir, when set, makes each baseline write a CPU profile there
	// (baseline-<design>.prof) for go tool pprof.
	ProfileDir string

	Shoppers    int    // distinct shoppers; each sends one request per attack
	Stock       int    // units on sale in the selling scenario
	Connections int    // HTTP connections of the generator
	Workers     uint64 // concurrent requests in flight (closed loop)
	Bound       time.Duration
	Timeout     time.Duration // per request
	Client      herd.Client   // the generator's HTTP client, the same for every target
	// Rounds of the sold-out scenario; each target's median round is kept.
	Rounds  int
	PGConns int // pool size of the pg-* designs
	// PersistBound bounds the wait for the gateway's accepted orders to
	// reach PostgreSQL.
	PersistBound time.Duration
	// QuietWait bounds the wait, before each selling step, for the order
	// service to expire what earlier sales have falling due (tools/quiet).
	QuietWait time.Duration
	// Only restricts the run to these "scenario/target" pairs; empty: all.
	Only []string
}

// Steps of a full run, in order. The sold-out pair runs first and back to
// back, so that the two figures share as much of the machine's state as a
// shared machine allows.
func Steps() []string {
	return []string{
		report.SoldOut + "/" + report.Bare,
		report.SoldOut + "/" + report.Gateway,
		report.Selling + "/" + report.Gateway,
		report.Selling + "/" + report.PGUpdate,
		report.Selling + "/" + report.PGLock,
		report.Selling + "/" + report.RedisNaive,
	}
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	bad(len(o.JWTKey) >= 32, "-jwt-key (or FLASHSALE_JWT_HS256_KEY): missing or shorter than 32 bytes")
	bad(o.AdminToken != "", "-admin-token (or FLASHSALE_ADMIN_TOKEN): missing")
	bad(o.BaselineBin != "", "-baseline-bin: empty")
	bad(o.Shoppers > 0, "-shoppers must be positive")
	bad(o.Stock > 0 && o.Stock < o.Shoppers, "-stock must be between 1 and -shoppers - 1 (a flash sale has more shoppers than units)")
	bad(o.Connections > 0, "-connections must be positive")
	bad(o.Workers > 0, "-workers must be positive")
	bad(o.Rounds > 0, "-rounds must be positive")
	bad(o.Bound > 0, "-bound must be positive: every attack stops by itself")
	bad(o.Timeout > 0, "-timeout must be positive")
	bad(o.PGConns > 0, "-pg-conns must be positive")
	bad(o.PersistBound > 0, "-persist-bound must be positive")
	bad(o.QuietWait >= 0, "-quiet-wait must not be negative")
	for _, s := range o.Only {
		bad(slices.Contains(Steps(), s), "-only %q: want some of %s", s, strings.Join(Steps(), ","))
	}
	for _, u := range []string{o.GatewayURL, o.AdminURL} {
		if err := loopback(u); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loopback keeps every attack on this machine.
func loopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("target %q: not a URL", raw)
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("target %q is not loopback: the benchmark attacks this machine only", raw)
		}
	}
	return nil
}

type runner struct {
	o        Options
	progress io.Writer
	pool     *pgxpool.Pool
	redis    rueidis.Client
	stock    *stock.Store
	admin    *client
	crowd    *crowd.Crowd
	warmup   string // a token outside the crowd, for warm-up requests
	prefix   string
	// warnCommitTime says once that "persisted" is a transaction's start;
	// persistedAtStart marks the rows whose figure is.
	warnCommitTime   sync.Once
	persistedAtStart bool
}

// Run performs the steps and returns one row per target and scenario. A
// failed step is reported in progress and leaves its row out; the others
// still run.
func Run(ctx context.Context, o Options, progress io.Writer) ([]report.Row, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &runner{o: o, progress: progress, admin: newClient(o.AdminURL, o.GatewayURL, o.AdminToken)}
	var err error
	if r.pool, err = pgxpool.New(ctx, o.PostgresDSN); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer r.pool.Close()
	if r.redis, err = redisconn.New(o.RedisAddr, rueidis.ClientOption{DisableCache: true}); err != nil {
		return nil, err
	}
	defer r.redis.Close()
	r.stock = stock.New(r.redis)

	r.prefix = "bench" + strconv.FormatInt(time.Now().UnixMilli(), 36)
	fmt.Fprintf(progress, "bench: minting %d shopper tokens (%s-*)\n", o.Shoppers, r.prefix)
	if r.crowd, err = crowd.Mint(o.JWTKey, o.JWTIssuer, r.prefix, o.Shoppers, 2*time.Hour); err != nil {
		return nil, err
	}
	w, err := crowd.Mint(o.JWTKey, o.JWTIssuer, r.prefix+"-warmup", 1, 2*time.Hour)
	if err != nil {
		return nil, err
	}
	r.warmup = w.Tokens[0]

	steps := Steps()
	if len(o.Only) > 0 {
		steps = slices.DeleteFunc(steps, func(s string) bool { return !slices.Contains(o.Only, s) })
	}
	var soldOut, selling []string
	for _, step := range steps {
		scenario, target, _ := strings.Cut(step, "/")
		if scenario == report.SoldOut {
			soldOut = append(soldOut, target)
		} else {
			selling = append(selling, target)
		}
	}
	var rows []report.Row
	var errs []error
	fail := func(step string, err error) {
		err = fmt.Errorf("%s: %w", step, err)
		fmt.Fprintf(progress, "bench: %v\n", err)
		errs = append(errs, err)
	}
	if len(soldOut) > 0 {
		got, err := r.soldOut(ctx, soldOut)
		rows = append(rows, got...)
		if err != nil {
			fail(report.SoldOut, err)
		}
	}
	for _, target := range selling {
		if ctx.Err() != nil {
			break
		}
		row, err := r.selling(ctx, target)
		if err != nil {
			fail(report.Selling+"/"+target, err)
			continue
		}
		rows = append(rows, row)
	}
	return rows, errors.Join(errs...)
}

// prepared is a target ready to be attacked.
type prepared struct {
	target   string
	url      string // base URL
	path     string // purchase path
	items    []int64
	saleID   int64
	quantity int
	stop     func() // ends a baseline process; nil for the gateway
	pid      int    // the process answering, for its CPU time; 0 unknown
}

func (p *prepared) close() {
	if p.stop != nil {
		p.stop()
	}
}

// saleLength is how long a scenario's sale stays open: every attack it must
// outlive, each bounded by Bound (a sold-out sale serves every round of
// both targets), the wait for its orders to persist (PersistBound), and a
// margin; not the hour it was. An open sale costs the order service a pass
// over its holders every abandon interval: a series of runs that left its
// 10,000-unit sales open for an hour had a fresh ordersvc spend half a
// second of CPU on its first pass over them, beside the next run's selling
// step.
func (r *runner) saleLength(scenario string) time.Duration {
	attacks := 1
	if scenario == report.SoldOut {
		attacks = 2 * r.o.Rounds
	}
	return time.Duration(attacks)*r.o.Bound + r.o.PersistBound + 2*time.Minute
}

// prepare creates the target's sale (quantity units, open now) and, for a
// baseline, starts its process.
func (r *runner) prepare(ctx context.Context, scenario, target string, quantity int) (*prepared, error) {
	p := &prepared{target: target, quantity: quantity}
	if target != report.Bare {
		sale, err := r.admin.createSale(ctx, r.prefix+" "+target+" "+scenario, time.Now().Add(-time.Second), r.saleLength(scenario), quantity)
		if err != nil {
			return nil, err
		}
		p.saleID, p.items = sale.ID, []int64{sale.Items[0].ID}
		// The gateway's warm-up step, and the only state redis-naive has.
		if target == report.Gateway || target == report.RedisNaive {
			if err := r.admin.loadStock(ctx, sale.ID); err != nil {
				return nil, err
			}
		}
	} else {
		p.saleID, p.items = 1, []int64{1} // the bare handler answers any path
	}
	if target == report.Gateway {
		path, err := r.admin.waitOpen(ctx, p.saleID, 30*time.Second)
		if err != nil {
			return nil, err
		}
		p.url, p.path, p.pid = r.o.GatewayURL, path, r.o.GatewayPID
		if quantity == 0 {
			// One refused purchase sets the in-process flag, as the first
			// shopper of a real sold-out item would.
			if err := r.warm(ctx, p.url, p.path, p.items[0], 410); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	proc, err := startBaseline(ctx, r.o, target)
	if err != nil {
		return nil, err
	}
	p.url, p.stop, p.pid = proc.url, proc.stop, proc.pid
	p.path = "/api/flash-sales/" + strconv.FormatInt(p.saleID, 10) + "/g/baseline"
	// Item 0 does not exist: the warm-up checks that the process answers
	// without buying a unit of the stock.
	if err := r.warm(ctx, p.url, p.path, 0, 0); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// soldOut attacks the targets of the sold-out scenario in alternating
// rounds (A B, B A, A B, ...) and keeps each target's median round: the
// two figures are close and the machine is shared, so one round each would
// mostly measure the neighbours.
func (r *runner) soldOut(ctx context.Context, targets []string) ([]report.Row, error) {
	var ready []*prepared
	defer func() {
		for _, p := range ready {
			p.close()
		}
	}()
	for _, t := range targets {
		p, err := r.prepare(ctx, report.SoldOut, t, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		ready = append(ready, p)
	}
	rounds := make(map[string][]report.Row)
	for i := range r.o.Rounds {
		order := slices.Clone(ready)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fmt.Fprintf(r.progress, "bench: == %s / %s, round %d of %d\n", report.SoldOut, p.target, i+1, r.o.Rounds)
			row := r.measure(ctx, report.SoldOut, p)
			if p.target == report.Gateway {
				row.Note = residentMemory(r.o.GatewayPID)
			}
			rounds[p.target] = append(rounds[p.target], row)
		}
	}
	var rows []report.Row
	for _, p := range ready {
		rows = append(rows, report.Median(rounds[p.target]))
	}
	return rows, nil
}

// selling sells the stock to the crowd through one target and audits what
// its store holds afterwards.
func (r *runner) selling(ctx context.Context, target string) (report.Row, error) {
	fmt.Fprintf(r.progress, "bench: == %s / %s\n", report.Selling, target)
	if _, err := quiet.Wait(ctx, quiet.Backlog(r.pool), r.o.QuietWait, 500*time.Millisecond, r.progress); err != nil {
		return report.Row{}, err
	}
	p, err := r.prepare(ctx, report.Selling, target, r.o.Stock)
	if err != nil {
		return report.Row{}, err
	}
	defer p.close()
	row, t := r.measureTallied(ctx, report.Selling, p)
	switch target {
	case report.Gateway:
		at, active, err := r.waitPersisted(ctx, p.saleID, row.Accepted(), r.o.PersistBound)
		if err != nil {
			return row, err
		}
		if !at.IsZero() {
			row.Persisted = at.Sub(t.First)
		}
		row.StoreOversold = max(0, active-p.quantity)
		row.Note = fmt.Sprintf("%d active orders in PostgreSQL", active)
		if r.persistedAtStart {
			row.Note += "; persisted: the last order's transaction start (PostgreSQL without track_commit_timestamp)"
		}
		if rss := residentMemory(r.o.GatewayPID); rss != "" {
			row.Note += "; gateway " + rss
		}
	case report.PGUpdate, report.PGLock:
		// Every 202 followed a commit: persisted when answered.
		if row.Accepted() > 0 {
			row.Persisted = t.LastAccepted.Sub(t.First)
		}
		active, err := r.activeOrders(ctx, p.saleID)
		if err != nil {
			return row, err
		}
		row.StoreOversold = max(0, active-p.quantity)
		row.Note = fmt.Sprintf("%d active orders in PostgreSQL", active)
	case report.RedisNaive:
		left, err := r.stock.Left(ctx, p.saleID, p.items[0])
		if err != nil {
			return row, err
		}
		row.StoreOversold = int(max(0, -left))
		row.Note = fmt.Sprintf("Redis stock counter ends at %d; nothing persisted", left)
	}
	return row, nil
}

// measure attacks a prepared target and returns its row.
func (r *runner) measure(ctx context.Context, scenario string, p *prepared) report.Row {
	row, _ := r.measureTallied(ctx, scenario, p)
	return row
}

// measureTallied attacks a prepared target, with the CPU time its process
// spent during the attack.
// For our gateway selling, it also reads the CPU of every process of the
// stack (gateway, broker, order service, Redis, PostgreSQL) from the first
// request to the last unit sold.
func (r *runner) measureTallied(ctx context.Context, scenario string, p *prepared) (report.Row, *tallied) {
	h := herd.New(herd.Options{Connections: r.o.Connections, Workers: r.o.Workers, MaxWorkers: r.o.Workers,
		Timeout: r.o.Timeout, MaxBody: 1024, Client: r.o.Client})
	// Every target meets a crowd already on its connections; a baseline
	// has no sale page and answers 404, which opens them all the same.
	if codes, err := h.Arrive(ctx, fmt.Sprintf("%s/api/flash-sales/%d", p.url, p.saleID)); err != nil {
		fmt.Fprintf(r.progress, "bench:   %-11s %v\n", p.target, err)
	} else {
		fmt.Fprintf(r.progress, "bench:   %-11s %d connections open (answers %v)\n", p.target, r.o.Connections, codes)
	}
	var soldOut func()
	var selling map[string]time.Duration
	if p.target == report.Gateway && p.quantity > 0 {
		root := proccpu.Root()
		before := proccpu.Sample(root)
		soldOut = func() { selling = proccpu.Sample(root).Since(before) }
	}
	cpu0, ok0 := proccpu.Process(p.pid)
	t := r.attack(ctx, h, p.target, p.url, p.path, p.items, p.quantity, soldOut)
	cpu1, ok1 := proccpu.Process(p.pid)
	row := r.row(scenario, p.target, p.quantity, t)
	if ok0 && ok1 {
		row.ServerCPU = cpu1 - cpu0
	}
	if selling != nil {
		row.StackCPU, row.StackCPUByComponent = proccpu.Stack(selling), selling
	}
	return row, t
}

// row fills what every attack shares.
func (r *runner) row(scenario, target string, quantity int, t *tallied) report.Row {
	row := report.Row{Scenario: scenario, Target: target, Stock: quantity, Shoppers: r.o.Shoppers,
		Counts: t.counts(), Requests: t.Total(), Elapsed: t.Last.Sub(t.First),
		SellOut: -1, Persisted: -1, StoreOversold: -1, ServerCPU: -1, StackCPU: -1, Bounded: t.bounded}
	all := t.LatencyAll()
	row.P50, row.P99 = all.P50, all.P99
	if quantity > 0 && row.Accepted() >= quantity {
		row.SellOut = t.LastAccepted.Sub(t.First)
	}
	return row
}

// lastCommitted is when the sale's last order row was committed, nil when
// it has none: PostgreSQL's record of the commit (the local stack runs
// with track_commit_timestamp on). It is the commit of each row's last
// write (xmin): a row paid, cancelled or expired since moves it, which a
// bench sale's orders are not before it is read. A server without the
// setting gives the last row's persisted_at, its transaction's start,
// early by up to one batch's time (a consumer writing a big batch begins
// right after the last sale and commits well after); the bench says so
// once, and the row's note says so (persistedAtStart).
func (r *runner) lastCommitted(ctx context.Context, saleID int64) (*time.Time, error) {
	var tracked string
	if err := r.pool.QueryRow(ctx, `SHOW track_commit_timestamp`).Scan(&tracked); err != nil {
		return nil, fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	q := `SELECT max(pg_xact_commit_timestamp(xmin)) FROM flash_sale_order WHERE sale_id = $1`
	if tracked != "on" {
		r.warnCommitTime.Do(func() {
			fmt.Fprintln(r.progress, "bench: PostgreSQL runs without track_commit_timestamp: \"persisted\" is the last order's transaction start (bash deploy/stack.sh restart postgres gives the commit time)")
		})
		q = `SELECT max(persisted_at) FROM flash_sale_order WHERE sale_id = $1`
		r.persistedAtStart = true
	}
	var last *time.Time
	if err := r.pool.QueryRow(ctx, q, saleID).Scan(&last); err != nil {
		return nil, fmt.Errorf("last order of sale %d: %w", saleID, err)
	}
	return last, nil
}

// activeOrders counts PENDING or PAID orders of a sale.
func (r *runner) activeOrders(ctx context.Context, saleID int64) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND status IN ('PENDING', 'PAID')`, saleID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count orders of sale %d: %w", saleID, err)
	}
	return n, nil
}

// waitPersisted waits until the sale holds at least want orders (any
// status: a rejected order is persisted too) and returns when the last of
// them was committed, on the same clock as the generator, and how many are
// active (see lastCommitted).
func (r *runner) waitPersisted(ctx context.Context, saleID int64, want int, bound time.Duration) (time.Time, int, error) {
	deadline := time.Now().Add(bound)
	for {
		var n int
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&n); err != nil {
			return time.Time{}, 0, fmt.Errorf("count orders of sale %d: %w", saleID, err)
		}
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(r.progress, "bench: only %d of %d accepted orders in PostgreSQL after %s\n", n, want, bound)
			active, err := r.activeOrders(ctx, saleID)
			return time.Time{}, active, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	last, err := r.lastCommitted(ctx, saleID)
	if err != nil {
		return time.Time{}, 0, err
	}
	active, err := r.activeOrders(ctx, saleID)
	if last == nil {
		return time.Time{}, active, err
	}
	return *last, active, err
}
