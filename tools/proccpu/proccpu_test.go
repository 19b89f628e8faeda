package proccpu

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The sampler counts only processes working inside the checkout, so a
// second checkout's stack on the same machine does not enter the figures.
func TestSampleCPUScopesToTheCheckout(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := Root()
	if root == "" || !inside(root, self) {
		t.Fatalf("Root() = %q: the test runs inside the checkout (%s), so it must be found and hold this process", root, wd)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "stack.env")); err != nil {
		t.Fatalf("Root() = %q holds no deploy/stack.env: %v", root, err)
	}
	if inside(root+"-elsewhere", self) {
		t.Fatalf("a directory that only shares the checkout's prefix (%s-elsewhere) counted this process", root)
	}
	if !inside("", self) {
		t.Fatal(`root "" must count every process`)
	}
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		name string
		stat string
		want time.Duration
		ok   bool
	}{
		// utime 150 and stime 50 ticks of 10 ms.
		{"plain", "4242 (gateway) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 12 0", 2 * time.Second, true},
		// A command name with spaces and a parenthesis does not shift the fields.
		{"odd name", "7 (a) b (c) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", 70 * time.Millisecond, true},
		{"truncated", "7 (x) S 1 7", 0, false},
		{"garbage", "nothing here", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseStat(c.stat)
			if got != c.want || ok != c.ok {
				t.Errorf("parseStat = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// The stack's CPU leaves the load generator out, whatever else is there.
func TestStackLeavesTheGeneratorOut(t *testing.T) {
	cpu := map[string]time.Duration{"gateway": time.Second, "kafka": 500 * time.Millisecond, "loadtest": 700 * time.Millisecond}
	if got := Stack(cpu); got != 1500*time.Millisecond {
		t.Fatalf("Stack = %v, want 1.5s", got)
	}
}
