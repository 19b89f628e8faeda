package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/app"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/sale"
	"flashsale/pkg/auth"
	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/event"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
	"flashsale/tools/scrape"
	"flashsale/tools/testenv"
)

const (
	jwtKey     = "0123456789abcdef0123456789abcdef"
	adminToken = "admin-token-0123456789"
)

func getenv(env map[string]string) pkgconfig.Vars {
	return pkgconfig.Vars(env)
}

func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr error
		wantIn  string // substring of the error or output
	}{
		{"help", []string{"help"}, nil, nil, "create-sale"},
		{"unknown command", []string{"frobnicate"}, nil, app.ErrUsage, "unknown command"},
		{"serve without secrets", []string{"serve"}, nil, nil, "FLASHSALE_ADMIN_TOKEN"},
		{"bad flag", []string{"load-stock", "--nope"}, nil, app.ErrUsage, "nope"},
		{"load-stock without a sale", []string{"load-stock"}, nil, app.ErrUsage, "--sale"},
		{"create-sale with a bad item", []string{"create-sale", "--name", "x", "--starts-at", "+1s", "--item", "x:1"}, nil, sale.ErrInvalid, "name:price:quantity"},
		{"create-sale with every problem", []string{"create-sale", "--starts-at", "+1s", "--payment-ttl", "0s"}, nil, sale.ErrInvalid, "paymentTtl"},
		{"misspelled variable", []string{"migrate"}, map[string]string{"FLASHSALE_PG_DNS": "x"}, nil, "did you mean FLASHSALE_PG_DSN?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := app.Run(context.Background(), tt.args, getenv(tt.env), &out, io.Discard)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if got := fmt.Sprint(err) + out.String(); !strings.Contains(got, tt.wantIn) {
				t.Errorf("got %q, want it to contain %q", got, tt.wantIn)
			}
		})
	}
}

// Help needs no configuration, succeeds and prints to stdout; even a
// configuration that would not load does not stand in its way.
func TestHelp(t *testing.T) {
	broken := map[string]string{"FLASHSALE_CONFIG": "/nonexistent", "FLASHSALE_NOPE": "1", "FLASHSALE_BATCH_SIZE": "x"}
	tests := []struct {
		name   string
		args   []string
		wantIn string
	}{
		{"help", []string{"help"}, "commands:"},
		{"-h", []string{"-h"}, "commands:"},
		{"--help", []string{"--help"}, "commands:"},
		{"serve -h", []string{"serve", "-h"}, "usage: ordersvc serve"},
		{"migrate -h", []string{"migrate", "-h"}, "usage: ordersvc migrate"},
		{"create-sale --help", []string{"create-sale", "--help"}, "-starts-at"},
		{"load-stock -h", []string{"load-stock", "-h"}, "-sale"},
		{"reconcile -h", []string{"reconcile", "-h"}, "-repair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, env := range []map[string]string{nil, broken} {
				var out bytes.Buffer
				if err := app.Run(context.Background(), tt.args, getenv(env), &out, io.Discard); err != nil {
					t.Fatalf("env %v: got %v, want success", env, err)
				}
				if !strings.Contains(out.String(), tt.wantIn) {
					t.Errorf("got %q, want it to contain %q", out.String(), tt.wantIn)
				}
			}
		})
	}
}

// A tool says on stderr which database it is about to use, before it dials
// (the context here is cancelled, so nothing is reached): without
// configuration it is the development database, which it says too.
func TestToolsNameTheirDatabase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		want   string
		secret string // must not be printed
	}{
		{"migrate without configuration", []string{"migrate"}, nil,
			"ordersvc: using database postgres://flashsale@127.0.0.1:15432/flashsale (FLASHSALE_PG_DSN not set)\n", ""},
		{"reconcile with a configured database", []string{"reconcile", "--sale", "1"},
			map[string]string{"FLASHSALE_PG_DSN": "postgres://ops:hunter2@127.0.0.1:1/sales?password=hunter2"},
			"ordersvc: using database postgres://ops:xxxxx@127.0.0.1:1/sales (FLASHSALE_PG_DSN)\n", "hunter2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if err := app.Run(ctx, tt.args, getenv(tt.env), io.Discard, &stderr); err == nil {
				t.Fatal("got success with a cancelled context")
			}
			if got := stderr.String(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("stderr: got %q, want it to start with %q", got, tt.want)
			}
			if tt.secret != "" && strings.Contains(stderr.String(), tt.secret) {
				t.Error("password printed")
			}
		})
	}
}

// toolEnv is the environment of the command-line tools: the local stack,
// and an orders topic and consumer group of the test's own (load-stock and
// reconcile --repair wait for that group to catch up with that topic).
func toolEnv(t *testing.T, extra map[string]string) (env pkgconfig.Vars, topic, group string) {
	t.Helper()
	testenv.Require(t, testenv.PostgresAddr(), testenv.RedisAddr(), testenv.KafkaBrokers())
	suffix := uuid.NewString()[:8]
	topic, group = "test-tool-"+suffix, "test-tool-"+suffix
	m := map[string]string{"FLASHSALE_PG_DSN": testenv.PostgresDSN(), "FLASHSALE_REDIS_ADDR": testenv.RedisAddr(),
		"FLASHSALE_KAFKA_BROKERS": testenv.KafkaBrokers(), "FLASHSALE_ORDERS_TOPIC": topic, "FLASHSALE_CONSUMER_GROUP": group}
	for k, v := range extra {
		m[k] = v
	}
	env = getenv(m)
	// Each test may be the first on a fresh database (tern serializes
	// concurrent migrations with an advisory lock).
	if err := app.Run(testenv.Context(t), []string{"migrate"}, env, &bytes.Buffer{}, io.Discard); err != nil {
		t.Fatal(err)
	}
	return env, topic, group
}

// create-sale prints the sale; load-stock twice prints the same numbers.
func TestCreateSaleAndLoadStock(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	env, _, _ := toolEnv(t, nil)
	var out bytes.Buffer
	if err := app.Run(ctx, []string{"migrate"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := app.Run(ctx, []string{"create-sale", "--name", "cli " + t.Name(), "--starts-at", "+30s", "--duration", "2h",
		"--payment-ttl", "5m", "--item", "phone:199.99:10:sku-1", "--item", "case:5:3"}, env, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var v sale.View
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("create-sale output %q: %v", out.String(), err)
	}
	if len(v.Items) != 2 || v.Items[0].ProductID != "sku-1" || v.Items[1].ProductID != "case" || v.Items[1].Price != "5.00" ||
		v.PaymentTTLSeconds != 300 || v.EndsAt.Sub(v.StartsAt) != 2*time.Hour {
		t.Fatalf("created sale: %s", out.String())
	}
	var first string
	for run := 1; run <= 2; run++ {
		out.Reset()
		if err := app.Run(ctx, []string{"load-stock", "--sale", fmt.Sprint(v.ID)}, env, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var res sale.LoadResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if res.SaleID != v.ID || len(res.Items) != 2 || res.Items[0].Left != 10 || res.Items[1].Left != 3 {
			t.Errorf("load %d: %s", run, out.String())
		}
		if run == 1 {
			first = out.String()
		} else if out.String() != first {
			t.Errorf("second load differs:\n%s\nfirst:\n%s", out.String(), first)
		}
	}
}

// A Redis that may evict the sale's keys is refused by every command
// that writes them, before it writes anything, and the error says what to
// set.
func TestRedisThatMayEvictIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	addr := testenv.ThrowawayRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	env, _, _ := toolEnv(t, map[string]string{"FLASHSALE_REDIS_ADDR": addr, "FLASHSALE_JWT_HS256_KEY": jwtKey,
		"FLASHSALE_ADMIN_TOKEN": adminToken, "FLASHSALE_ORDERSVC_ADDR": freeAddr(t), "FLASHSALE_ORDERSVC_ADMIN_ADDR": freeAddr(t)})
	for _, args := range [][]string{{"load-stock", "--sale", "1"}, {"reconcile", "--sale", "1"}, {"serve"}} {
		err := app.Run(ctx, args, env, io.Discard, io.Discard)
		if !errors.Is(err, redisconn.ErrEvicts) || !strings.Contains(err.Error(), "allkeys-lru") || !strings.Contains(err.Error(), "noeviction") {
			t.Errorf("%v: %v, want the evicting policy refused", args, err)
		}
	}
}

// The order service is unready while its Redis does not answer: it
// releases units and repairs sales there.
func TestReadinessFollowsRedis(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	addr := testenv.ThrowawayRedis(t)
	adminAddr := freeAddr(t)
	env, _, _ := toolEnv(t, map[string]string{"FLASHSALE_REDIS_ADDR": addr, "FLASHSALE_JWT_HS256_KEY": jwtKey,
		"FLASHSALE_ADMIN_TOKEN": adminToken, "FLASHSALE_ORDERSVC_ADDR": freeAddr(t), "FLASHSALE_ORDERSVC_ADMIN_ADDR": adminAddr,
		"FLASHSALE_SHUTDOWN_TIMEOUT": "5s", "FLASHSALE_LOG_LEVEL": "warn"})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(sctx, []string{"serve"}, env, io.Discard, io.Discard) }()
	defer func() { stop(); <-done }()
	waitFor(t, "ready", func() (bool, string) {
		code, body := call(t, "GET", "http://"+adminAddr+"/readyz", "", "")
		return code == 200, string(body)
	})
	rc := testenv.RedisClient(t, addr)
	_ = rc.Do(ctx, rc.B().Shutdown().Nosave().Build()).Error() // the server goes; its answer may not come
	waitFor(t, "unready without Redis", func() (bool, string) {
		code, body := call(t, "GET", "http://"+adminAddr+"/readyz", "", "")
		return code == 503 && bytes.Contains(body, []byte(`"redis":"ping`)), fmt.Sprintf("%d %s", code, body)
	})
}

// A SIGHUP (a configuration push to every flashsale process) neither ends
// the order service nor goes unsaid: its default action would have killed
// it mid-sale, skipping the graceful shutdown.
func TestHangupDoesNotStopTheService(t *testing.T) {
	ctx := testenv.Context(t)
	adminAddr := freeAddr(t)
	env, _, _ := toolEnv(t, map[string]string{"FLASHSALE_JWT_HS256_KEY": jwtKey,
		"FLASHSALE_ADMIN_TOKEN": adminToken, "FLASHSALE_ORDERSVC_ADDR": freeAddr(t), "FLASHSALE_ORDERSVC_ADMIN_ADDR": adminAddr,
		"FLASHSALE_SHUTDOWN_TIMEOUT": "5s"})
	var logs testenv.LogBuffer
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(sctx, []string{"serve"}, env, io.Discard, &logs) }()
	defer func() { stop(); <-done }()
	ready := func() (bool, string) {
		code, body := call(t, "GET", "http://"+adminAddr+"/readyz", "", "")
		return code == 200, string(body)
	}
	waitFor(t, "ready", ready)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hangup logged", func() (bool, string) {
		return strings.Contains(logs.String(), "SIGHUP ignored"), logs.String()
	})
	waitFor(t, "still ready", ready)
	select {
	case err := <-done:
		t.Fatalf("serve ended after SIGHUP: %v", err)
	default:
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func call(t *testing.T, method, url, authz, body string) (int, []byte) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(method)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	req.SetBodyString(body)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		return 0, []byte(err.Error())
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// The whole service: admin creates and loads a sale, an event on the
// orders topic becomes an order the shopper can read, and a cancelled
// context shuts everything down cleanly. As in the e2e harness, the topic
// does not exist when the service starts: the first publish creates it.
func TestServe(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.PostgresAddr(), testenv.RedisAddr(), testenv.KafkaBrokers())
	suffix := uuid.NewString()[:8]
	topic, dlq := "test-serve-"+suffix, "test-serve-"+suffix+".dlq"
	publicAddr, adminAddr := freeAddr(t), freeAddr(t)
	env := getenv(map[string]string{
		"FLASHSALE_PG_DSN": testenv.PostgresDSN(), "FLASHSALE_REDIS_ADDR": testenv.RedisAddr(),
		"FLASHSALE_KAFKA_BROKERS": testenv.KafkaBrokers(), "FLASHSALE_ORDERS_TOPIC": topic, "FLASHSALE_DLQ_TOPIC": dlq,
		"FLASHSALE_CONSUMER_GROUP": "test-serve-" + suffix, "FLASHSALE_JWT_HS256_KEY": jwtKey, "FLASHSALE_ADMIN_TOKEN": adminToken,
		"FLASHSALE_ORDERSVC_ADDR": publicAddr, "FLASHSALE_ORDERSVC_ADMIN_ADDR": adminAddr, "FLASHSALE_SHUTDOWN_TIMEOUT": "5s",
		"FLASHSALE_LOG_LEVEL": "warn", "FLASHSALE_EXPIRY_INTERVAL": "50ms", "FLASHSALE_LAG_INTERVAL": "100ms",
	})
	ctx := testenv.Context(t)

	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(sctx, []string{"serve"}, env, &bytes.Buffer{}, io.Discard) }()
	t.Cleanup(stop)
	admin, public := "http://"+adminAddr, "http://"+publicAddr
	bearer := "Bearer " + adminToken

	waitFor(t, "ready", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v", err)
		default:
		}
		code, body := call(t, "GET", admin+"/readyz", "", "")
		return code == 200, string(body)
	})
	if _, body := call(t, "GET", admin+"/readyz", "", ""); !bytes.Contains(body, []byte(`"redis":"ok"`)) {
		t.Errorf("readiness does not check Redis's eviction policy: %s", body)
	}

	code, body := call(t, "POST", admin+"/admin/sales", bearer, fmt.Sprintf(
		`{"name":"serve %s","startsAt":%q,"endsAt":%q,"paymentTtlSeconds":600,"items":[{"productId":"p","name":"phone","price":"10.00","quantity":2}]}`,
		suffix, time.Now().Add(-time.Minute).Format(time.RFC3339), time.Now().Add(time.Hour).Format(time.RFC3339)))
	if code != 201 {
		t.Fatalf("create sale: %d %s", code, body)
	}
	var v sale.View
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", fmt.Sprintf("%s/admin/sales/%d/load-stock", admin, v.ID), bearer, ""); code != 200 {
		t.Fatalf("load stock: %d %s", code, body)
	}

	ev := event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: v.ID, ItemID: v.Items[0].ID, UserID: "alice", PlacedAt: time.Now()}
	publish(t, topic, ev)
	tok, err := auth.MintHS256([]byte(jwtKey), "alice", "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "order visible to its owner", func() (bool, string) {
		code, body := call(t, "GET", public+"/api/flash-sales/orders/"+ev.OrderID.String(), "Bearer "+tok, "")
		return code == 200 && bytes.Contains(body, []byte(`"status":"PENDING"`)), fmt.Sprintf("%d %s", code, body)
	})
	// The batch's counters move once its offsets are committed too, which
	// on a real broker is a round trip after the row became visible.
	waitFor(t, "orders_persisted_total 1 on /metrics", func() (bool, string) {
		fams, err := scrape.Get(t.Context(), nil, admin+"/metrics")
		n, _ := fams.Value("flashsale_ordersvc_orders_persisted_total")
		return err == nil && n == 1, fmt.Sprintf("%v persisted, %v", n, err)
	})
	// A new order of a shopper without one is a fresh batch: no lookups.
	if fams, err := scrape.Get(t.Context(), nil, admin+"/metrics"); err != nil {
		t.Error(err)
	} else {
		for _, cause := range []string{"rejection", "conflict"} {
			if n, ok := fams.Value("flashsale_ordersvc_batches_checked_total", "cause", cause); !ok || n != 0 {
				t.Errorf("batches_checked_total{cause=%q} %v (found %v), want 0: the one order was new", cause, n, ok)
			}
		}
	}
	// The consumer committed the one message: the periodic lag reading
	// says so on /metrics and in the sale's status.
	waitFor(t, "consumer lag 0 on /metrics", func() (bool, string) {
		fams, err := scrape.Get(t.Context(), nil, admin+"/metrics")
		ok, okFound := fams.Value("flashsale_ordersvc_consumer_lag_read_ok")
		lag, lagFound := fams.Value("flashsale_ordersvc_consumer_lag_messages")
		return err == nil && okFound && ok == 1 && lagFound && lag == 0, fmt.Sprintf("read ok %v, lag %v (%v %v), %v", ok, lag, okFound, lagFound, err)
	})
	if code, body := call(t, "GET", fmt.Sprintf("%s/admin/sales/%d/status", admin, v.ID), bearer, ""); code != 200 ||
		!bytes.Contains(body, []byte(`"ordersByStatus":{"CANCELLED":0,"EXPIRED":0,"PAID":0,"PENDING":1,"REJECTED":0}`)) ||
		!bytes.Contains(body, []byte(`"consumerLag":{"total":0,"partitions":[{"partition":`)) {
		t.Errorf("status: %d %s", code, body)
	}
	if code, body := call(t, "GET", fmt.Sprintf("%s/admin/sales/%d", admin, v.ID), bearer, ""); code != 200 || !bytes.Contains(body, []byte(`"sold":1`)) {
		t.Errorf("describe: %d %s", code, body)
	}
	// The lifecycle is wired: the owner pays; an order past its window is
	// expired by the sweeper; reconciliation sees that Redis never held
	// these orders (published straight to Kafka, no gateway) and repairs.
	orderURL := public + "/api/flash-sales/orders/" + ev.OrderID.String()
	if code, body := call(t, "POST", orderURL+"/pay", "Bearer "+tok, `{"paymentRef":"serve-`+suffix+`"}`); code != 200 || !bytes.Contains(body, []byte(`"status":"PAID"`)) {
		t.Errorf("pay: %d %s", code, body)
	}
	late := event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: v.ID, ItemID: v.Items[0].ID, UserID: "bob", PlacedAt: time.Now().Add(-11 * time.Minute)}
	publish(t, topic, late)
	bobTok, err := auth.MintHS256([]byte(jwtKey), "bob", "flashsale", "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "late order expired", func() (bool, string) {
		code, body := call(t, "GET", public+"/api/flash-sales/orders/"+late.OrderID.String(), "Bearer "+bobTok, "")
		return code == 200 && bytes.Contains(body, []byte(`"status":"EXPIRED"`)), fmt.Sprintf("%d %s", code, body)
	})
	reconcile := fmt.Sprintf("%s/admin/sales/%d/reconcile", admin, v.ID)
	if code, body := call(t, "POST", reconcile, bearer, ""); code != 200 || !bytes.Contains(body, []byte(`"kind":"HOLDER_MISSING","itemId":`)) {
		t.Errorf("reconcile: %d %s", code, body)
	}
	if code, body := call(t, "POST", reconcile+"?repair=true", bearer, ""); code != 200 || !bytes.Contains(body, []byte(`"repaired":true`)) {
		t.Errorf("reconcile and repair: %d %s", code, body)
	}
	if code, body := call(t, "POST", reconcile, bearer, ""); code != 200 || !bytes.Contains(body, []byte(`"clean":true`)) {
		t.Errorf("reconcile after the repair: %d %s", code, body)
	}

	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after a clean shutdown", err)
		}
		t.Logf("shutdown took %s", time.Since(start))
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15s")
	}
}

// reconcile prints one line per difference and a summary, exits with
// ErrDifferences until --repair rewrites Redis.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	env, _, _ := toolEnv(t, nil)
	var out bytes.Buffer
	if err := app.Run(ctx, []string{"create-sale", "--name", "reconcile " + t.Name(), "--starts-at", "+0s", "--item", "phone:10:3"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var v sale.View
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if err := app.Run(ctx, []string{"load-stock", "--sale", fmt.Sprint(v.ID)}, env, &bytes.Buffer{}, io.Discard); err != nil {
		t.Fatal(err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// A reservation nobody was given: a failed publish whose release failed.
	if _, err := stock.New(rc).Reserve(ctx, v.ID, v.Items[0].ID, "ghost", uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	lines := func() []map[string]any {
		var ls []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			ls = append(ls, m)
		}
		return ls
	}
	args := []string{"reconcile", "--sale", fmt.Sprint(v.ID)}
	steps := []struct {
		name      string
		args      []string
		wantErr   error
		wantKinds []any // kind of each difference line, then the summary
		wantClean bool
	}{
		{"found", args, app.ErrDifferences, []any{sale.DiffHolderLeaked, sale.DiffStockMismatch}, false},
		{"repaired", append(args, "--repair"), nil, []any{sale.DiffHolderLeaked, sale.DiffStockMismatch}, false},
		{"clean", args, nil, nil, true},
	}
	for _, st := range steps {
		out.Reset()
		err := app.Run(ctx, st.args, env, &out, io.Discard)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: got %v, want %v", st.name, err, st.wantErr)
		}
		ls := lines()
		var kinds []any
		for _, l := range ls[:len(ls)-1] {
			kinds = append(kinds, l["kind"])
		}
		if fmt.Sprint(kinds) != fmt.Sprint(st.wantKinds) {
			t.Errorf("%s: difference lines %v, want %v:\n%s", st.name, kinds, st.wantKinds, out.String())
		}
		sum := ls[len(ls)-1]
		if sum["clean"] != st.wantClean || sum["saleId"] != float64(v.ID) || sum["leaked"] != float64(len(st.wantKinds)/2) {
			t.Errorf("%s: summary %v", st.name, sum)
		}
	}
	if err := app.Run(ctx, []string{"reconcile"}, env, &out, io.Discard); !errors.Is(err, app.ErrUsage) {
		t.Errorf("reconcile without --sale: got %v, want ErrUsage", err)
	}
}

// load-stock refuses to compute stock while an order sits in the orders
// topic uncommitted by the consumer group, saying how far behind it is,
// and loads once the group has committed it.
func TestLoadStockWaitsForTheConsumer(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	env, topic, group := toolEnv(t, map[string]string{"FLASHSALE_RECONCILE_CATCHUP_TIMEOUT": "300ms"})
	var out bytes.Buffer
	if err := app.Run(ctx, []string{"create-sale", "--name", "lag " + t.Name(), "--starts-at", "+0s", "--item", "phone:10:3"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var v sale.View
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	publish(t, topic, event.OrderPlaced{Version: 1, OrderID: uuid.New(), SaleID: v.ID, ItemID: v.Items[0].ID, UserID: "alice", PlacedAt: time.Now()})

	out.Reset()
	err := app.Run(ctx, []string{"load-stock", "--sale", fmt.Sprint(v.ID)}, env, &out, io.Discard)
	if !errors.Is(err, lag.ErrLagging) {
		t.Fatalf("load-stock with an order uncommitted: got %v, want lag.ErrLagging", err)
	}
	for _, want := range []string{group, "1 messages behind", topic} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if out.Len() != 0 {
		t.Errorf("load-stock printed %q although it loaded nothing", out.String())
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := stock.New(rc).Left(ctx, v.ID, v.Items[0].ID); !errors.Is(err, stock.ErrNotLoaded) {
		t.Errorf("stock after the refused load: got %v, want not loaded", err)
	}

	commitAll(t, topic, group, 1)
	if err := app.Run(ctx, []string{"load-stock", "--sale", fmt.Sprint(v.ID)}, env, &out, io.Discard); err != nil {
		t.Fatalf("load-stock once the group committed: %v", err)
	}
}

// commitAll reads n messages of topic as a member of group and commits
// them, as the order consumer does after persisting them.
func commitAll(t *testing.T, topic, group string, n int) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "group.id": group,
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for read := 0; read < n; {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d messages of %s in 20s", read, n, topic)
		}
		if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			read++
		}
	}
	if _, err := c.Commit(); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 20s; last: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func publish(t *testing.T, topic string, ev event.OrderPlaced) {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "acks": "all", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan kafka.Event, 1)
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: []byte(fmt.Sprint(ev.ItemID)), Value: b}, reports); err != nil {
		t.Fatal(err)
	}
	if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
		t.Fatal(m.TopicPartition.Error)
	}
}
