package ratelimit

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAllowPerKey(t *testing.T) {
	l := New(Rule{Rate: 1, Burst: 3}, 1000)
	for i := range 3 {
		if ok, _ := l.Allow([]byte("alice")); !ok {
			t.Fatalf("request %d within burst refused", i)
		}
	}
	ok, retry := l.Allow([]byte("alice"))
	if ok || retry != time.Second {
		t.Fatalf("4th request: ok=%v retry=%v, want refused with 1s", ok, retry)
	}
	if ok, _ := l.Allow([]byte("bob")); !ok {
		t.Fatal("another key shares alice's bucket")
	}
}

// Under contention the bucket lets through exactly the burst.
func TestAllowExactUnderContention(t *testing.T) {
	l := New(Rule{Rate: 0.001, Burst: 50}, 1000)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := l.Allow([]byte("hot")); ok {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 50 {
		t.Fatalf("%d allowed, want exactly the burst of 50", got)
	}
}

func TestRuleChangesLive(t *testing.T) {
	l := New(Rule{Rate: 0.001, Burst: 1}, 1000)
	l.Allow([]byte("k"))
	if ok, _ := l.Allow([]byte("k")); ok {
		t.Fatal("second request allowed with burst 1")
	}
	l.SetRule(Rule{}) // disabled
	if ok, _ := l.Allow([]byte("k")); !ok {
		t.Fatal("disabled rule still refuses")
	}
	l.SetRule(Rule{Rate: 1000, Burst: 5})
	l.Allow([]byte("k")) // the bucket picks the new rule up here
	time.Sleep(5 * time.Millisecond)
	if ok, _ := l.Allow([]byte("k")); !ok {
		t.Fatal("raised rule not applied to an existing bucket")
	}
}

func TestMemoryStaysBounded(t *testing.T) {
	l := New(Rule{Rate: 1000, Burst: 1}, 64*100)
	for i := range 500_000 {
		l.Allow([]byte(fmt.Sprintf("user-%d", i)))
	}
	if n := l.Len(); n > 64*100 {
		t.Fatalf("%d buckets held, bound is %d", n, 64*100)
	}
	time.Sleep(5 * time.Millisecond) // every bucket refills (1 token at 1000/s)
	l.Sweep(time.Millisecond)
	if n := l.Len(); n != 0 {
		t.Fatalf("%d buckets after sweeping idle ones, want 0", n)
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New(Rule{Rate: 1e9, Burst: 1 << 30}, 1<<20)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user-%d", i))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Allow(keys[i%len(keys)])
			i++
		}
	})
}

// BenchmarkMemory500kShoppers measures the heap the per-user and per-IP
// buckets of 500,000 distinct shoppers hold (the crowd of one flash sale).
func BenchmarkMemory500kShoppers(b *testing.B) {
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		users := New(Rule{Rate: 1, Burst: 3}, 1_000_000)
		ips := New(Rule{Rate: 50, Burst: 100}, 1_000_000)
		key := make([]byte, 0, 32)
		for i := range 500_000 {
			key = fmt.Appendf(key[:0], "shopper-%d", i)
			users.Allow(key)
			ip := [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}
			ips.Allow(ip[:])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		b.ReportMetric(float64(users.Len()+ips.Len()), "buckets")
		runtime.KeepAlive(users)
		runtime.KeepAlive(ips)
	}
}
