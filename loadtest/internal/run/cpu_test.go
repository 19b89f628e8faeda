package run

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// procCPU reads this very process: it grows while the test burns CPU.
func TestProcCPUGrowsWithWork(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	before, ok := procCPU(self)
	if !ok {
		t.Fatal("procCPU of this process: not readable")
	}
	var x uint64
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		for i := range 1_000_000 {
			x += uint64(i) * 2654435761
		}
	}
	after, _ := procCPU(self)
	if after <= before {
		t.Errorf("CPU time %v after busy work, %v before (sink %d)", after, before, x)
	}
}

func TestCPUSince(t *testing.T) {
	before := cpuSample{
		10: {"gateway", 3 * time.Second},
		11: {"kafka", time.Second},
		12: {"ordersvc", 9 * time.Second}, // a previous run's, gone by the second sample
	}
	after := cpuSample{
		10: {"gateway", 5 * time.Second},
		11: {"kafka", 4 * time.Second},
		13: {"redis", time.Second}, // started in between
		14: {"gateway", 500 * time.Millisecond},
	}
	got := after.since(before)
	want := map[string]time.Duration{"gateway": 2500 * time.Millisecond, "kafka": 3 * time.Second, "redis": time.Second}
	if len(got) != len(want) {
		t.Errorf("since = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("since[%s] = %v, want %v", k, got[k], v)
		}
	}
}
