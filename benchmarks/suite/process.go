package suite

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one baseline process.
type proc struct {
	url    string
	pid    int
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan error
}

// startBaseline starts the baseline command for one design on a free
// loopback port and waits until it accepts connections (it listens only
// once its dependencies answer).
func startBaseline(ctx context.Context, o Options, design string) (*proc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	logPath := filepath.Join(o.LogDir, "baseline-"+design+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("baseline log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	pctx, cancel := context.WithCancel(ctx)
	args := []string{"-design", design, "-addr", addr, "-pg-conns", strconv.Itoa(o.PGConns)}
	if o.ProfileDir != "" {
		args = append(args, "-cpuprofile", filepath.Join(o.ProfileDir, "baseline-"+design+".prof"))
	}
	cmd := exec.CommandContext(pctx, o.BaselineBin, args...)
	cmd.Env = []string{
		"FLASHSALE_JWT_HS256_KEY=" + string(o.JWTKey),
		"FLASHSALE_JWT_ISSUER=" + o.JWTIssuer,
		"FLASHSALE_PG_DSN=" + o.PostgresDSN,
		"FLASHSALE_REDIS_ADDR=" + o.RedisAddr,
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second // then SIGKILL
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start baseline %s: %w", design, err)
	}
	p := &proc{url: "http://" + addr, pid: cmd.Process.Pid, cmd: cmd, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case err := <-p.done:
			cancel()
			return nil, fmt.Errorf("baseline %s exited before listening (%v): %s", design, err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("baseline %s not listening on %s after 30s: %s", design, addr, tail(logPath))
		}
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after WaitDelay).
// Its exit status is of no interest: the log has the details.
func (p *proc) stop() {
	p.cancel()
	<-p.done
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// residentMemory reads a process's resident set and its peak, "" when the
// pid is unset or unreadable.
func residentMemory(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	var rss, hwm string
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "VmRSS":
			rss = kibToMiB(v)
		case "VmHWM":
			hwm = kibToMiB(v)
		}
	}
	if rss == "" {
		return ""
	}
	return "RSS " + rss + " (peak " + hwm + ")"
}

func kibToMiB(v string) string {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/1024)
}
