package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"flashsale/tools/stackctl"
	"flashsale/tools/testenv"
)

// The servers are stopped, started and killed through tools/stackctl, which
// runs the one script of deploy/stack/ that owns each.

// ensureStarted registers a cleanup that starts the service again (start is
// idempotent) and waits until it answers, so a failing test never leaves
// the stack broken for the next one.
func ensureStarted(t *testing.T, svc stackctl.Service) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := svc.Start(ctx); err != nil {
			t.Errorf("restore %s: %v", svc, err)
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
func stopServer(t *testing.T, svc stackctl.Service) {
	t.Helper()
	ensureStarted(t, svc)
	if err := svc.Stop(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
}

// startServer starts a stack server and waits until it answers.
func startServer(t *testing.T, svc stackctl.Service) {
	t.Helper()
	if err := svc.Start(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := waitAnswers(svc, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitAnswers waits until the service answers a real request, not just TCP.
func waitAnswers(svc stackctl.Service, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		switch svc {
		case stackctl.Redis:
			last = pingRedis(ctx)
		case stackctl.Postgres:
			last = pingPostgres(ctx)
		case stackctl.Kafka:
			last = pingKafka(ctx)
		case stackctl.KafkaCluster:
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

// thawLeftover sends SIGCONT to the stack's broker, if it runs. Errors
// are ignored: the tests that need the broker fail on their own, with a
// clearer message.
func thawLeftover() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pid, err := stackctl.KafkaPid(ctx); err == nil {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// brokerPid is the one-node broker's process id.
func brokerPid(t testing.TB) int {
	t.Helper()
	pid, err := stackctl.KafkaPid(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
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
	ensureStarted(t, stackctl.Kafka)
	pid := brokerPid(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL broker %d: %v", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !exited(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still alive 10s after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	startServer(t, stackctl.Kafka)
}

// exited reports whether process pid is gone or a zombie with every
// thread gone. A JVM's main thread turns zombie first; its sockets stay
// open until the last of its other threads has exited (they share the
// descriptor table), and a broker started before that finds its port
// taken.
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || !strings.Contains(string(st), ") Z ") {
		return err != nil
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(tasks) <= 1
}
