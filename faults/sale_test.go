package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/pkg/adminapi"
	"flashsale/pkg/auth"
	"flashsale/pkg/stock"
	"flashsale/tools/audit"
	"flashsale/tools/harness"
	"flashsale/tools/outcome"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

// baseEnv is the environment every fault test gives both services: the
// shoppers all come from 127.0.0.1 and each buys once, so the rate limits
// would only measure the harness; faults must show within seconds.
func baseEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"FLASHSALE_LIMIT_PURCHASE_USER": "off",
		"FLASHSALE_LIMIT_PURCHASE_IP":   "off",
		"FLASHSALE_PUBLISH_TIMEOUT":     "1s",
		"FLASHSALE_REDIS_TIMEOUT":       "500ms",
		"FLASHSALE_SHUTDOWN_TIMEOUT":    "10s",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// client talks to the services; its timeout bounds every answer the tests
// wait for, so a hung request is a measured failure, not a hung test.
var client = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
}

// answer is what one shopper was told.
type answer struct {
	user     string
	code     int
	kind     outcome.Kind
	errCode  string
	retry    string // Retry-After
	orderID  string
	sent     time.Time
	took     time.Duration
	phase    int32 // phase when the request was sent
	endPhase int32 // phase when the answer came
	err      error
}

// sale is one flash sale under test: the stack, the ids, and everything
// shoppers were told, by phase of the fault.
type sale struct {
	t      *testing.T
	s      *harness.Stack
	id     int64
	item   int64
	qty    int
	path   string
	url    string
	prefix string

	phase atomic.Int32
	next  atomic.Int64 // next shopper number

	phaseMu    sync.Mutex
	phaseStart map[int32]time.Time

	mu       sync.Mutex
	answers  []answer
	accepted map[string]string // order id -> user, every 202
	// admitted is, in a queued sale, each admitted shopper's admission
	// (sale.admit): her purchases carry its token.
	admitted map[string]admission
}

// openSale creates a one-item sale through the order service's admin API,
// loads its stock and waits until the gateway serves the purchase path.
func openSale(t *testing.T, s *harness.Stack, quantity int) *sale {
	t.Helper()
	sl := createSale(t, s, quantity, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := sl.info(testenv.Context(t))
		if err == nil && info.PurchasePath != "" {
			sl.usePath(info.PurchasePath)
			return sl
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served sale %d: %+v %v", sl.id, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createSale creates a one-item sale, open since a second ago, through the
// order service's admin API, behind the virtual queue when queue is not
// nil, and loads its stock.
func createSale(t *testing.T, s *harness.Stack, quantity int, queue *adminapi.SaleQueue) *sale {
	t.Helper()
	ctx := testenv.Context(t)
	req, _ := json.Marshal(adminapi.NewSale{
		Name: t.Name(), StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour),
		PaymentTTLSeconds: 600, Queue: queue,
		Items: []adminapi.NewSaleItem{{ProductID: "sku-1", Name: "Flash item", Price: "19.99", Quantity: int64(quantity)}},
	})
	code, body, _, err := harness.Do(ctx, "POST", s.AdminURL+"/admin/sales", harness.AdminToken, req)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create sale: %d %s %v", code, body, err)
	}
	var created struct {
		ID    int64 `json:"id"`
		Items []struct {
			ID int64 `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &created); err != nil || len(created.Items) != 1 {
		t.Fatalf("create sale answer %s: %v", body, err)
	}
	sl := &sale{t: t, s: s, id: created.ID, item: created.Items[0].ID, qty: quantity,
		prefix: strings.NewReplacer("/", "-").Replace(t.Name()) + fmt.Sprintf("-%d", time.Now().UnixNano()), accepted: map[string]string{}}
	code, body, _, err = harness.Do(ctx, "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", s.AdminURL, sl.id), harness.AdminToken, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("load stock: %d %s %v", code, body, err)
	}
	return sl
}

// usePath sets the sale's purchase path, which the gateway reveals once
// the sale is open (or, behind the queue, with an admission), and the
// item's purchase URL under it.
func (sl *sale) usePath(path string) {
	sl.path = path
	sl.url = fmt.Sprintf("%s%s/items/%d/purchase", sl.s.GatewayURL, path, sl.item)
}

// saleInfo is the public sale answer of the gateway.
type saleInfo struct {
	State        string `json:"state"`
	PurchasePath string `json:"purchasePath"`
	QueueEnabled bool   `json:"queueEnabled"`
	Items        []struct {
		StockLeft *int64 `json:"stockLeft"`
		SoldOut   bool   `json:"soldOut"`
	} `json:"items"`
}

func (sl *sale) info(ctx context.Context) (saleInfo, error) {
	var info saleInfo
	code, body, _, err := harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d", sl.s.GatewayURL, sl.id), "", nil)
	if err != nil {
		return info, err
	}
	if code != http.StatusOK {
		return info, fmt.Errorf("sale info: %d %s", code, body)
	}
	return info, json.Unmarshal(body, &info)
}

func token(t testing.TB, user string) string {
	tok, err := auth.MintHS256(harness.JWTKey, user, "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// buy sends one purchase for user and records what the shopper was told.
func (sl *sale) buy(ctx context.Context, user string) answer {
	start := time.Now()
	a := answer{user: user, phase: sl.phase.Load(), sent: start}
	req, err := http.NewRequestWithContext(ctx, "POST", sl.url, nil)
	if err != nil {
		sl.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token(sl.t, user))
	sl.mu.Lock()
	adm, queued := sl.admitted[user]
	sl.mu.Unlock()
	if queued {
		req.Header.Set("X-Admission-Token", adm.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		a.err, a.kind = err, outcome.Errors
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a.code, a.retry = resp.StatusCode, resp.Header.Get("Retry-After")
		a.kind, a.orderID = outcome.Classify(&vegeta.Result{Code: uint16(resp.StatusCode), Body: body})
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		a.errCode = e.Error
	}
	a.took = time.Since(start)
	a.endPhase = sl.phase.Load()
	sl.mu.Lock()
	sl.answers = append(sl.answers, a)
	if a.kind == outcome.Accepted {
		sl.accepted[a.orderID] = user
	}
	sl.mu.Unlock()
	return a
}

// shopper returns a fresh shopper id.
func (sl *sale) shopper() string {
	return fmt.Sprintf("%s-%d", sl.prefix, sl.next.Add(1))
}

// wave sends n purchases of n fresh shoppers over workers connections and
// waits for every answer.
func (sl *sale) wave(ctx context.Context, n, workers int) {
	users := make([]string, n)
	for i := range users {
		users[i] = sl.shopper()
	}
	sl.buyAll(ctx, users, workers)
}

// buyAll sends one purchase for each user over workers connections and
// waits for every answer.
func (sl *sale) buyAll(ctx context.Context, users []string, workers int) {
	ch := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for u := range ch {
				sl.buy(ctx, u)
			}
		})
	}
	for _, u := range users {
		ch <- u
	}
	close(ch)
	wg.Wait()
}

// crowd sends purchases of fresh shoppers at about rate per second, with
// at most workers in flight (a request stuck in a fault holds a worker; the
// pacer then skips ticks rather than piling requests up), until the
// returned stop is called; stop waits for the answers in flight.
func (sl *sale) crowd(ctx context.Context, rate, workers int) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	slots := make(chan struct{}, workers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				// A purchase in flight when the crowd stops still gets
				// its answer: it is part of what shoppers were told.
				sl.buy(context.WithoutCancel(ctx), sl.shopper())
			}()
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// untilSoldOut keeps a crowd going until a shopper is told SOLD_OUT (or the
// context ends), then stops it.
func (sl *sale) untilSoldOut(ctx context.Context, rate, workers int, bound time.Duration) {
	start := time.Now()
	stop := sl.crowd(ctx, rate, workers)
	defer stop()
	deadline := start.Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if sl.count(func(a answer) bool { return a.kind == outcome.SoldOut && !a.sent.Before(start) }) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	sl.t.Errorf("sale %d: no SOLD_OUT answer within %v (%s)", sl.id, bound, sl.summary(nil))
}

// count counts the answers matching f.
func (sl *sale) count(f func(answer) bool) int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	n := 0
	for _, a := range sl.answers {
		if f(a) {
			n++
		}
	}
	return n
}

// where returns the answers matching f (all of them for nil).
func (sl *sale) where(f func(answer) bool) []answer {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var out []answer
	for _, a := range sl.answers {
		if f == nil || f(a) {
			out = append(out, a)
		}
	}
	return out
}

// within selects answers sent and received inside one phase.
func within(p int32) func(answer) bool {
	return func(a answer) bool { return a.phase == p && a.endPhase == p }
}

// summary counts the answers matching f by kind, with the slowest answer:
// "accepted 120, unavailable 40 (max 1.02s)".
func (sl *sale) summary(f func(answer) bool) string {
	as := sl.where(f)
	if len(as) == 0 {
		return "no requests"
	}
	byKind := map[string]int{}
	var slowest time.Duration
	for _, a := range as {
		k := a.kind.String()
		if a.kind == outcome.Errors {
			if a.err != nil {
				k = "transport error"
			} else {
				k = fmt.Sprintf("other %d %s", a.code, a.errCode)
			}
		}
		byKind[k]++
		slowest = max(slowest, a.took)
	}
	keys := make([]string, 0, len(byKind))
	for k := range byKind {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return byKind[keys[i]] > byKind[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	return fmt.Sprintf("%s (slowest %v)", strings.Join(parts, ", "), slowest.Round(10*time.Millisecond))
}

// acceptedCopy is every 202 so far: order id -> user.
func (sl *sale) acceptedCopy() map[string]string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	out := make(map[string]string, len(sl.accepted))
	for k, v := range sl.accepted {
		out[k] = v
	}
	return out
}

// checkOnly fails the test for every answer matching sel whose kind is not
// among want, naming the first few.
func (sl *sale) checkOnly(what string, sel func(answer) bool, want ...outcome.Kind) {
	sl.t.Helper()
	bad := sl.where(func(a answer) bool {
		if !sel(a) {
			return false
		}
		for _, k := range want {
			if a.kind == k {
				return false
			}
		}
		return true
	})
	if len(bad) > 0 {
		ex := bad[0]
		sl.t.Errorf("%s: %d answers outside %v, e.g. %d %q %v after %v (all: %s)", what, len(bad), want, ex.code, ex.errCode, ex.err, ex.took, sl.summary(sel))
	}
}

// checkUnavailable checks that refusals matching sel are 503 UNAVAILABLE
// with a Retry-After header.
func (sl *sale) checkUnavailable(what string, sel func(answer) bool) {
	sl.t.Helper()
	for _, a := range sl.where(sel) {
		if a.kind == outcome.Unavailable && a.retry == "" {
			sl.t.Errorf("%s: 503 without Retry-After", what)
			return
		}
	}
}

// deps are the test's own clients of PostgreSQL and Redis.
type deps struct {
	pool  *pgxpool.Pool
	redis rueidis.Client
	stock *stock.Store
}

func dial(t *testing.T) *deps {
	t.Helper()
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return &deps{pool: pool, redis: rc, stock: stock.New(rc)}
}

// rows counts the sale's order rows.
func (d *deps) rows(ctx context.Context, saleID int64) (total, active, rejected int, err error) {
	err = d.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status IN ('PENDING','PAID')), count(*) FILTER (WHERE status = 'REJECTED')
		FROM flash_sale_order WHERE sale_id = $1`, saleID).Scan(&total, &active, &rejected)
	return
}

// waitPersisted waits until every accepted order has its row.
func (d *deps) waitPersisted(t *testing.T, saleID int64, accepted map[string]string, bound time.Duration) {
	t.Helper()
	ctx := testenv.Context(t)
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	deadline := time.Now().Add(bound)
	var n int
	for {
		err := d.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE id = ANY($1::uuid[])`, ids).Scan(&n)
		if err == nil && n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sale %d: %d of %d accepted orders persisted after %v (err %v)", saleID, n, len(ids), bound, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reconciliation is the part of the order service's reconcile answer the
// report shows.
type reconciliation struct {
	Clean       bool `json:"clean"`
	Differences []struct {
		Kind string `json:"kind"`
	} `json:"differences"`
	InFlight int  `json:"inFlight"`
	Leaked   int  `json:"leaked"`
	Repaired bool `json:"repaired"`
}

func (r reconciliation) String() string {
	kinds := map[string]int{}
	for _, d := range r.Differences {
		kinds[d.Kind]++
	}
	if r.Clean {
		return "clean"
	}
	return fmt.Sprintf("differences %v, in flight %d, leaked %d, repaired %v", kinds, r.InFlight, r.Leaked, r.Repaired)
}

// reconcile runs the operator's repair step on the order service's admin
// listener: POST /admin/sales/{id}/reconcile?repair=true.
func (sl *sale) reconcile(ctx context.Context) reconciliation {
	sl.t.Helper()
	var rec reconciliation
	for attempt := 0; ; attempt++ {
		code, body, _, err := harness.Do(ctx, "POST", fmt.Sprintf("%s/admin/sales/%d/reconcile?repair=true", sl.s.AdminURL, sl.id), harness.AdminToken, nil)
		if err == nil && code == http.StatusOK {
			if err := json.Unmarshal(body, &rec); err != nil {
				sl.t.Fatalf("reconcile answer %s: %v", body, err)
			}
			return rec
		}
		// 409 BUSY: the sale's keys kept changing; 503: a dependency is
		// still coming back. Both say retry.
		if attempt >= 20 || (err == nil && code != http.StatusConflict && code != http.StatusServiceUnavailable) {
			sl.t.Fatalf("reconcile sale %d: %d %s %v", sl.id, code, body, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// audit runs tools/audit against everything shoppers were told and fails the
// test unless every invariant holds. It returns the one-line verdict for
// the report.
func (sl *sale) audit(d *deps) string {
	sl.t.Helper()
	ctx := testenv.Context(sl.t)
	v, err := audit.Run(ctx, d.pool, d.stock, sl.id, sl.acceptedCopy())
	if err != nil {
		sl.t.Fatalf("audit: %v", err)
	}
	var active, rejected, left int64
	for _, it := range v.Items {
		active += it.Active
		rejected += it.Rejected
		left += it.RedisLeft
	}
	line := fmt.Sprintf("oversold %d, lost %d, duplicates %d, stock conserved %v (%d active + %d left = %d), %d rejected",
		v.Oversold, v.Lost, v.Duplicates, v.StockConserved, active, left, sl.qty, rejected)
	if !v.OK() {
		sl.t.Errorf("audit of sale %d fails: %s\nproblems: %s", sl.id, line, strings.Join(v.Problems, "; "))
		return "FAIL: " + line
	}
	sl.t.Logf("audit of sale %d: %s", sl.id, line)
	return "pass: " + line
}

// waitAccepted waits until at least n shoppers were answered 202.
func (sl *sale) waitAccepted(n int, bound time.Duration) {
	sl.t.Helper()
	deadline := time.Now().Add(bound)
	for len(sl.acceptedCopy()) < n {
		if time.Now().After(deadline) {
			sl.t.Fatalf("sale %d: %d accepted after %v, want %d (%s)", sl.id, len(sl.acceptedCopy()), bound, n, sl.summary(nil))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setPhase starts phase p: answers are tagged with the phase they were
// sent and received in.
func (sl *sale) setPhase(p int32) {
	sl.phaseMu.Lock()
	if sl.phaseStart == nil {
		sl.phaseStart = map[int32]time.Time{}
	}
	sl.phaseStart[p] = time.Now()
	sl.phaseMu.Unlock()
	sl.phase.Store(p)
}

// recovery is the time from the start of phase p to the first purchase
// sent in it that was accepted; false if none was.
func (sl *sale) recovery(p int32) (time.Duration, bool) {
	sl.phaseMu.Lock()
	start, ok := sl.phaseStart[p]
	sl.phaseMu.Unlock()
	if !ok {
		return 0, false
	}
	var first time.Time
	for _, a := range sl.where(func(a answer) bool { return a.phase == p && a.kind == outcome.Accepted }) {
		if first.IsZero() || a.sent.Before(first) {
			first = a.sent
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(start), true
}

// poll asks the gateway for an order as its owner: the status code and the
// order's status.
func poll(ctx context.Context, s *harness.Stack, orderID, bearer string) (int, string, error) {
	code, body, _, err := harness.Do(ctx, "GET", s.GatewayURL+"/api/flash-sales/orders/"+orderID, bearer, nil)
	if err != nil {
		return 0, "", err
	}
	var o struct{ Status, Error string }
	_ = json.Unmarshal(body, &o)
	if o.Status == "" {
		o.Status = o.Error
	}
	return code, o.Status, nil
}

// phaseAt is when phase p started (zero if it never did).
func (sl *sale) phaseAt(p int32) time.Time {
	sl.phaseMu.Lock()
	defer sl.phaseMu.Unlock()
	return sl.phaseStart[p]
}

// slowestTook is the longest time any answer matching sel took.
func (sl *sale) slowestTook(sel func(answer) bool) time.Duration {
	var d time.Duration
	for _, a := range sl.where(sel) {
		d = max(d, a.took)
	}
	return d
}

// slowest describes the n slowest answers matching sel, with when they were
// sent relative to the start of their phase.
func (sl *sale) slowest(sel func(answer) bool, n int) string {
	as := sl.where(sel)
	sort.Slice(as, func(i, j int) bool { return as[i].took > as[j].took })
	sl.phaseMu.Lock()
	defer sl.phaseMu.Unlock()
	var parts []string
	for _, a := range as[:min(n, len(as))] {
		parts = append(parts, fmt.Sprintf("%d %s took %v sent +%v", a.code, a.errCode, a.took.Round(time.Millisecond), a.sent.Sub(sl.phaseStart[a.phase]).Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// metric reads one counter or gauge from a /metrics page (url), parsed by
// Prometheus' own parser: the first series of the family name.
func metric(ctx context.Context, url, name string) (float64, error) {
	fams, err := scrape.Get(ctx, nil, url)
	if err != nil {
		return 0, err
	}
	v, ok := fams.Value(name)
	if !ok {
		return 0, fmt.Errorf("no metric %s at %s", name, url)
	}
	return v, nil
}

// unannounced counts the sale's order rows whose id no shopper was given in
// a 202: orders that exist although their purchase was refused. A gateway's
// tombstone (REJECTED, audit.PublishFailed: it took the id of a publish it
// gave up on, before answering 503) is the refusal itself, not counted.
func (d *deps) unannounced(ctx context.Context, saleID int64, accepted map[string]string) (int, error) {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	var n int
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND NOT (id::text = ANY($2::text[]))
		AND NOT (status = 'REJECTED' AND reject_reason IS NOT DISTINCT FROM $3)`, saleID, ids, audit.PublishFailed).Scan(&n)
	return n, err
}
