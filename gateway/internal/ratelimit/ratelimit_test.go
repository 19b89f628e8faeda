package ratelimit

import (
	"fmt"
	"math"
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

// Changes at once (an operator's PUT and a SIGHUP reload) each get a
// version of their own, and a call that loaded the rule before a change
// does not put the older rule back on a bucket that has the newer one.
func TestRuleChangesAreOrdered(t *testing.T) {
	l := New(Rule{Rate: 1, Burst: 1}, 1000)
	var wg sync.WaitGroup
	const writers, each = 4, 20000
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.SetRule(Rule{Rate: float64(w*each + i + 1), Burst: 1})
			}
		})
	}
	wg.Wait()
	if got, want := l.rule.Load().version, uint64(1+writers*each); got != want {
		t.Errorf("version %d after %d changes from version 1, want %d: changes shared a version", got, writers*each, want)
	}

	l = New(Rule{Rate: 1, Burst: 1}, 1000)
	l.Allow([]byte("k"))
	stale := l.rule.Load()
	l.SetRule(Rule{Rate: 100, Burst: 7})
	l.Allow([]byte("k"))
	b := l.bucket([]byte("k"), stale) // a call that loaded the rule before the change
	if b.lim.Burst() != 7 || b.lim.Limit() != 100 {
		t.Errorf("bucket after a stale call: rate %v burst %d, want the newer rule's 100 and 7", b.lim.Limit(), b.lim.Burst())
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

// A full table makes room for a new key from buckets that refilled, and
// tracks it; full of busy buckets, it lets the new key through untracked
// and counts it.
func TestFullTableEvictsRefilledBuckets(t *testing.T) {
	// 10/s: a bucket refills 100 ms after its token went, so the fill
	// below overflows even on a machine busy enough to take a few
	// milliseconds over it (at 1000/s, one CI run's buckets refilled
	// while the table was still filling, and nothing overflowed).
	l := New(Rule{Rate: 10, Burst: 1}, 64*50)
	for i := range 64 * 200 {
		l.Allow(fmt.Appendf(nil, "busy-%d", i))
	}
	if l.Overflows() == 0 {
		t.Fatalf("no overflow filling %d keys into room for %d", 64*200, l.MaxKeys())
	}
	time.Sleep(150 * time.Millisecond) // every bucket refills (1 token at 10/s)
	before := l.Overflows()
	for i := range 64 * 10 {
		key := fmt.Appendf(nil, "new-%d", i)
		if ok, _ := l.Allow(key); !ok {
			t.Fatalf("%s refused on its first request", key)
		}
		if ok, _ := l.Allow(key); ok {
			t.Fatalf("%s allowed twice within its burst of 1: not tracked", key)
		}
	}
	if n := l.Overflows() - before; n != 0 {
		t.Errorf("%d new keys untracked while the table held only refilled buckets", n)
	}

	slow := New(Rule{Rate: MinRate, Burst: 1}, 64)
	for i := range 64 * 20 {
		slow.Allow(fmt.Appendf(nil, "busy-%d", i)) // none refills for ~17 minutes
	}
	if slow.Len() > slow.MaxKeys() || slow.Overflows() == 0 {
		t.Errorf("a table of busy buckets: %d held (room for %d), %d overflows; want it bounded and the rest counted",
			slow.Len(), slow.MaxKeys(), slow.Overflows())
	}
	if ok, _ := slow.Allow([]byte("newcomer")); !ok {
		t.Error("a new key refused when the table is full: want it through, untracked")
	}
}

// BenchmarkAllowFullTable is a crowd of new keys against a table full of
// busy buckets (a flood of fresh addresses or accounts while the sale's
// shoppers hold every bucket): each new key looks for room, finds none
// and goes through untracked. The default table (1,000,000 keys).
func BenchmarkAllowFullTable(b *testing.B) {
	l := New(Rule{Rate: MinRate, Burst: 1}, 1_000_000)
	key := make([]byte, 0, 32)
	for i := range l.MaxKeys() {
		key = fmt.Appendf(key[:0], "shopper-%d", i)
		l.Allow(key)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		key = fmt.Appendf(key[:0], "flood-%d", i)
		l.Allow(key)
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

// A rule either limits within the bucket's working range or is off; NaN,
// Inf, a rate whose wait for a token overflows a Duration, and a burst that
// never refills are refused.
func TestRuleValidate(t *testing.T) {
	tests := []struct {
		r  Rule
		ok bool
	}{
		{Rule{}, true},
		{Rule{Rate: 0, Burst: 5}, true},
		{Rule{Rate: 1, Burst: 3}, true},
		{Rule{Rate: MinRate, Burst: 1}, true},
		{Rule{Rate: MaxRate, Burst: MaxBurst}, true},
		{Rule{Rate: 1, Burst: 0}, false},
		{Rule{Rate: -1, Burst: 3}, false},
		{Rule{Rate: 1e-11, Burst: 1}, false},
		{Rule{Rate: math.NaN(), Burst: 3}, false},
		{Rule{Rate: math.Inf(1), Burst: 3}, false},
		{Rule{Rate: 2 * MaxRate, Burst: 3}, false},
		{Rule{Rate: 1, Burst: MaxBurst + 1}, false},
		// Off, but every answer that shows it would break the schema.
		{Rule{Rate: 0, Burst: 74336455788743}, false},
		{Rule{Rate: 0, Burst: -1}, false},
		{Rule{Rate: 0, Burst: MaxBurst}, true},
	}
	for _, tt := range tests {
		if err := tt.r.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tt.r, err, tt.ok)
		}
	}
}
