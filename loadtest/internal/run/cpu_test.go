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

func TestCPUSampleSub(t *testing.T) {
	a := cpuSample{"gateway": 3 * time.Second, "kafka": time.Second}
	b := cpuSample{"gateway": 5 * time.Second, "kafka": 4 * time.Second, "redis": time.Second}
	got := b.sub(a)
	want := cpuSample{"gateway": 2 * time.Second, "kafka": 3 * time.Second, "redis": time.Second}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sub[%s] = %v, want %v", k, got[k], v)
		}
	}
}
