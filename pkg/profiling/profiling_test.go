package profiling

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
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
	if _, err := Start(Config{CPUProfile: filepath.Join(t.TempDir(), "missing", "cpu.pprof")}); err == nil {
		t.Fatal("no error for a path in a missing directory")
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
