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

// The report's CPU figures: milliseconds by component, and per unit sold
// the stack's (the load generator excluded) and the gateways'.
func TestSellingCPU(t *testing.T) {
	tests := []struct {
		name                    string
		cpu                     map[string]time.Duration
		units                   int
		wantMs                  map[string]float64
		wantStackUs, wantGateUs float64
	}{
		{
			name:        "the load generator counts in the table, not per order",
			cpu:         map[string]time.Duration{"gateway": 300 * time.Millisecond, "redis": 100 * time.Millisecond, "loadtest": 2 * time.Second},
			units:       100,
			wantMs:      map[string]float64{"gateway": 300, "redis": 100, "loadtest": 2000},
			wantStackUs: 4000, wantGateUs: 3000,
		},
		{
			// a stack without gateway process found reads 0 for it
			name:        "no gateway sampled",
			cpu:         map[string]time.Duration{"ordersvc": 1500 * time.Microsecond},
			units:       3,
			wantMs:      map[string]float64{"ordersvc": 1.5},
			wantStackUs: 500, wantGateUs: 0,
		},
		{
			name:   "nothing sampled",
			cpu:    map[string]time.Duration{},
			units:  10,
			wantMs: map[string]float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, stackUs, gateUs := sellingCPU(tt.cpu, tt.units)
			if len(ms) != len(tt.wantMs) {
				t.Errorf("ms = %v, want %v", ms, tt.wantMs)
			}
			for k, v := range tt.wantMs {
				if ms[k] != v {
					t.Errorf("ms[%s] = %v, want %v", k, ms[k], v)
				}
			}
			if stackUs != tt.wantStackUs || gateUs != tt.wantGateUs {
				t.Errorf("per order: stack %v µs, gateway %v µs; want %v, %v", stackUs, gateUs, tt.wantStackUs, tt.wantGateUs)
			}
		})
	}
}
