package httpapi

import (
	"fmt"
	"testing"
	"time"
)

// Early joiners are sent back right after the opening, spread over
// openingSpread, and no sooner: before the opening a poll learns nothing,
// and a crowd advised a second at a time polled every second for nothing.
func TestDrawingPollLandsAfterTheOpening(t *testing.T) {
	const grace = time.Minute
	tickets := make([]string, 2000)
	for i := range tickets {
		tickets[i] = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
	}

	untilOpen := 3 * time.Second
	lo, hi := int64(1<<62), int64(0)
	for _, tk := range tickets {
		ms := drawingPoll(untilOpen, grace, tk)
		if ms < untilOpen.Milliseconds() || ms >= (untilOpen+openingSpread).Milliseconds() {
			t.Fatalf("ticket %s, %v before the opening: advised %d ms, want within [%v, %v)", tk, untilOpen, ms, untilOpen, untilOpen+openingSpread)
		}
		if again := drawingPoll(untilOpen, grace, tk); again != ms {
			t.Fatalf("ticket %s advised %d ms, then %d ms: want one moment per ticket", tk, ms, again)
		}
		lo, hi = min(lo, ms), max(hi, ms)
	}
	if spread := time.Duration(hi-lo) * time.Millisecond; spread < openingSpread*3/4 {
		t.Errorf("%d tickets' first polls after the opening span %v, want most of %v", len(tickets), spread, openingSpread)
	}

	// Still DRAWING past the opening by the gateway's clock (Redis's is
	// behind): spread from now as at the opening, never faster than the
	// floor, so a skewed clock does not bring the crowd back in step.
	for _, untilOpen := range []time.Duration{0, -time.Second} {
		lo, hi := int64(1<<62), int64(0)
		for _, tk := range tickets {
			ms := drawingPoll(untilOpen, grace, tk)
			if ms < minDrawingPoll.Milliseconds() || ms >= openingSpread.Milliseconds() {
				t.Fatalf("ticket %s, %v past the opening: advised %d ms, want within [%v, %v)", tk, -untilOpen, ms, minDrawingPoll, openingSpread)
			}
			lo, hi = min(lo, ms), max(hi, ms)
		}
		if hi-lo < openingSpread.Milliseconds()/2 {
			t.Errorf("%v past the opening: advice spans %d–%d ms, want spread", -untilOpen, lo, hi)
		}
	}

	for _, tc := range []struct {
		name      string
		untilOpen time.Duration
		grace     time.Duration
		wantMs    int64
	}{
		{"far from the opening: as often as the place needs, 10 s at most", 5 * time.Minute, grace, 10000},
		{"a short grace bounds the wait to a third of it", 3 * time.Second, 3 * time.Second, 1000},
		{"a grace of a second: no faster than the floor", 3 * time.Second, time.Second, minDrawingPoll.Milliseconds()},
	} {
		for _, tk := range tickets[:50] {
			if got := drawingPoll(tc.untilOpen, tc.grace, tk); got != tc.wantMs {
				t.Errorf("%s: ticket %s advised %d ms, want %d", tc.name, tk, got, tc.wantMs)
				break
			}
		}
	}
}
