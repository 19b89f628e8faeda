package publish

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"

	"flashsale/tools/testenv"
)

// Which failures say "never written" and which say "maybe written".
func TestPublishFailureKinds(t *testing.T) {
	p, err := New(Config{Brokers: testenv.BlackHole(t), Topic: "flash-sale-orders", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(time.Second) })

	tests := []struct {
		name  string
		value []byte
		want  error
		not   error
	}{
		// librdkafka refuses it locally (above message.max.bytes): no
		// copy exists anywhere.
		{name: "refused before the producer took it", value: bytes.Repeat([]byte{'x'}, 2<<20), want: ErrNotPublished, not: ErrUnconfirmed},
		// Taken, sent towards a broker that never answers: the delivery
		// report says timed out, and the caller cannot know more.
		{name: "taken, no acknowledgement", value: []byte(`{}`), want: ErrUnconfirmed, not: ErrNotPublished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Publish(1, tt.value)
			if !errors.Is(err, tt.want) || errors.Is(err, tt.not) {
				t.Errorf("Publish error %v, want %v and not %v", err, tt.want, tt.not)
			}
		})
	}
}

// A publish still waiting when the producer closes (the HTTP drain gave up
// on it) gets an answer, unconfirmed, so its caller settles the order;
// without the purge it waited for ever on the closed producer.
func TestCloseAnswersPublishesStillWaiting(t *testing.T) {
	p, err := New(Config{Brokers: testenv.BlackHole(t), Topic: "flash-sale-orders", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Publish(1, []byte(`{}`)) }()
	for p.inFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if left := p.Close(100 * time.Millisecond); left != 1 {
		t.Errorf("Close() = %d publishes left waiting, want 1", left)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnconfirmed) {
			t.Errorf("publish waiting at Close: %v, want ErrUnconfirmed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a publish waiting at Close got no answer 10 s after it")
	}
}

// A trial delivery refused locally (a message over the producer's size
// limit: Produce fails at once) says nothing about the broker: the trial
// is given back, and the next publish is the trial. Kept as taken, the
// breaker waited for a trial that never reported and refused the
// partition's orders for good.
func TestTrialRefusedLocallyIsGivenBack(t *testing.T) {
	ctx, ac := brokerAdmin(t)
	topic := testTopic(t, ctx, ac, "test-publish-trial", 1)
	p, err := newProducer(Config{Brokers: testenv.KafkaBrokers(), Topic: topic, Timeout: 5 * time.Second, Linger: time.Millisecond,
		FailFastAfter: 1, FailFastFor: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(5 * time.Second)
	go func() {
		for range p.Events() {
		}
	}()
	p.BrokersDown() // every breaker open
	if err := p.Publish(7, []byte(`{}`)); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("publish with the breaker open: %v, want a refusal", err)
	}
	time.Sleep(100 * time.Millisecond) // past the cooldown: the next publish is the trial
	if err := p.Publish(7, make([]byte, 2<<20)); err == nil {
		t.Fatal("a 2 MiB message was published, want it refused by the producer")
	}
	if err := p.Publish(7, []byte(`{}`)); err != nil {
		t.Fatalf("publish after a trial refused locally: %v, want it sent as the trial and acknowledged", err)
	}
}

// The producer's settings that make a 202 mean "on every in-sync replica,
// once": acks from all of them, idempotence (no duplicate or reordered
// retry), and at most five requests in flight, which idempotence needs to
// keep order. And a linger under a millisecond is not cut to zero.
func TestProducerSettingsKeepTheDurabilityPromise(t *testing.T) {
	p, err := newProducer(Config{Brokers: "127.0.0.1:1", Topic: "t", Timeout: 3 * time.Second, Linger: 500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	for k, want := range map[string]any{"acks": "all", "enable.idempotence": true,
		"max.in.flight.requests.per.connection": 5, "linger.ms": "0.5", "message.timeout.ms": 3000} {
		if got := p.conf[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	for _, d := range []time.Duration{0, 2 * time.Millisecond, 1500 * time.Microsecond} {
		if got, want := lingerMS(d), strconv.FormatFloat(d.Seconds()*1000, 'f', -1, 64); got != want {
			t.Errorf("lingerMS(%v) = %s, want %s", d, got, want)
		}
	}
}
