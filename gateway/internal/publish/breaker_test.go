package publish

import (
	"errors"
	"testing"
	"time"

	"flashsale/tools/testenv"
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
		{name: "a trial that fails after a late acknowledgement closed the breaker counts as one failure", threshold: 3, steps: []step{
			{do: "failure"}, {do: "failure"}, {do: "failure"},
			{at: time.Second, do: "allow", wantOK: true, wantTrial: true},
			{at: 1100 * time.Millisecond, do: "success"},
			{at: 1500 * time.Millisecond, do: "failure", trial: true},
			{at: 1500 * time.Millisecond, do: "open", wantOpen: false},
			{at: 1500 * time.Millisecond, do: "allow", wantOK: true},
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
	p, err := New(Config{Brokers: testenv.BlackHole(t), Topic: "flash-sale-orders", Timeout: 200 * time.Millisecond,
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
	if n := p.FailingFast(); n != 1 {
		t.Fatalf("FailingFast() = %d after two failed deliveries in a row with FailFastAfter 2, want 1 (the partition no report named)", n)
	}
	err = p.Publish(1, []byte(`{}`))
	if !errors.Is(err, ErrNotPublished) || errors.Is(err, ErrUnconfirmed) {
		t.Errorf("publish with the breaker open: %v, want ErrNotPublished only", err)
	}
	if n := p.inFlight.Load(); n != 0 {
		t.Errorf("%d deliveries in flight after a refused publish", n)
	}
}

// One breaker per partition: the deliveries failing on one partition stop
// its items only, and an item's partition is the one its reports named.
func TestBreakersIsolatePartitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(2, time.Second)
	deliver := func(item int64, part int32, acked bool, at time.Duration) {
		t.Helper()
		b := bs.forItem(item)
		ok, trial := b.allow(t0.Add(at))
		if !ok {
			t.Fatalf("item %d refused at +%v before its delivery", item, at)
		}
		bs.record(b, bs.forReport(item, part), trial, acked, t0.Add(at))
	}
	allowed := func(item int64, at time.Duration) bool {
		ok, trial := bs.forItem(item).allow(t0.Add(at))
		if trial {
			bs.forItem(item).untried()
		}
		return ok
	}
	// Items 1 and 2 are on partition 3, item 7 on partition 5.
	deliver(1, 3, true, 0)
	deliver(2, 3, true, 0)
	deliver(7, 5, true, 0)
	// Partition 3's leader fails two deliveries in a row.
	deliver(1, 3, false, 10*time.Millisecond)
	deliver(2, 3, false, 20*time.Millisecond)
	if allowed(1, 30*time.Millisecond) || allowed(2, 30*time.Millisecond) {
		t.Error("an item of the failing partition is still published")
	}
	if !allowed(7, 30*time.Millisecond) {
		t.Error("an item of a healthy partition is refused because another partition failed")
	}
	if !allowed(99, 30*time.Millisecond) {
		t.Error("an item no report named yet is refused because a known partition failed")
	}
	if n := bs.open(); n != 1 {
		t.Errorf("open() = %d partitions, want 1", n)
	}
	// Every broker down opens them all, the unknown partition's too.
	bs.trip(t0.Add(40 * time.Millisecond))
	for _, item := range []int64{1, 7, 99} {
		if allowed(item, 50*time.Millisecond) {
			t.Errorf("item %d published with every broker down", item)
		}
	}
	if n := bs.open(); n != 3 {
		t.Errorf("open() = %d partitions after trip, want 3 (3, 5 and the unknown one)", n)
	}
}

// An item's first report names its partition: the trial the unknown
// partition's breaker granted ends with that delivery's outcome, which
// counts for the named partition.
func TestBreakersTrialOfAnItemNotYetPlaced(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(1, time.Second)
	unknown := bs.forItem(1)
	unknown.failure(t0, false) // a delivery that named no partition
	ok, trial := unknown.allow(t0.Add(time.Second))
	if !ok || !trial {
		t.Fatalf("allow after the cooldown = (%v, %v), want the trial", ok, trial)
	}
	bs.record(unknown, bs.forReport(1, 4), trial, true, t0.Add(time.Second))
	if unknown.open() {
		t.Error("the unknown partition's breaker is still open after its trial was acknowledged on partition 4")
	}
	if b := bs.forItem(1); b == unknown || b.open() {
		t.Errorf("item 1 after a report from partition 4: breaker %p (unknown %p), open %v; want partition 4's, closed", b, unknown, b.open())
	}

	// A failed trial on the named partition counts once for it, and the
	// unknown partition's breaker opens again for another cooldown.
	unknown.failure(t0.Add(2*time.Second), false)
	ok, trial = bs.forItem(2).allow(t0.Add(3 * time.Second))
	if !ok || !trial {
		t.Fatalf("item 2 allow after the cooldown = (%v, %v), want the trial", ok, trial)
	}
	bs.record(unknown, bs.forReport(2, 6), trial, false, t0.Add(3*time.Second))
	if !unknown.open() {
		t.Error("the unknown partition's breaker closed after its trial failed")
	}
	if ok, _ := bs.forItem(2).allow(t0.Add(3100 * time.Millisecond)); ok {
		t.Error("item 2 published right after its partition's delivery failed with threshold 1")
	}
}

func TestBreakersForgetItemsPastTheBound(t *testing.T) {
	bs := newBreakers(1, time.Second)
	for item := range int64(maxItemsLearned + 10) {
		bs.forReport(item, int32(item%12))
	}
	if n := len(bs.items); n > maxItemsLearned {
		t.Errorf("%d items remembered, want at most %d", n, maxItemsLearned)
	}
	if n := len(bs.byPart); n != 13 {
		t.Errorf("%d breakers, want 13 (12 partitions and the unknown one)", n)
	}
}

// librdkafka's report that it reaches no broker holds until a delivery is
// acknowledged: the breakers a spreading producer makes on its first pick
// after it start open as well.
func TestBreakersTripHoldsUntilAnAcknowledgement(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(5, time.Second)
	s := &spreader{stickFor: 100 * time.Millisecond}
	s.setPartitions(3)
	bs.trip(t0) // before any partition's breaker exists
	if _, _, _, ok, _ := s.pick(t0.Add(time.Millisecond), bs); ok {
		t.Fatal("an order was sent right after every broker was reported down")
	}
	// After the cooldown each partition gets its trial, one at a time.
	trials := map[int32]*breaker{}
	for range 4 {
		part, b, trial, ok, _ := s.pick(t0.Add(time.Second), bs)
		if !ok {
			break
		}
		if !trial {
			t.Fatalf("partition %d allowed an order that is not its trial while every broker is down", part)
		}
		trials[part] = b
	}
	if len(trials) != 3 {
		t.Fatalf("%d trials after the cooldown, want one per partition (3)", len(trials))
	}
	// One is acknowledged: the trip is over, and a breaker made now starts
	// closed; the other partitions wait for their own trials.
	bs.record(trials[0], trials[0], true, true, t0.Add(1100*time.Millisecond))
	if ok, _ := bs.forPartition(7).allow(t0.Add(1100 * time.Millisecond)); !ok {
		t.Error("a partition first used after an acknowledgement starts open")
	}
	if n := bs.open(); n != 2 {
		t.Errorf("open() = %d after one partition's trial was acknowledged, want 2", n)
	}
}

// After every broker came back, the breaker of the deliveries that named
// no partition closes with the first acknowledgement: once every item is
// placed nothing asks it for a trial, and it would count as failing fast
// (and fire the alert) for ever.
func TestBreakersCloseTheUnknownPartitionOnAnAcknowledgement(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := newBreakers(5, time.Second)
	b := bs.forItem(1)
	bs.record(b, bs.forReport(1, 3), false, true, t0) // item 1 is on partition 3
	bs.trip(t0.Add(10 * time.Millisecond))
	if n := bs.open(); n != 2 {
		t.Fatalf("open() = %d after the trip, want 2 (partition 3 and the unknown one)", n)
	}
	b = bs.forItem(1)
	ok, trial := b.allow(t0.Add(1100 * time.Millisecond))
	if !ok || !trial {
		t.Fatalf("allow after the cooldown = (%v, %v), want the trial", ok, trial)
	}
	bs.record(b, bs.forReport(1, 3), trial, true, t0.Add(1200*time.Millisecond))
	if n := bs.open(); n != 0 {
		t.Errorf("open() = %d with the brokers back and item 1's trial acknowledged, want 0", n)
	}
}
