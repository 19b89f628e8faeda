package kafkastuck

import (
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A partition is stuck only once the cluster has served it for the grace
// period while it kept failing; one the cluster stops serving starts over;
// after a replacement, none for Every.
func TestWatch(t *testing.T) {
	w := Watch{Grace: 3 * time.Second, Every: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	step := func(d time.Duration, served []int32, want []int32) {
		t.Helper()
		if got := w.Stuck(t0.Add(d), served); !slices.Equal(got, want) {
			t.Fatalf("at +%v with %v served: stuck %v, want %v", d, served, got, want)
		}
	}
	step(0, []int32{1, 2}, nil)
	step(w.Grace-time.Millisecond, []int32{1, 2}, nil)
	step(w.Grace-time.Millisecond/2, []int32{1}, nil) // 2 not served a moment: it starts over
	step(w.Grace, []int32{1, 2}, []int32{1})
	if w.Due(t0.Add(w.Grace + w.Every - time.Millisecond)) {
		t.Fatal("due again within Every of the replacement")
	}
	if !w.Due(t0.Add(w.Grace + w.Every)) {
		t.Fatal("not due Every after the replacement")
	}
	step(w.Grace+w.Every, []int32{2}, nil) // the replacement forgot what it saw
}

// Replacements that do not help come at a doubling wait, up to 16 Every;
// one long after the last starts over at Every.
func TestWatchBacksOff(t *testing.T) {
	w := Watch{Grace: time.Second, Every: 30 * time.Second}
	now := time.Unix(1000, 0)
	replace := func() time.Duration {
		t.Helper()
		for !w.Due(now) {
			now = now.Add(time.Second)
		}
		w.Stuck(now, []int32{0})
		now = now.Add(w.Grace)
		if got := w.Stuck(now, []int32{0}); len(got) != 1 {
			t.Fatalf("not replaced at %v", now)
		}
		return w.wait
	}
	var waits []time.Duration
	for range 7 {
		waits = append(waits, replace())
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute, 8 * time.Minute}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	now = now.Add(time.Hour)
	if got := replace(); got != 30*time.Second {
		t.Fatalf("wait after an hour of quiet: %v, want 30s", got)
	}
}

// Served means a leader and every replica in sync, with no error.
func TestServed(t *testing.T) {
	md := kafka.TopicMetadata{Partitions: []kafka.PartitionMetadata{
		{ID: 0, Leader: 1, Replicas: []int32{1, 2, 3}, Isrs: []int32{1, 2, 3}},
		{ID: 1, Leader: -1, Replicas: []int32{1}, Error: kafka.NewError(kafka.ErrLeaderNotAvailable, "", false)},
		{ID: 2, Leader: 2, Replicas: []int32{1, 2, 3}, Isrs: []int32{2}},
		{ID: 3, Leader: 1, Replicas: []int32{1}, Isrs: []int32{1}},
	}}
	if got := Served(md, []int32{2, 1, 0}); !slices.Equal(got, []int32{0}) {
		t.Fatalf("Served = %v, want [0] (1 leaderless, 2 short of replicas, 3 not asked about)", got)
	}
}
