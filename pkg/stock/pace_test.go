package stock

import (
	"context"
	"slices"
	"testing"

	"golang.org/x/time/rate"
)

// recordingLimiter allows everything at once and records what it was
// asked to wait for.
type recordingLimiter struct {
	burst int
	waits []int
}

func (l *recordingLimiter) WaitN(_ context.Context, n int) error {
	l.waits = append(l.waits, n)
	return nil
}

func (l *recordingLimiter) Burst() int { return l.burst }

// A burst pace lets PaceBurst pages through, then waits for all of them
// at once; a reader that stops short of a burst leaves its pages owed to
// the next reader of the same pace.
func TestBurstPaceWaitsOncePerBurst(t *testing.T) {
	lim := &recordingLimiter{burst: PaceBurst * HoldersPage}
	p := &burstPace{lim: lim}
	ctx := context.Background()
	for range 2*PaceBurst + 3 { // one reader: 23 pages
		if err := p.WaitN(ctx, HoldersPage); err != nil {
			t.Fatal(err)
		}
	}
	want := []int{PaceBurst * HoldersPage, PaceBurst * HoldersPage}
	if !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v after %d pages, want %v", lim.waits, 2*PaceBurst+3, want)
	}
	for range PaceBurst - 3 { // the next reader: its 7 pages end the burst
		if err := p.WaitN(ctx, HoldersPage); err != nil {
			t.Fatal(err)
		}
	}
	if want = append(want, PaceBurst*HoldersPage); !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v once the owed pages made a burst, want %v", lim.waits, want)
	}
	// More than a burst at once is asked as a burst, which the limiter allows.
	if err := p.WaitN(ctx, 3*PaceBurst*HoldersPage); err != nil || lim.waits[len(lim.waits)-1] != PaceBurst*HoldersPage {
		t.Fatalf("a read of three bursts waited %v (%v), want one burst", lim.waits, err)
	}
}

// PaceHolders' limiter holds a burst of pages at the rate asked.
func TestPaceHoldersRate(t *testing.T) {
	p, ok := PaceHolders(20_000).(*burstPace)
	if !ok {
		t.Fatalf("PaceHolders(20000) = %T, want *burstPace", PaceHolders(20_000))
	}
	lim := p.lim.(*rate.Limiter)
	if lim.Limit() != 20_000 || lim.Burst() != PaceBurst*HoldersPage {
		t.Fatalf("limiter of %v/s with a burst of %d, want 20000/s and %d", lim.Limit(), lim.Burst(), PaceBurst*HoldersPage)
	}
}
