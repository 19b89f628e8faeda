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

// dumpAndKill ends a process that would not stop: SIGQUIT first, so the Go
// runtime writes every goroutine's stack to its log (it does for SIGQUIT
// whatever GOTRACEBACK says), with SIGCONT in case a test stopped it, then
// SIGKILL if that did not end it within 5 s.
func (s *Stack) dumpAndKill(p *proc) {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
