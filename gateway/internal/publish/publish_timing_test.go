package publish

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"flashsale/tools/proccpu"
	"flashsale/tools/testenv"
)

// BenchmarkPublishLinger publishes from 256 goroutines at once, as the
// gateway's purchases do in a sale, each waiting for its acknowledgement,
// with several linger.ms settings, and reports what one acknowledged
// message cost: the broker's CPU (read from /proc: the local stack's
// Kafka JVM) and this process's, librdkafka's threads included. Alternate
// the settings with -count and compare within a run; absolutes move with
// the machine.
//
//	go test -run - -bench PublishLinger -count 4 ./internal/publish/
func BenchmarkPublishLinger(b *testing.B) {
	testenv.Require(b, testenv.KafkaBrokers())
	root := proccpu.Root()
	for _, linger := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("linger=%v", linger), func(b *testing.B) {
			p, err := New(Config{Brokers: testenv.KafkaBrokers(), Topic: fmt.Sprintf("bench-publish-%d", time.Now().UnixNano()),
				Timeout: 10 * time.Second, Linger: linger})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(5 * time.Second)
			value := []byte(`{"version":1,"orderId":"0193a7a0-0000-7000-8000-000000000000","saleId":1,"itemId":1,"userId":"shopper-000001","placedAt":"2026-12-03T17:00:00Z"}`)
			if err := p.Publish(1, value); err != nil { // the topic, the connection, the producer id
				b.Fatal(err)
			}
			broker0, self0 := proccpu.Sample(root), selfCPU(b)
			b.SetParallelism(128) // × GOMAXPROCS (2 here): 256 publishes in flight
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.Publish(1, value); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			broker := proccpu.Sample(root).Since(broker0)["kafka"]
			self := selfCPU(b) - self0
			b.ReportMetric(float64(broker.Microseconds())/float64(b.N), "broker-µs/msg")
			b.ReportMetric(float64(self.Microseconds())/float64(b.N), "producer-µs/msg")
		})
	}
}

// selfCPU is this process's CPU time so far, every thread included.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
