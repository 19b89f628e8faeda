package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartKeepsRecordsAndOffsets produces and commits against one broker
// run, restarts on the same data folder, and reads back what must survive:
// every acknowledged record and the group's committed offset. The broker
// stops either gracefully (run's context cancelled, as on SIGTERM) or by
// SIGKILL of a child process, where only what was written before each ack
// can survive.
func TestRestartKeepsRecordsAndOffsets(t *testing.T) {
	tests := []struct {
		name  string
		topic string
		kill  bool
	}{
		{name: "graceful stop, seeded topic", topic: ordersTopic},
		{name: "graceful stop, auto-created topic", topic: "auto-created"},
		{name: "SIGKILL, seeded topic", topic: ordersTopic, kill: true},
		// kfake alone forgets topics it auto-created when killed; see
		// durableAutoCreate.
		{name: "SIGKILL, auto-created topic", topic: "auto-created", kill: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			dir := t.TempDir()
			const group = "restart-test"
			start := startBroker
			if tt.kill {
				start = startChildBroker
			}

			addr, stop := start(ctx, t, dir)
			produce(ctx, t, addr, tt.topic, "first")
			if got := consumeGroup(ctx, t, addr, tt.topic, group, 1); got[0] != "first" {
				t.Fatalf("first run consumed %q, want %q", got[0], "first")
			}
			produce(ctx, t, addr, tt.topic, "second") // after the commit: the group must resume here
			stop()

			addr, _ = startBroker(ctx, t, dir) // stopped by its t.Cleanup, after the clients'
			var out bytes.Buffer
			if err := run(ctx, []string{"-probe", "-addr-port", portOf(t, addr)}, noEnv, &out); err != nil {
				t.Fatalf("probe after restart: %v", err)
			}

			cl := newClient(t, addr, kgo.ConsumeTopics(tt.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var all []string
			for len(all) < 2 {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("poll after restart (have %q): %v", all, err)
				}
				fs.EachRecord(func(r *kgo.Record) { all = append(all, string(r.Value)) })
			}
			cl.Close()
			if got := strings.Join(all, ","); got != "first,second" {
				t.Errorf("records after restart = %s, want first,second", got)
			}

			if got := consumeGroup(ctx, t, addr, tt.topic, group, 1); got[0] != "second" {
				t.Errorf("group resumed at %q, want %q (committed offset lost)", got[0], "second")
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string // substrings naming every bad field; empty means valid
		check   func(Config) bool
	}{
		{
			name:  "defaults",
			check: func(c Config) bool { return c.Port == 19092 && c.Partitions == 6 && c.DataDir == "" },
		},
		{
			name:  "environment overrides the default port",
			env:   map[string]string{"FLASHSALE_KAFKA_PORT": "29092"},
			check: func(c Config) bool { return c.Port == 29092 },
		},
		{
			name:  "flag overrides the environment",
			args:  []string{"-addr-port", "39092"},
			env:   map[string]string{"FLASHSALE_KAFKA_PORT": "29092"},
			check: func(c Config) bool { return c.Port == 39092 },
		},
		{
			name:    "every bad field is reported at once",
			args:    []string{"-partitions", "0", "-shutdown-timeout", "0s", "-log-level", "loud"},
			env:     map[string]string{"FLASHSALE_KAFKA_PORT": "x"},
			wantErr: []string{"FLASHSALE_KAFKA_PORT", "partitions", "shutdown-timeout", "log-level"},
		},
		{
			name:    "probe needs a concrete port",
			args:    []string{"-probe", "-addr-port", "0"},
			wantErr: []string{"addr-port"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				if !tt.check(cfg) {
					t.Errorf("loadConfig = %+v, unexpected", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("loadConfig = %+v, want an error", cfg)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func noEnv(string) string { return "" }

var listenRE = regexp.MustCompile(`msg="broker listening" addr=(\S+)`)

// startBroker runs the broker in-process on a free port with its data in dir
// and returns its address and a stop function that waits for the graceful
// close.
func startBroker(ctx context.Context, t *testing.T, dir string) (string, func()) {
	t.Helper()
	return startBrokerArgs(ctx, t, []string{"-addr-port", "0", "-data-dir", dir, "-partitions", "2"})
}

// startBrokerArgs is startBroker with the broker's whole command line.
func startBrokerArgs(ctx context.Context, t testing.TB, args []string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, noEnv, pw)
		pw.Close()
		done <- err
	}()

	addr := ""
	sc := bufio.NewScanner(pr)
	for addr == "" && sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }() // keep the broker's log from blocking it
	if addr == "" {
		cancel()
		t.Fatalf("broker did not start: %v", <-done)
	}

	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker run: %v", err)
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// childEnv carries the broker's arguments to a copy of the test binary that
// runs the broker instead of the tests, so a test can SIGKILL it.
const childEnv = "KAFKA_BROKER_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, strings.Split(args, "\n"), noEnv, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "child broker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startChildBroker runs the broker in a child process on a free port with
// its data in dir; stop kills it with SIGKILL, so nothing runs at shutdown.
func startChildBroker(ctx context.Context, t *testing.T, dir string) (string, func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find test binary: %v", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{"-addr-port", "0", "-data-dir", dir, "-partitions", "2"}, "\n"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("child stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child broker: %v", err)
	}
	addr := ""
	sc := bufio.NewScanner(out)
	for addr == "" && sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait() // "signal: killed" is the expected outcome
	}
	t.Cleanup(stop)
	if addr == "" {
		stop()
		t.Fatal("child broker did not start")
	}
	return addr, stop
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q has no port", addr)
	}
	return addr[i+1:]
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	// A fetch for the partitions assigned first long-polls up to
	// FetchMaxWait before the rest join in (kgo's default is 5 s).
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.FetchMaxWait(200 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes one record the way the gateway does: acks=all, idempotent
// (both kgo defaults), and returns once the broker acknowledged it. Like
// librdkafka's producer it lets the broker auto-create the topic.
func produce(ctx context.Context, t *testing.T, addr, topic, value string) {
	t.Helper()
	cl := newClient(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())
	rec := &kgo.Record{Topic: topic, Key: []byte("item-1"), Value: []byte(value)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce %q: %v", value, err)
	}
	cl.Close()
}

// consumeGroup reads n records as a member of group, commits them and leaves.
func consumeGroup(ctx context.Context, t *testing.T, addr, topic, group string, n int) []string {
	t.Helper()
	cl := newClient(t, addr,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll group %s (have %q): %v", group, got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit group %s: %v", group, err)
		}
	}
	cl.Close()
	return got
}
