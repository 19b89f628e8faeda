// Package harness starts the real gateway and order service binaries as
// processes against the local stack (make up), each test with its own
// ports, topics and consumer group, so black-box tests see exactly what a
// deployment does: one of each, or several gateways behind one port and
// several order services in one consumer group, on a single Redis or the
// local Redis Cluster.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flashsale/tools/testenv"
)

// Keys shared by the processes and the tests that mint tokens.
var (
	JWTKey     = []byte("e2e-jwt-key-0123456789abcdef0123456789")
	GateKey    = []byte("e2e-gate-key-0123456789abcdef012345678")
	AdminToken = "e2e-admin-token-0123456789"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build compiles both binaries once per test process.
func build() (string, error) {
	buildOnce.Do(func() {
		root, err := testenv.Root()
		if err != nil {
			buildErr = err
			return
		}
		binDir, err = os.MkdirTemp("", "flashsale-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		for _, name := range []string{"gateway", "ordersvc"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), "./"+name)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	return binDir, buildErr
}

// Stack is one or more gateways and one or more order services. With one
// of each it is what it always was; with more, the gateways share one
// public port through SO_REUSEPORT (each keeps its own admin port), and
// the order services share one consumer group.
type Stack struct {
	GatewayURL      string // the public port every gateway serves
	GatewayAdminURL string // the first gateway's admin listener
	OrdersURL       string // the first order service's public listener
	AdminURL        string // the first order service's admin listener
	// GatewayAdminURLs and OrdersvcAdminURLs have one entry per instance,
	// in the order of GatewayNames and OrdersvcNames.
	GatewayAdminURLs  []string
	OrdersvcAdminURLs []string
	OrdersURLs        []string
	Topic             string
	Env               map[string]string
	procEnv           map[string]map[string]string
	specs             map[string]procSpec
	procs             map[string]*proc
	gateways          []string
	ordersvcs         []string
	t                 testing.TB
}

type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// procSpec is how to start one instance again.
type procSpec struct {
	bin   string
	args  []string
	ready string            // readiness URL
	env   map[string]string // over Stack.Env, under Options.ProcEnv
}

// Options change a stack's environment.
type Options struct {
	Env map[string]string // extra FLASHSALE_* settings
	// ProcEnv overrides Env for one process by name ("gateway",
	// "ordersvc", or "gateway-2", "ordersvc-2", ... for the extra
	// instances), e.g. to send only the gateway's Redis traffic through a
	// fault proxy.
	ProcEnv map[string]map[string]string
	// Gateways is how many gateway processes serve the public port
	// (FLASHSALE_REUSEPORT); 0 means 1.
	Gateways int
	// Ordersvcs is how many order service processes share the consumer
	// group, each with its own ports; 0 means 1. The gateways proxy order
	// polling to the first one.
	Ordersvcs int
	// RedisAddr is the Redis every process uses: one node or a cluster's
	// seed list (testenv.RequireCluster). Empty means testenv.RedisAddr().
	RedisAddr string
	// KafkaBrokers is the bootstrap list every process uses (for example
	// testenv.RequireKafkaCluster). Empty means testenv.KafkaBrokers().
	KafkaBrokers string
}

// GatewayName and OrdersvcName name instance i (0-based): "gateway",
// "gateway-2", ... The names are what Kill, Restart, Signal, Terminate
// and Log take.
func GatewayName(i int) string  { return instanceName("gateway", i) }
func OrdersvcName(i int) string { return instanceName("ordersvc", i) }

func instanceName(base string, i int) string {
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, i+1)
}

// GatewayNames and OrdersvcNames list the instances of this stack.
func (s *Stack) GatewayNames() []string  { return slices.Clone(s.gateways) }
func (s *Stack) OrdersvcNames() []string { return slices.Clone(s.ordersvcs) }

// Start builds the binaries if needed and starts the services. They stop
// when the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	redisAddr, kafkaBrokers := o.RedisAddr, o.KafkaBrokers
	if redisAddr == "" {
		redisAddr = testenv.RedisAddr()
	}
	if kafkaBrokers == "" {
		kafkaBrokers = testenv.KafkaBrokers()
	}
	testenv.Require(t, redisAddr, testenv.PostgresAddr(), kafkaBrokers)
	dir, err := build()
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, o, topicID(t))
	s.Env = s.baseEnv(redisAddr, kafkaBrokers)
	if len(s.GatewayAdminURLs) > 1 {
		s.Env["FLASHSALE_REUSEPORT"] = "true"
	}
	for k, v := range o.Env {
		s.Env[k] = v
	}
	s.addSpecs(dir)
	s.createTopics(kafkaBrokers)
	// The processes' logs go to the test's temporary directory. Asking for
	// it now registers its removal before Stop, so it runs after Stop
	// (cleanups run last in, first out) and a dump Stop asks for lands in a
	// log that still exists.
	t.TempDir()
	t.Cleanup(s.Stop)
	// The first order service migrates the schema before anyone reads it.
	for _, n := range append(s.OrdersvcNames(), s.GatewayNames()...) {
		s.startProc(n)
		s.waitReady(n)
	}
	return s
}

// topicID is a test's own id: it names the orders topic, the dead-letter
// topic and the consumer group. It keeps to Kafka's topic alphabet (ASCII
// letters, digits, '.', '_', '-'; at most 249 characters).
func topicID(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	return fmt.Sprintf("e2e-%.200s-%d", name, time.Now().UnixNano())
}

// newStack lays out a stack's listeners: one public port, an admin port
// per gateway, a public and an admin port per order service.
func newStack(t testing.TB, o Options, id string) *Stack {
	nGW, nOS := max(o.Gateways, 1), max(o.Ordersvcs, 1)
	ports := freePorts(t, 1+nGW+2*nOS)
	gwAdmin, osPorts := ports[1:1+nGW], ports[1+nGW:]
	s := &Stack{
		GatewayURL: "http://" + ports[0],
		Topic:      id,
		procEnv:    o.ProcEnv,
		specs:      map[string]procSpec{},
		procs:      map[string]*proc{},
		t:          t,
	}
	for i := range nGW {
		s.GatewayAdminURLs = append(s.GatewayAdminURLs, "http://"+gwAdmin[i])
	}
	for i := range nOS {
		s.OrdersURLs = append(s.OrdersURLs, "http://"+osPorts[2*i])
		s.OrdersvcAdminURLs = append(s.OrdersvcAdminURLs, "http://"+osPorts[2*i+1])
	}
	s.GatewayAdminURL, s.OrdersURL, s.AdminURL = s.GatewayAdminURLs[0], s.OrdersURLs[0], s.OrdersvcAdminURLs[0]
	return s
}

// hostPort is a listener URL's address, as the services' settings take it.
func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// baseEnv is the environment every process of s shares; the first
// instance's listeners are in it, and addSpecs gives each other instance
// its own.
func (s *Stack) baseEnv(redisAddr, kafkaBrokers string) map[string]string {
	return map[string]string{
		"FLASHSALE_REDIS_ADDR":          redisAddr,
		"FLASHSALE_PG_DSN":              testenv.PostgresDSN(),
		"FLASHSALE_KAFKA_BROKERS":       kafkaBrokers,
		"FLASHSALE_ORDERS_TOPIC":        s.Topic,
		"FLASHSALE_DLQ_TOPIC":           s.Topic + ".dlq",
		"FLASHSALE_CONSUMER_GROUP":      s.Topic,
		"FLASHSALE_JWT_HS256_KEY":       string(JWTKey),
		"FLASHSALE_GATE_KEY":            string(GateKey),
		"FLASHSALE_ADMIN_TOKEN":         AdminToken,
		"FLASHSALE_GATEWAY_ADDR":        hostPort(s.GatewayURL),
		"FLASHSALE_GATEWAY_ADMIN_ADDR":  hostPort(s.GatewayAdminURL),
		"FLASHSALE_ORDERSVC_ADDR":       hostPort(s.OrdersURL),
		"FLASHSALE_ORDERSVC_ADMIN_ADDR": hostPort(s.AdminURL),
		"FLASHSALE_CATALOG_REFRESH":     "200ms",
		"FLASHSALE_STOCK_POLL":          "200ms",
		"FLASHSALE_LOG_LEVEL":           "info",
		// Every test shopper comes from 127.0.0.1: per-IP limits would
		// measure the harness, not the system; and a test polls its
		// orders as fast as it can, where a shopper's page waits a second
		// or more. Tests of limits set them.
		"FLASHSALE_LIMIT_PURCHASE_IP": "off",
		"FLASHSALE_LIMIT_QUEUE_IP":    "off",
		"FLASHSALE_LIMIT_POLL_USER":   "off",
	}
}

// addSpecs records how to start each instance, binaries from dir.
func (s *Stack) addSpecs(dir string) {
	for i := range s.OrdersvcAdminURLs {
		n := OrdersvcName(i)
		s.ordersvcs = append(s.ordersvcs, n)
		s.specs[n] = procSpec{bin: filepath.Join(dir, "ordersvc"), args: []string{"serve"},
			ready: s.OrdersvcAdminURLs[i] + "/readyz",
			env: map[string]string{"FLASHSALE_ORDERSVC_ADDR": hostPort(s.OrdersURLs[i]),
				"FLASHSALE_ORDERSVC_ADMIN_ADDR": hostPort(s.OrdersvcAdminURLs[i])}}
	}
	for i := range s.GatewayAdminURLs {
		n := GatewayName(i)
		s.gateways = append(s.gateways, n)
		s.specs[n] = procSpec{bin: filepath.Join(dir, "gateway"), ready: s.GatewayAdminURLs[i] + "/readyz",
			env: map[string]string{"FLASHSALE_GATEWAY_ADMIN_ADDR": hostPort(s.GatewayAdminURLs[i])}}
	}
}

func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ls []net.Listener
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

func (s *Stack) startProc(name string) {
	s.t.Helper()
	spec, ok := s.specs[name]
	if !ok {
		s.t.Fatalf("no process %s", name)
	}
	// FLASHSALE_TEST_LOGS keeps every process log after the run (a test's
	// temporary folder goes with it), for a failure seen only in CI.
	dir := s.t.TempDir()
	if keep := os.Getenv("FLASHSALE_TEST_LOGS"); keep != "" {
		dir = filepath.Join(keep, strings.NewReplacer("/", "_").Replace(s.t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			s.t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Env = os.Environ()
	for _, layer := range []map[string]string{s.Env, spec.env, s.procEnv[name]} {
		for k, v := range layer {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	s.procs[name] = p
}

func (s *Stack) waitReady(name string) {
	s.t.Helper()
	url := s.specs[name].ready
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.procs[name].done:
			s.t.Fatalf("%s exited during start:\n%s", name, s.Log(name))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("%s not ready at %s within 60s:\n%s", name, url, s.Log(name))
}

// Log returns a process's output so far.
func (s *Stack) Log(name string) string {
	p, ok := s.procs[name]
	if !ok {
		return "(no process " + name + ")"
	}
	b, _ := os.ReadFile(p.log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// Kill sends SIGKILL to a service (fault tests), without cleanup.
func (s *Stack) Kill(name string) {
	p, ok := s.procs[name]
	if !ok {
		s.t.Fatalf("no process %s", name)
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig to a running service, e.g. SIGSTOP and SIGCONT to stall
// it (fault tests). A stopped service must be continued before the test
// ends, or Stop waits 30s for it.
func (s *Stack) Signal(name string, sig os.Signal) error {
	p, ok := s.procs[name]
	if !ok {
		return fmt.Errorf("no process %s", name)
	}
	return p.cmd.Process.Signal(sig)
}

// SetProcEnv replaces the per-process overrides of one process (see
// Options.ProcEnv) for its next Restart, e.g. to bring a gateway back with
// a reachable broker after a fault test killed it.
func (s *Stack) SetProcEnv(name string, env map[string]string) {
	if s.procEnv == nil {
		s.procEnv = map[string]map[string]string{}
	}
	s.procEnv[name] = env
}

// Restart starts a killed or stopped service again with the same settings
// and waits until it is ready.
func (s *Stack) Restart(name string) {
	s.t.Helper()
	s.startProc(name)
	s.waitReady(name)
}

// Stop shuts every service down gracefully (SIGTERM), the gateways first.
func (s *Stack) Stop() {
	for _, name := range append(s.GatewayNames(), s.OrdersvcNames()...) {
		p, ok := s.procs[name]
		if !ok {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		if s.t.Failed() {
			// What a process was doing when the test failed is worth more
			// than its graceful stop: its goroutines go to its log.
			s.dumpAndKill(p)
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			last := s.Log(name) // its last lines, before the dump follows them
			s.dumpAndKill(p)
			s.t.Errorf("%s did not stop within 30s of SIGTERM (its goroutines are in %s):\n%s", name, p.log, last)
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 && !s.t.Failed() {
			s.t.Errorf("%s exited with %d:\n%s", name, code, s.Log(name))
		}
	}
}

// Do sends a request with an optional bearer token and returns status and body.
func Do(ctx context.Context, method, url, token string, body []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), resp.Header, err
}
