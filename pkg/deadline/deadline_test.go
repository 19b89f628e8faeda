package deadline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestCallsWithinTheSlackShareOneContext(t *testing.T) {
	s := New(time.Second, 10*time.Millisecond)
	bg := context.Background()
	t0 := time.Now()
	a := s.At(bg, t0)
	if b := s.At(bg, t0.Add(9*time.Millisecond)); b != a {
		t.Fatal("a call 9 ms after the first got a context of its own; the slack is 10 ms")
	}
	if b := s.At(bg, t0.Add(-9*time.Millisecond)); b != a {
		t.Fatal("a call whose clock reading is 9 ms older got a context of its own")
	}
	c := s.At(bg, t0.Add(10*time.Millisecond))
	if c == a {
		t.Fatal("a call 10 ms after the first shared its context; the slack is 10 ms")
	}
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want time.Time
	}{{"first", a, t0.Add(time.Second)}, {"next", c, t0.Add(10*time.Millisecond + time.Second)}} {
		if d, ok := tt.ctx.Deadline(); !ok || !d.Equal(tt.want) {
			t.Errorf("%s: deadline %v (set %v), want %v", tt.name, d, ok, tt.want)
		}
	}
}

func TestSharedContextEndsAtItsDeadline(t *testing.T) {
	s := New(20*time.Millisecond, time.Millisecond)
	ctx := s.At(context.Background(), time.Now())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the shared context did not end")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
	}
	if next := s.At(context.Background(), time.Now()); next.Err() != nil {
		t.Fatalf("the call after the deadline got an ended context: %v", next.Err())
	}
}

func TestParentEndsSharedContexts(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	s := New(time.Hour, time.Millisecond)
	now := time.Now()
	ctx := s.At(parent, now)
	if other := s.At(context.Background(), now); other == ctx {
		t.Fatal("a call of another parent shared the context")
	}
	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the parent did not end the shared context")
	}
}

func TestConcurrentCalls(t *testing.T) {
	s := New(time.Second, time.Millisecond)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				now := time.Now()
				d, ok := s.At(context.Background(), now).Deadline()
				if !ok || d.Before(now.Add(time.Second-time.Millisecond)) || d.After(now.Add(time.Second+time.Millisecond)) {
					t.Errorf("deadline %v for a call at %v", d, now)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkAt(b *testing.B) {
	s := New(time.Second, 5*time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.At(context.Background(), time.Now())
	}
}

func BenchmarkWithTimeout(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, cancel := context.WithTimeout(context.Background(), time.Second)
		cancel()
	}
}
