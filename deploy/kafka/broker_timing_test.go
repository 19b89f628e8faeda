package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduce measures what -sync-writes costs a producer configured
// like the gateway (acks=all, idempotent) against the broker in-process:
// "batched" sends 10,000 small records asynchronously and waits for every
// ack (one op = 10,000 records); "one-by-one" waits for each ack before the
// next send, the worst case for per-batch fsync (one op = one record).
//
//	go test -run '^$' -bench Produce -benchtime 5x ./deploy/kafka
func BenchmarkProduce(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync-writes=%v/batched-10000", sync), func(b *testing.B) {
			cl := benchClient(b, sync)
			value := make([]byte, 100)
			b.ResetTimer()
			for b.Loop() {
				produceN(b, cl, 10000, value)
			}
		})
		b.Run(fmt.Sprintf("sync-writes=%v/one-by-one", sync), func(b *testing.B) {
			cl := benchClient(b, sync)
			rec := &kgo.Record{Topic: ordersTopic, Key: []byte("item-1"), Value: make([]byte, 100)}
			b.ResetTimer()
			for b.Loop() {
				if err := cl.ProduceSync(b.Context(), rec).FirstErr(); err != nil {
					b.Fatalf("produce: %v", err)
				}
			}
		})
	}
}

func benchClient(b *testing.B, syncWrites bool) *kgo.Client {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	args := []string{"-addr-port", "0", "-data-dir", b.TempDir(), fmt.Sprintf("-sync-writes=%v", syncWrites)}
	addr, _ := startBrokerArgs(ctx, b, args)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatalf("new client: %v", err)
	}
	b.Cleanup(func() { cl.Close(); cancel() })
	return cl
}

func produceN(b *testing.B, cl *kgo.Client, n int, value []byte) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	wg.Add(n)
	for i := range n {
		key := fmt.Appendf(nil, "item-%d", i%64)
		cl.Produce(b.Context(), &kgo.Record{Topic: ordersTopic, Key: key, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatalf("produce: %v", first)
	}
}
