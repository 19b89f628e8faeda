package stock

import (
	"context"
	"slices"
	"testing"
	"time"

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

// A burst pace pays for PaceBurst pages before the first of them and
// lets them through; a reader that stops short of a burst leaves the rest
// of it to the next reader of the same pace.
func TestBurstPacePaysBeforeEachBurst(t *testing.T) {
	lim := &recordingLimiter{burst: PaceBurst * HoldersPage}
	p := &burstPace{lim: lim}
	ctx := context.Background()
	read := func(pages int) {
		t.Helper()
		for range pages {
			if err := p.WaitN(ctx, HoldersPage); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst := PaceBurst * HoldersPage
	read(1)
	if want := []int{burst}; !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v before the first page, want %v", lim.waits, want)
	}
	read(2*PaceBurst + 2) // one reader: 23 pages in all, the third burst begun
	want := []int{burst, burst, burst}
	if !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v after %d pages, want %v", lim.waits, 2*PaceBurst+3, want)
	}
	read(PaceBurst - 3) // the next reader: the third burst's 7 pages, paid already
	if !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v within a paid burst, want %v", lim.waits, want)
	}
	read(1)
	if want = append(want, burst); !slices.Equal(lim.waits, want) {
		t.Fatalf("waits %v once the burst was read, want %v", lim.waits, want)
	}
	// More than a burst at once pays a burst, all the limiter can allow.
	if err := p.WaitN(ctx, 3*burst); err != nil || lim.waits[len(lim.waits)-1] != burst || p.credit != 0 {
		t.Fatalf("a read of three bursts: waits %v, credit %d (%v); want a burst paid, none left", lim.waits, p.credit, err)
	}
}

// A real limiter, full when made, lets the first burst through at once
// and makes the next wait: the pace never lets two bursts run together.
func TestBurstPaceHoldsTheSecondBurst(t *testing.T) {
	p := PaceHolders(1000).(*burstPace) // a page a second: a burst is 10 s
	ctx := context.Background()
	for range PaceBurst {
		if err := p.WaitN(ctx, HoldersPage); err != nil {
			t.Fatal(err)
		}
	}
	// The next page needs a burst paid: 10 s away, more than this ctx has.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := p.WaitN(short, HoldersPage); err == nil {
		t.Fatal("the 11th page went through at once: two bursts back to back")
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
