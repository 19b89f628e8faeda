package stock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// BenchmarkReserveCluster is the reserve throughput of one hot item on the
// local Redis Cluster with its stock in 1 shard (one master does every
// script) or 3 (each master does a third). Every reservation is a distinct
// shopper; the stock is large enough that nothing sells out. Besides the
// rate, which on a small machine the benchmark's own CPU bounds, it reports
// the CPU the busiest master spent per reservation: that is what caps one
// hot item on a real cluster, and what sharding divides.
//
//	make up CLUSTER=1
//	cd pkg && go test -run '^$' -bench ReserveCluster -benchtime 200000x ./stock
func BenchmarkReserveCluster(b *testing.B) {
	c := testenv.RedisClient(b, testenv.RequireCluster(b))
	for _, shards := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			newStore, sale := shardedSale(b, c, shards)
			st := newStore()
			ctx := context.Background()
			if err := st.Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: int64(b.N) * 4}}, nil); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.SetParallelism(64)
			before := masterCPU(b, c)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := strconv.FormatInt(seq.Add(1), 10)
					if _, err := st.Reserve(ctx, sale, 1, "u"+u, "o"+u); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			after := masterCPU(b, c)
			var busiest float64
			for addr, cpu := range after {
				busiest = max(busiest, cpu-before[addr])
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reserves/s")
			b.ReportMetric(busiest*1e6/float64(b.N), "busiest-master-cpu-µs/op")
		})
	}
}

// masterCPU reads used_cpu_sys + used_cpu_user (seconds) of every master.
func masterCPU(b *testing.B, c rueidis.Client) map[string]float64 {
	out := map[string]float64{}
	ctx := context.Background()
	for addr, n := range c.Nodes() {
		info, err := n.Do(ctx, n.B().Info().Section("replication").Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(info, "role:master") {
			continue
		}
		var cpu float64
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f
			}
		}
		out[addr] = cpu
	}
	return out
}

// BenchmarkSoldOutTail measures the false SOLD_OUT tail of sharded stock:
// as many shoppers as units rush a 3-shard item from 3 stores (3
// gateways); the units still left when the first shopper was told sold out
// are the tail. Reported per run, so -count gives its spread.
//
//	cd pkg && go test -run '^$' -bench SoldOutTail -benchtime 20x ./stock
func BenchmarkSoldOutTail(b *testing.B) {
	for _, topo := range []string{"node", "cluster"} {
		b.Run(topo, func(b *testing.B) {
			addr := testenv.RedisAddr()
			if topo == "cluster" {
				addr = testenv.RequireCluster(b)
			}
			c := testenv.RedisClient(b, addr)
			var worst, falseSoldOut int64
			for range b.N {
				newStore, sale := shardedSale(b, c, 3)
				gateways := []*stock.Store{newStore(), newStore(), newStore()}
				ctx := context.Background()
				const units = 3000
				if err := gateways[0].Load(ctx, sale, []stock.ItemStock{{ItemID: 1, Left: units}}, nil); err != nil {
					b.Fatal(err)
				}
				var first atomic.Bool
				var leftAtFirst atomic.Int64
				done := make(chan int64, units)
				for u := range units {
					go func() {
						st := gateways[u%3]
						_, err := st.Reserve(ctx, sale, 1, fmt.Sprintf("t%d", u), fmt.Sprintf("o%d", u))
						if err == stock.ErrSoldOut && first.CompareAndSwap(false, true) {
							n, _ := st.Left(ctx, sale, 1)
							leftAtFirst.Store(n)
						}
						if err == stock.ErrSoldOut {
							done <- 1
							return
						}
						done <- 0
					}()
				}
				var refused int64
				for range units {
					refused += <-done
				}
				falseSoldOut += refused
				worst = max(worst, leftAtFirst.Load())
			}
			b.ReportMetric(float64(falseSoldOut)/float64(b.N), "false-soldout/run")
			b.ReportMetric(float64(worst), "max-left-at-first-soldout")
		})
	}
}
