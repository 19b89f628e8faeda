package queue

import (
	"fmt"
	"testing"
	"time"

	"flashsale/tools/testenv"
)

// BenchmarkAdvanceOverAbandoned times one admission round that finds
// places abandoned: the round's script holds the sale's Redis node for
// its whole walk, every reserve on that node waiting behind it.
func BenchmarkAdvanceOverAbandoned(b *testing.B) {
	const places = 20000
	for range b.N {
		b.StopTimer()
		q, sale := newQueue(b, time.Millisecond)
		ctx := testenv.Context(b)
		open := time.Now().Add(-time.Second)
		for i := range places {
			if _, err := q.Join(ctx, sale, open, false, fmt.Sprintf("u%d", i)); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
		b.StartTimer()
		start := time.Now()
		admitted, _, err := q.Advance(ctx, sale, open, 1000, false)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(took.Microseconds()), "µs/round")
		b.ReportMetric(float64(admitted), "places/round")
	}
}
