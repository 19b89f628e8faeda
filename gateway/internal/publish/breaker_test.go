package publish

import (
	"errors"
	"testing"
	"time"
)

// The breaker's states, step by step, on a clock the test moves.
func TestBreaker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at        time.Duration // since t0
		do        string        // allow, success, failure, trip
		trial     bool          // for success/failure: the outcome is the trial's
		wantOK    bool          // for allow
		wantTrial bool          // for allow
		wantOpen  bool          // for open
	}
	tests := []struct {
		name      string
		threshold int64
		steps     []step
	}{
		{name: "closed: every delivery is attempted", threshold: 3, steps: []step{
			{do: "allow", wantOK: true},
			{do: "failure"}, {do: "failure"},
			// two failures are below the threshold of three
			{at: time.Millisecond, do: "allow", wantOK: true},
		}},
		{name: "threshold failures in a row open it for the cooldown", threshold: 3, steps: []step{
			{do: "failure"}, {do: "failure"}, {do: "failure"},
			{at: 10 * time.Millisecond, do: "allow", wantOK: false},
			{at: 999 * time.Millisecond, do: "allow", wantOK: false},
		}},
		{name: "a success between failures resets the count", threshold: 3, steps: []step{
			{do: "failure"}, {do: "failure"}, {do: "success"}, {do: "failure"}, {do: "failure"},
			{at: 10 * time.Millisecond, do: "allow", wantOK: true},
		}},
		{name: "after the cooldown one trial goes, the others still fail fast", threshold: 1, steps: []step{
			{do: "failure"},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
			{at: time.Second, do: "allow", wantOK: false},
		}},
		{name: "a successful trial closes it", threshold: 1, steps: []step{
			{do: "failure"},
			{do: "open", wantOpen: true},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
			// still failing fast for everyone else while the trial is out
			{at: 1050 * time.Millisecond, do: "open", wantOpen: true},
			{at: 1100 * time.Millisecond, do: "success", trial: true},
			{at: 1100 * time.Millisecond, do: "open", wantOpen: false},
			{at: 1100 * time.Millisecond, do: "allow", wantOK: true},
		}},
		{name: "a failed trial opens it for another cooldown", threshold: 1, steps: []step{
			{do: "failure"},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
			{at: 1500 * time.Millisecond, do: "failure", trial: true},
			{at: 2400 * time.Millisecond, do: "allow", wantOK: false},
			{at: 2500 * time.Millisecond, do: "allow", wantOK: true, wantTrial: true},
		}},
		{name: "a trial refused locally proves nothing: it stays open, the next publish is the trial", threshold: 1, steps: []step{
			{do: "failure"},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
			{at: time.Second, do: "untried"},
			{at: time.Second, do: "open", wantOpen: true},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
		}},
		{name: "a late acknowledgement of an earlier delivery closes it", threshold: 1, steps: []step{
			{do: "failure"},
			{at: 10 * time.Millisecond, do: "success"},
			{at: 20 * time.Millisecond, do: "allow", wantOK: true},
		}},
		{name: "every broker down opens it without waiting for failures", threshold: 5, steps: []step{
			{do: "trip"},
			{at: 10 * time.Millisecond, do: "allow", wantOK: false},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
		}},
		{name: "threshold 0: never opens", threshold: 0, steps: []step{
			{do: "failure"}, {do: "failure"}, {do: "trip"},
			{at: 10 * time.Millisecond, do: "allow", wantOK: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &breaker{threshold: tt.threshold, cooldown: time.Second}
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "allow":
					ok, trial := b.allow(now)
					if ok != s.wantOK || trial != s.wantTrial {
						t.Fatalf("step %d: allow at +%v = (%v, %v), want (%v, %v)", i, s.at, ok, trial, s.wantOK, s.wantTrial)
					}
				case "success":
					b.success(s.trial)
				case "failure":
					b.failure(now, s.trial)
				case "trip":
					b.trip(now)
				case "untried":
					b.untried()
				case "open":
					if got := b.open(); got != s.wantOpen {
						t.Fatalf("step %d: open at +%v = %v, want %v", i, s.at, got, s.wantOpen)
					}
				default:
					t.Fatalf("step %d: unknown action %q", i, s.do)
				}
			}
		})
	}
}

// Against a broker that never answers: the first deliveries time out
// (maybe written), then the producer refuses at once without taking the
// event (never written), so the caller gives the unit back immediately.
func TestPublishFailsFastOnceTheBrokerFailed(t *testing.T) {
	p, err := New(Config{Brokers: blackHole(t), Topic: "flash-sale-orders", Timeout: 200 * time.Millisecond,
		FailFastAfter: 2, FailFastFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })
	for i := range 2 {
		if err := p.Publish(1, []byte(`{}`)); !errors.Is(err, ErrUnconfirmed) {
			t.Fatalf("publish %d: %v, want ErrUnconfirmed", i, err)
		}
	}
	if !p.FailingFast() {
		t.Fatal("FailingFast() = false after two failed deliveries in a row with FailFastAfter 2")
	}
	err = p.Publish(1, []byte(`{}`))
	if !errors.Is(err, ErrNotPublished) || errors.Is(err, ErrUnconfirmed) {
		t.Errorf("publish with the breaker open: %v, want ErrNotPublished only", err)
	}
	if n := p.inFlight.Load(); n != 0 {
		t.Errorf("%d deliveries in flight after a refused publish", n)
	}
}
