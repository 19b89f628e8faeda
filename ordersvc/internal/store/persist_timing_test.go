package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/tools/testenv"
)

// benchBatch is the consumer's default batch size.
const benchBatch = 500

var benchUser atomic.Int64

// hotEvents makes n events for distinct users on one item: a flash sale's
// hot row, the case the batch design exists for. Their order ids are
// version 7, time-ordered, as the gateway's are: each goes to the right
// end of the primary key's index, where random ones cost a descent each.
func hotEvents(s store.Sale, n int) []event.OrderPlaced {
	evs := make([]event.OrderPlaced, n)
	now := time.Now()
	for i := range evs {
		evs[i] = event.OrderPlaced{Version: 1, OrderID: uuid.Must(uuid.NewV7()), SaleID: s.ID, ItemID: s.Items[0].ID,
			UserID: fmt.Sprintf("bench-%d", benchUser.Add(1)), PlacedAt: now}
	}
	return evs
}

func benchSale(b *testing.B) (*store.Store, store.Sale) {
	st := store.New(testdb.Pool(b))
	return st, testdb.Sale(b, st, 1<<31-1)
}

// BenchmarkPersistBatch writes 500 orders per transaction, updating the hot
// item row once per batch.
func BenchmarkPersistBatch(b *testing.B) {
	st, s := benchSale(b)
	ctx := testenv.Context(b)
	orders := 0
	for b.Loop() {
		b.StopTimer()
		evs := hotEvents(s, benchBatch)
		b.StartTimer()
		if _, err := st.PersistBatch(ctx, evs); err != nil {
			b.Fatal(err)
		}
		orders += len(evs)
	}
	b.ReportMetric(float64(orders)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkPersistOneTxPerMessage is the baseline: the same 500 orders,
// one transaction (and one hot-row UPDATE) per message.
func BenchmarkPersistOneTxPerMessage(b *testing.B) {
	st, s := benchSale(b)
	ctx := testenv.Context(b)
	orders := 0
	for b.Loop() {
		b.StopTimer()
		evs := hotEvents(s, benchBatch)
		b.StartTimer()
		for i := range evs {
			if _, err := st.PersistBatch(ctx, evs[i:i+1]); err != nil {
				b.Fatal(err)
			}
		}
		orders += len(evs)
	}
	b.ReportMetric(float64(orders)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkPersistOneTxPerMessageParallel is the baseline with 8 writers
// contending for the hot row, as a group of per-message consumers would.
func BenchmarkPersistOneTxPerMessageParallel(b *testing.B) {
	st, s := benchSale(b)
	ctx := testenv.Context(b)
	var orders atomic.Int64
	b.SetParallelism(4) // x GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.PersistBatch(ctx, hotEvents(s, 1)); err != nil {
				b.Error(err)
				return
			}
			orders.Add(1)
		}
	})
	b.ReportMetric(float64(orders.Load())/b.Elapsed().Seconds(), "orders/s")
}
