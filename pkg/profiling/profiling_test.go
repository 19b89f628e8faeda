package profiling

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWritesAReadableProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := Start(Config{CPUProfile: path})
	if err != nil {
		t.Fatal(err)
	}
	// Some work, so the profile is not only a header.
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	_ = x
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertPprof(t, path)
}

// TestStartWritesAnAllocationProfile: the allocations made while the
// profile runs are in it, by the function that made them.
func TestStartWritesAnAllocationProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allocs.pprof")
	stop, err := Start(Config{AllocProfile: path})
	if err != nil {
		t.Fatal(err)
	}
	allocateSome()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertPprof(t, path)
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=alloc_space", "-top", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "allocateSome") {
		t.Fatalf("the allocating function is not in the profile:\n%s", out)
	}
}

var sink [][]byte

//go:noinline
func allocateSome() {
	for range 64 {
		sink = append(sink, make([]byte, 1<<20)) // 64 MiB: sampled whatever the rate
	}
	sink = nil
}

func assertPprof(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	if len(b) < 64 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("not a pprof profile: %d bytes, starting % x", len(b), b[:min(len(b), 4)])
	}
}

func TestStartWithoutAPathDoesNothing(t *testing.T) {
	stop, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartReportsAnUnwritablePath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing", "x.pprof")
	if _, err := Start(Config{CPUProfile: missing}); err == nil {
		t.Fatal("no error for a CPU profile in a missing directory")
	}
	if _, err := Start(Config{AllocProfile: missing}); err == nil {
		t.Fatal("no error for an allocation profile in a missing directory")
	}
	// A CPU profile refused after the allocation file was created leaves
	// no profile running: a second Start can profile.
	ok := filepath.Join(t.TempDir(), "allocs.pprof")
	if _, err := Start(Config{AllocProfile: ok, CPUProfile: missing}); err == nil {
		t.Fatal("no error for a CPU profile in a missing directory")
	}
	stop, err := Start(Config{CPUProfile: filepath.Join(t.TempDir(), "cpu.pprof")})
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartLoggedLogsAProfileItCouldNotWrite(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	stop, err := StartLogged(Config{CPUProfile: filepath.Join(dir, "cpu.pprof")}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if logs.Len() != 0 {
		t.Fatalf("a written profile logged %q", logs.String())
	}
	if _, err := StartLogged(Config{CPUProfile: filepath.Join(dir, "missing", "cpu.pprof")}, slog.New(slog.NewTextHandler(&logs, nil))); err == nil {
		t.Fatal("no error for a path in a missing directory")
	}
}
