package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"flashsale/tools/testenv"
)

// repoRoot is the folder of go.work, where deploy/stack.sh lives.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		t.Fatal("the fault tests drive deploy/stack.sh and build the workspace's binaries: run them inside the repository with go.work")
	}
	return filepath.Dir(w)
}

// stackDir is where deploy/stack.sh keeps pid files (FLASHSALE_STACK_DIR).
func stackDir(t testing.TB) string {
	if d := os.Getenv("FLASHSALE_STACK_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(t), ".stack")
}

// stack runs deploy/stack.sh with the test's environment, so a stack on
// other ports (FLASHSALE_*_PORT, FLASHSALE_STACK_DIR) is driven the same way.
func stack(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "deploy", "stack.sh")}, args...)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ensureStarted registers a cleanup that starts the service again (start is
// idempotent) and waits until it answers, so a failing test never leaves
// the stack broken for the next one.
func ensureStarted(t *testing.T, svc string) {
	t.Cleanup(func() {
		cmd := exec.Command("bash", filepath.Join(repoRoot(t), "deploy", "stack.sh"), "start", svc)
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("restore %s: deploy/stack.sh start: %v\n%s", svc, err, out)
			return
		}
		if err := waitAnswers(svc, 60*time.Second); err != nil {
			t.Errorf("restore %s: %v", svc, err)
		}
	})
}

// stopServer stops a stack server (Redis: keys lost; PostgreSQL: fast
// shutdown; Kafka: SIGTERM, acked records stay on disk) and makes sure it
// is started again when the test ends.
func stopServer(t *testing.T, svc string) {
	t.Helper()
	ensureStarted(t, svc)
	stack(t, "stop", svc)
}

// startServer starts a stack server and waits until it answers.
func startServer(t *testing.T, svc string) {
	t.Helper()
	stack(t, "start", svc)
	if err := waitAnswers(svc, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitAnswers waits until the service answers a real request, not just TCP.
func waitAnswers(svc string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		switch svc {
		case "redis":
			last = pingRedis(ctx)
		case "postgres":
			last = pingPostgres(ctx)
		case "kafka":
			last = pingKafka(ctx)
		case "kafka-cluster":
			last = pingKafkaCluster(ctx)
		default:
			return fmt.Errorf("unknown service %s", svc)
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s does not answer within %v: %v", svc, bound, last)
}

func pingRedis(ctx context.Context) error {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

func pingPostgres(ctx context.Context) error {
	c, err := pgx.Connect(ctx, testenv.PostgresDSN())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// thawLeftover sends SIGCONT to the broker named by stack.sh's pid file,
// if there is one. Errors are ignored: the tests that need the broker fail
// on their own, with a clearer message.
func thawLeftover() {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return
	}
	dir := os.Getenv("FLASHSALE_STACK_DIR")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), ".stack")
	}
	b, err := os.ReadFile(filepath.Join(dir, "kafka", "single", "kafka.pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// brokerPid is the Kafka-protocol broker's process id, from stack.sh's pid
// file.
func brokerPid(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stackDir(t), "kafka", "single", "kafka.pid"))
	if err != nil {
		t.Fatalf("broker pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("broker pid file: %v", err)
	}
	return pid
}

// freezeBroker stops the broker with SIGSTOP: its sockets stay open and the
// kernel still accepts connections, but nothing is answered, which is what a
// black-holed network path looks like to a client. The returned function
// (also run at cleanup) continues it.
func freezeBroker(t *testing.T) (thaw func()) {
	t.Helper()
	pid := brokerPid(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP broker %d: %v", pid, err)
	}
	thawed := false
	thaw = func() {
		if thawed {
			return
		}
		thawed = true
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("SIGCONT broker %d: %v", pid, err)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// crashBroker kills the broker with SIGKILL (frozen or not: whatever sits
// unread in its sockets is lost with it; acknowledged records and committed
// offsets are on disk) and starts it again.
func crashBroker(t *testing.T) {
	t.Helper()
	ensureStarted(t, "kafka")
	pid := brokerPid(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL broker %d: %v", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			break // a zombie until init reaps it: dead already
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still alive 10s after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	startServer(t, "kafka")
}
