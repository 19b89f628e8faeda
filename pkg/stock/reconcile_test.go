package stock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

func TestReconcile(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the sale's keys.
		setup func(t *testing.T, st *stock.Store, sale int64)
		write *stock.Copy
		// during runs inside the first decide call, between read and write.
		during      func(t *testing.T, st *stock.Store, sale int64)
		wantSnap    stock.Snapshot // what the last decide saw
		wantDecides int
		wantLeft    map[int64]int64 // after; absent: key missing
		wantHolders map[string]string
	}{
		{
			name: "reads stock and holders, writes nothing",
			setup: func(t *testing.T, st *stock.Store, sale int64) {
				load(t, st, sale, 3, 5, stock.Holder{UserID: "u1", OrderID: "o1"})
			},
			wantSnap:    stock.Snapshot{Left: map[int64]int64{1: 3, 2: 5}, Holders: map[string]string{"u1": "o1"}},
			wantDecides: 1,
			wantLeft:    map[int64]int64{1: 3, 2: 5},
			wantHolders: map[string]string{"u1": "o1"},
		},
		{
			name:        "missing keys read as absent, not zero",
			setup:       func(*testing.T, *stock.Store, int64) {},
			wantSnap:    stock.Snapshot{Left: map[int64]int64{}, Holders: map[string]string{}},
			wantDecides: 1,
			wantLeft:    map[int64]int64{},
			wantHolders: map[string]string{},
		},
		{
			name: "rewrites stock and holders",
			setup: func(t *testing.T, st *stock.Store, sale int64) {
				load(t, st, sale, 3, 5, stock.Holder{UserID: "u1", OrderID: "o1"}, stock.Holder{UserID: "leak", OrderID: "o9"})
			},
			write: &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 4}, {ItemID: 2, Left: 5}},
				Holders: []stock.Holder{{UserID: "u1", OrderID: "o1"}}},
			wantSnap:    stock.Snapshot{Left: map[int64]int64{1: 3, 2: 5}, Holders: map[string]string{"u1": "o1", "leak": "o9"}},
			wantDecides: 1,
			wantLeft:    map[int64]int64{1: 4, 2: 5},
			wantHolders: map[string]string{"u1": "o1"},
		},
		{
			// The guard: a purchase between the read and the write is not
			// overwritten; the round starts again and sees it.
			name: "a reservation during decide restarts the round",
			setup: func(t *testing.T, st *stock.Store, sale int64) {
				load(t, st, sale, 3, 5)
			},
			during: func(t *testing.T, st *stock.Store, sale int64) {
				if _, err := st.Reserve(testenv.Context(t), sale, 1, "late", "o-late"); err != nil {
					t.Fatal(err)
				}
			},
			write:       &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 3}, {ItemID: 2, Left: 5}}},
			wantSnap:    stock.Snapshot{Left: map[int64]int64{1: 2, 2: 5}, Holders: map[string]string{"late": "o-late"}},
			wantDecides: 2,
			wantLeft:    map[int64]int64{1: 3, 2: 5}, // what decide chose, knowing of the reservation
			wantHolders: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st, sale := newSale(t)
			ctx := testenv.Context(t)
			tt.setup(t, st, sale)
			decides := 0
			snap, err := st.Reconcile(ctx, sale, []int64{1, 2}, func(_ context.Context, s stock.Snapshot) (*stock.Copy, error) {
				decides++
				if decides == 1 && tt.during != nil {
					tt.during(t, st, sale)
				}
				return tt.write, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantSnap, snap); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
			if decides != tt.wantDecides {
				t.Errorf("decide calls: got %d, want %d", decides, tt.wantDecides)
			}
			left := map[int64]int64{}
			for _, item := range []int64{1, 2} {
				n, err := st.Left(ctx, sale, item)
				if errors.Is(err, stock.ErrNotLoaded) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				left[item] = n
			}
			if diff := cmp.Diff(tt.wantLeft, left); diff != "" {
				t.Errorf("stock after (-want +got):\n%s", diff)
			}
			holders, err := st.Holders(ctx, sale)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantHolders, holders); diff != "" {
				t.Errorf("holders after (-want +got):\n%s", diff)
			}
		})
	}
}

// A repair of a Redis that lost the sale (a restart) writes the load's
// epoch too: HeldBy reads a missing epoch as "not loaded", and sent every
// "my order" question of the rest of the sale to PostgreSQL.
func TestRepairMarksTheSaleLoaded(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	if _, _, loaded, err := st.HeldBy(ctx, sale, "nobody"); err != nil || loaded {
		t.Fatalf("before: loaded %v, %v; want not loaded", loaded, err)
	}
	if _, err := st.Reconcile(ctx, sale, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) {
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 4}}, Holders: []stock.Holder{{UserID: "u1", OrderID: "o1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, loaded, err := st.HeldBy(ctx, sale, "nobody"); err != nil || ok || !loaded {
		t.Errorf("after the repair, a shopper without a unit: held %v, loaded %v, %v; want not held, loaded", ok, loaded, err)
	}
}

// Keys that change on every round give ErrBusy and nothing is written.
func TestReconcileBusy(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	load(t, st, sale, 1000, 0)
	n := 0
	_, err := st.Reconcile(ctx, sale, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) {
		n++
		if _, err := st.Reserve(ctx, sale, 1, fmt.Sprintf("u%d", n), fmt.Sprintf("o%d", n)); err != nil {
			t.Fatal(err)
		}
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 1000}}}, nil
	})
	if !errors.Is(err, stock.ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
	if left, _ := st.Left(ctx, sale, 1); left != int64(1000-n) {
		t.Errorf("stock: got %d, want %d (every reservation kept, nothing overwritten)", left, 1000-n)
	}
}

// A decide error is returned and nothing is written.
func TestReconcileDecideError(t *testing.T) {
	_, st, sale := newSale(t)
	ctx := testenv.Context(t)
	load(t, st, sale, 3, 0)
	boom := errors.New("boom")
	_, err := st.Reconcile(ctx, sale, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if left, _ := st.Left(ctx, sale, 1); left != 3 {
		t.Errorf("stock: got %d, want 3", left)
	}
}

// load sets item 1 and (when left2 > 0) item 2 of the sale.
func load(t *testing.T, st *stock.Store, sale int64, left1, left2 int64, holders ...stock.Holder) {
	t.Helper()
	items := []stock.ItemStock{{ItemID: 1, Left: left1}}
	if left2 > 0 {
		items = append(items, stock.ItemStock{ItemID: 2, Left: left2})
	}
	if err := st.Load(testenv.Context(t), sale, items, holders); err != nil {
		t.Fatal(err)
	}
}

// A repair whose deadline runs out before its write leaves no WATCH
// behind on the pooled connection: otherwise the next repair on it, of
// another sale, has its EXEC refused by a change to the first sale's keys
// and spends a second round (a second decision, which reads PostgreSQL).
func TestReconcileLeavesNoWatchBehind(t *testing.T) {
	_, st, saleA := newSale(t)
	_, _, saleB := newSale(t)
	ctx := testenv.Context(t)
	load(t, st, saleA, 3, 0)
	load(t, st, saleB, 3, 0)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := st.Reconcile(short, saleA, []int64{1}, func(c context.Context, _ stock.Snapshot) (*stock.Copy, error) {
		<-c.Done() // the decision outlives the repair's deadline
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 3}}}, nil
	})
	cancel()
	if err == nil {
		t.Fatal("a repair past its deadline: no error")
	}
	if _, err := st.Reserve(ctx, saleA, 1, "u1", "o1"); err != nil { // sale A's stock key changes
		t.Fatal(err)
	}
	decides := 0
	if _, err := st.Reconcile(ctx, saleB, []int64{1}, func(context.Context, stock.Snapshot) (*stock.Copy, error) {
		decides++
		return &stock.Copy{Items: []stock.ItemStock{{ItemID: 1, Left: 2}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if decides != 1 {
		t.Errorf("the next repair decided %d times, want 1 (a WATCH of sale %d's keys was left on the connection)", decides, saleA)
	}
	if left, _ := st.Left(ctx, saleB, 1); left != 2 {
		t.Errorf("sale %d's stock %d after its repair, want 2", saleB, left)
	}
}
