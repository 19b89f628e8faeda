package sale

import (
	"testing"
	"time"
)

// The memo of holders with a row answers per sale and forgets the sales
// that are no longer open.
func TestPersistedMemo(t *testing.T) {
	var p persisted
	if p.has(1, "a") {
		t.Fatal("empty memo knows an order")
	}
	p.add(1, []string{"a", "b"})
	p.add(2, []string{"c"})
	p.add(3, nil)
	for _, c := range []struct {
		sale  int64
		order string
		want  bool
	}{{1, "a", true}, {1, "b", true}, {1, "c", false}, {2, "c", true}, {2, "a", false}, {3, "a", false}} {
		if got := p.has(c.sale, c.order); got != c.want {
			t.Errorf("has(%d, %q) = %v, want %v", c.sale, c.order, got, c.want)
		}
	}
	p.keep([]int64{2, 4})
	if p.has(1, "a") || !p.has(2, "c") {
		t.Fatalf("after keep(2, 4): sale 1 still known %v, sale 2 forgotten %v", p.has(1, "a"), !p.has(2, "c"))
	}
}

// hasAll holds only when every holder's order is known to have a row.
func TestPersistedHasAll(t *testing.T) {
	var p persisted
	if !p.hasAll(1, nil) {
		t.Error("no holders: all explained")
	}
	p.add(1, []string{"a", "b"})
	if !p.hasAll(1, map[string]string{"u1": "a", "u2": "b"}) {
		t.Error("every holder known: want true")
	}
	if p.hasAll(1, map[string]string{"u1": "a", "u3": "c"}) || p.hasAll(2, map[string]string{"u1": "a"}) {
		t.Error("a holder not known: want false")
	}
}

// A sale found settled is within the window of that look, and forgotten
// when it changed or is no longer open.
func TestSettledMemo(t *testing.T) {
	var s settled
	t0 := time.Unix(1000, 0)
	const window = 30 * time.Second
	if s.within(1, t0, window) {
		t.Fatal("an unknown sale is settled")
	}
	s.mark(1, t0)
	s.mark(2, t0)
	for _, c := range []struct {
		sale int64
		at   time.Duration
		want bool
	}{{1, 0, true}, {1, window - time.Millisecond, true}, {1, window, false}, {2, time.Second, true}, {3, 0, false}} {
		if got := s.within(c.sale, t0.Add(c.at), window); got != c.want {
			t.Errorf("within(sale %d, +%v) = %v, want %v", c.sale, c.at, got, c.want)
		}
	}
	s.forget(2)
	s.mark(3, t0)
	s.keep([]int64{1})
	if !s.within(1, t0, window) || s.within(2, t0, window) || s.within(3, t0, window) {
		t.Error("forget(2) and keep(1) left the memo with the wrong sales")
	}
}
