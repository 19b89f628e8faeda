// Package harness starts the real gateway and order service binaries as
// processes against the local stack (make up), each test with its own
// ports, topics and consumer group, so black-box tests see exactly what a
// deployment does.
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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flashsale/pkg/testenv"
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
		root, err := repoRoot()
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

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		return "", fmt.Errorf("the e2e tests build the workspace's binaries: run them inside the repository with go.work")
	}
	return filepath.Dir(w), nil
}

// Stack is one gateway and one order service.
type Stack struct {
	GatewayURL      string
	GatewayAdminURL string
	OrdersURL       string
	AdminURL        string // the order service's admin listener
	Topic           string
	Env             map[string]string
	procEnv         map[string]map[string]string
	procs           map[string]*proc
	t               testing.TB
}

type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Options change a stack's environment.
type Options struct {
	Env map[string]string // extra FLASHSALE_* settings
	// ProcEnv overrides Env for one process ("gateway" or "ordersvc"), e.g.
	// to send only the gateway's Redis traffic through a fault proxy.
	ProcEnv map[string]map[string]string
}

// Start builds the binaries if needed and starts both services. They stop
// when the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr(), testenv.PostgresAddr(), testenv.KafkaBrokers())
	dir, err := build()
	if err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	id := fmt.Sprintf("e2e-%s-%d", strings.ToLower(name), time.Now().UnixNano())
	ports := freePorts(t, 4)
	s := &Stack{
		GatewayURL:      "http://" + ports[0],
		GatewayAdminURL: "http://" + ports[1],
		OrdersURL:       "http://" + ports[2],
		AdminURL:        "http://" + ports[3],
		Topic:           id,
		procEnv:         o.ProcEnv,
		procs:           map[string]*proc{},
		t:               t,
	}
	s.Env = map[string]string{
		"FLASHSALE_REDIS_ADDR":          testenv.RedisAddr(),
		"FLASHSALE_PG_DSN":              testenv.PostgresDSN(),
		"FLASHSALE_KAFKA_BROKERS":       testenv.KafkaBrokers(),
		"FLASHSALE_ORDERS_TOPIC":        id,
		"FLASHSALE_DLQ_TOPIC":           id + ".dlq",
		"FLASHSALE_CONSUMER_GROUP":      id,
		"FLASHSALE_JWT_HS256_KEY":       string(JWTKey),
		"FLASHSALE_GATE_KEY":            string(GateKey),
		"FLASHSALE_ADMIN_TOKEN":         AdminToken,
		"FLASHSALE_GATEWAY_ADDR":        ports[0],
		"FLASHSALE_GATEWAY_ADMIN_ADDR":  ports[1],
		"FLASHSALE_ORDERSVC_ADDR":       ports[2],
		"FLASHSALE_ORDERSVC_ADMIN_ADDR": ports[3],
		"FLASHSALE_CATALOG_REFRESH":     "200ms",
		"FLASHSALE_STOCK_POLL":          "200ms",
		"FLASHSALE_LOG_LEVEL":           "info",
		// Every test shopper comes from 127.0.0.1: per-IP limits would
		// measure the harness, not the system. Tests of limits set them.
		"FLASHSALE_LIMIT_PURCHASE_IP": "off",
		"FLASHSALE_LIMIT_QUEUE_IP":    "off",
	}
	for k, v := range o.Env {
		s.Env[k] = v
	}
	// The order service migrates the schema before the gateway reads it.
	s.startProc(filepath.Join(dir, "ordersvc"), "ordersvc", "serve")
	s.waitReady("ordersvc", s.AdminURL+"/readyz")
	s.startProc(filepath.Join(dir, "gateway"), "gateway")
	s.waitReady("gateway", s.GatewayAdminURL+"/readyz")
	t.Cleanup(s.Stop)
	return s
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

func (s *Stack) startProc(bin, name string, args ...string) {
	s.t.Helper()
	logPath := filepath.Join(s.t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range s.procEnv[name] {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	s.procs[name] = p
}

func (s *Stack) waitReady(name, url string) {
	s.t.Helper()
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
	b, _ := os.ReadFile(s.procs[name].log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// Kill sends SIGKILL to a service (fault tests), without cleanup.
func (s *Stack) Kill(name string) {
	p := s.procs[name]
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

// Restart starts a killed or stopped service again with the same settings.
func (s *Stack) Restart(name string) {
	s.t.Helper()
	dir, _ := build()
	args := map[string][]string{"ordersvc": {"serve"}, "gateway": nil}[name]
	s.startProc(filepath.Join(dir, name), name, args...)
	ready := map[string]string{"ordersvc": s.AdminURL + "/readyz", "gateway": s.GatewayAdminURL + "/readyz"}[name]
	s.waitReady(name, ready)
}

// Stop shuts both services down gracefully (SIGTERM), the gateway first.
func (s *Stack) Stop() {
	for _, name := range []string{"gateway", "ordersvc"} {
		p, ok := s.procs[name]
		if !ok {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			s.t.Errorf("%s did not stop within 30s of SIGTERM:\n%s", name, s.Log(name))
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
