package harness

import (
	"syscall"
	"time"
)

// Terminate stops one service gracefully (SIGTERM, as an orchestrator
// does), waits up to timeout for it to exit and returns its exit code and
// how long it took; a service still running then is killed and reported as
// -1. Restart starts it again.
func (s *Stack) Terminate(name string, timeout time.Duration) (int, time.Duration) {
	s.t.Helper()
	p, ok := s.procs[name]
	if !ok {
		s.t.Fatalf("no process %s", name)
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), time.Since(start)
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, time.Since(start)
	}
}
