package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/tools/testenv"
)

var seq atomic.Int64

func newQueue(t testing.TB, grace time.Duration) (*Queue, int64) {
	t.Helper()
	testenv.Require(t, testenv.RedisAddr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	sale := 7_000_000_000 + time.Now().UnixNano()%1_000_000_000*10 + seq.Add(1)
	t.Cleanup(func() {
		for _, k := range keyNames {
			c.Do(context.Background(), c.B().Del().Key(key(sale, k)).Build())
		}
		c.Close()
	})
	return New(c, grace), sale
}

func TestJoinIsIdempotentPerUser(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	a, err := q.Join(ctx, sale, open, true, "alice")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := q.Join(ctx, sale, open, true, "alice")
	b, _ := q.Join(ctx, sale, open, true, "bob")
	if a != again || a == b {
		t.Fatalf("tickets alice=%s again=%s bob=%s: want alice's twice and bob's distinct", a, again, b)
	}
	st, err := q.Status(ctx, sale, open, b, "")
	if err != nil || st.Position != 2 || st.UserID != "bob" || st.Size != 2 {
		t.Fatalf("bob's status = %+v, %v; want position 2 of 2", st, err)
	}
	if _, err := q.Status(ctx, sale, open, "nope", ""); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("unknown ticket: %v", err)
	}
}

// Positions stay unique and dense when two gateways take joins at once.
func TestConcurrentJoinsFromTwoGatewaysAreDense(t *testing.T) {
	q1, sale := newQueue(t, time.Minute)
	c2, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	q2 := New(c2, time.Minute) // a second gateway's own client
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	const users = 400
	tickets := make([]string, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := q1
			if i%2 == 1 {
				q = q2
			}
			tk, err := q.Join(ctx, sale, open, true, fmt.Sprintf("u%d", i))
			if err != nil {
				t.Error(err)
			}
			tickets[i] = tk
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, tk := range tickets {
		st, err := q1.Status(ctx, sale, open, tk, "")
		if err != nil {
			t.Fatal(err)
		}
		if seen[st.Position] || st.Position < 1 || st.Position > users {
			t.Fatalf("position %d duplicated or out of 1..%d", st.Position, users)
		}
		seen[st.Position] = true
	}
}

// Early joiners are drawn at random at the opening; later ones are FIFO.
func TestPreQueueDrawThenFIFO(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	open := time.Now().Add(400 * time.Millisecond)
	const early = 40
	var tickets []string
	for i := range early {
		tk, err := q.Join(ctx, sale, open, true, fmt.Sprintf("early-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if st, _ := q.Status(ctx, sale, open, tickets[0], ""); st.Position != 0 {
		t.Fatalf("position before the draw = %d, want 0 (not drawn yet)", st.Position)
	}
	time.Sleep(time.Until(open) + 50*time.Millisecond)
	var positions []int64
	for _, tk := range tickets {
		st, err := q.Status(ctx, sale, open, tk, "")
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, st.Position)
	}
	sorted := slices.Clone(positions)
	slices.Sort(sorted)
	for i, p := range sorted {
		if p != int64(i+1) {
			t.Fatalf("early positions %v are not a permutation of 1..%d", positions, early)
		}
	}
	if slices.IsSorted(positions) {
		t.Fatalf("early positions follow arrival order %v: no draw happened", positions)
	}
	late, _ := q.Join(ctx, sale, open, true, "late-1")
	later, _ := q.Join(ctx, sale, open, true, "late-2")
	s1, _ := q.Status(ctx, sale, open, late, "")
	s2, _ := q.Status(ctx, sale, open, later, "")
	if s1.Position != early+1 || s2.Position != early+2 {
		t.Fatalf("late joiners at %d and %d, want %d and %d (FIFO after the draw)", s1.Position, s2.Position, early+1, early+2)
	}
}

// Once a round has admitted, a join goes to the back of the queue even
// when the opening it is given lies ahead (a clock that stepped back, an
// opening moved later in the database): drawn into the pre-queue, it
// would rank ahead of places already admitted.
func TestJoinAfterAdmissionBeganGoesToTheBack(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	opened := time.Now().Add(-time.Second)
	var tickets []string
	for i := range 5 {
		tk, err := q.Join(ctx, sale, opened, true, fmt.Sprintf("on-time-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if _, _, err := q.Advance(ctx, sale, opened, 1000, false); err != nil {
		t.Fatal(err)
	}
	// The opening now reads as a minute away.
	late, err := q.Join(ctx, sale, time.Now().Add(time.Minute), true, "late")
	if err != nil {
		t.Fatal(err)
	}
	st, err := q.Status(ctx, sale, opened, late, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Position != int64(len(tickets))+1 {
		t.Errorf("the late joiner's position = %d, want %d: behind every place admitted before her", st.Position, len(tickets)+1)
	}
}

// Several gateways advancing at once do not admit faster than the rate.
func TestAdvanceRateIsSharedAcrossGateways(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	open := time.Now().Add(-10 * time.Millisecond)
	for i := range 200 {
		if _, err := q.Join(ctx, sale, open, false, fmt.Sprintf("u%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	const rate = 20.0
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 { // four gateways
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 500*time.Millisecond {
				if _, _, err := q.Advance(ctx, sale, open, rate, false); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	admitted, _, _ := q.Advance(ctx, sale, open, rate, false)
	bound := int64(rate*time.Since(open).Seconds()) + int64(rate) + 1 // plus the one-second budget cap
	if admitted < 1 || admitted > bound {
		t.Fatalf("admitted %d in %v at %v/s from 4 gateways, want 1..%d", admitted, time.Since(open), rate, bound)
	}
	if err := q.SetRate(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	first, _, _ := q.Advance(ctx, sale, open, rate, false) // spends what was saved up
	time.Sleep(200 * time.Millisecond)
	again, r, _ := q.Advance(ctx, sale, open, rate, false)
	if r != 0 || again != first {
		t.Fatalf("after an operator set rate 0: rate %v, admitted %d then %d; want rate 0 and no more admissions", r, first, again)
	}
}

// An abandoned place is skipped without using the admission budget, and
// its holder learns it lost the place and may join again at the end.
func TestAbandonedPlaceIsSkipped(t *testing.T) {
	q, sale := newQueue(t, 150*time.Millisecond)
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	gone, _ := q.Join(ctx, sale, open, false, "gone")
	live, _ := q.Join(ctx, sale, open, false, "live")
	time.Sleep(250 * time.Millisecond)
	if _, err := q.Status(ctx, sale, open, live, ""); err != nil { // live polls, gone does not
		t.Fatal(err)
	}
	if err := q.SetRate(ctx, sale, 1); err != nil {
		t.Fatal(err)
	}
	var admitted int64
	for range 30 { // up to ~1.5 s for one unit of budget at 1/s
		admitted, _, _ = q.Advance(ctx, sale, open, 1, false)
		st, err := q.Status(ctx, sale, open, live, "")
		if err != nil {
			t.Fatal(err)
		}
		if st.IsAdmitted() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, _ := q.Status(ctx, sale, open, live, "")
	if !st.IsAdmitted() || admitted != 2 {
		t.Fatalf("live shopper %+v, admitted %d: want live admitted after gone was skipped", st, admitted)
	}
	if _, err := q.Status(ctx, sale, open, gone, ""); !errors.Is(err, ErrTicketExpired) {
		t.Fatalf("abandoned ticket: %v, want ErrTicketExpired", err)
	}
	again, _ := q.Join(ctx, sale, open, false, "gone")
	if again == gone {
		t.Fatal("rejoining returned the lost ticket")
	}
	if st, _ := q.Status(ctx, sale, open, again, ""); st.Position != 3 {
		t.Fatalf("rejoined at position %d, want 3 (the end)", st.Position)
	}
}

func TestSoldOutStopsAdmission(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	// Budget saved up while the queue was empty and the item on sale...
	for range 2 {
		if _, _, err := q.Advance(ctx, sale, open, 1000, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 10 {
		q.Join(ctx, sale, open, false, fmt.Sprintf("u%d", i))
	}
	// ...admits nobody once it sold out.
	for range 5 {
		if n, _, _ := q.Advance(ctx, sale, open, 1000, true); n != 0 {
			t.Fatalf("admitted %d while sold out", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Size counts the places admission has not reached: early joiners before
// the draw, late joiners after it, minus what was admitted or skipped; a
// repeated join is one place, a lost place that rejoins is one more.
func TestSize(t *testing.T) {
	q, sale := newQueue(t, 300*time.Millisecond)
	ctx := testenv.Context(t)
	open := time.Now().Add(200 * time.Millisecond)
	size := func(step string, want Length) {
		t.Helper()
		got, err := q.Size(ctx, sale)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got != want {
			t.Fatalf("%s: size %+v, want %+v", step, got, want)
		}
	}
	size("empty queue", Length{})
	var early []string
	for i := range 5 {
		tk, err := q.Join(ctx, sale, open, true, fmt.Sprintf("early-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		early = append(early, tk)
	}
	if _, err := q.Join(ctx, sale, open, true, "early-0"); err != nil {
		t.Fatal(err)
	}
	size("five early joiners, one joining twice", Length{Waiting: 5, Joined: 5})
	time.Sleep(time.Until(open) + 20*time.Millisecond)
	for i := range 3 {
		if _, err := q.Join(ctx, sale, open, true, fmt.Sprintf("late-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	size("three late joiners", Length{Waiting: 8, Joined: 8})
	if err := q.SetRate(ctx, sale, 1000); err != nil { // a budget of 1000/s admits everyone polling
		t.Fatal(err)
	}
	var admitted int64
	for range 50 {
		var err error
		if admitted, _, err = q.Advance(ctx, sale, open, 1000, false); err != nil {
			t.Fatal(err)
		}
		if admitted == 8 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	size("everyone admitted", Length{Waiting: 0, Joined: 8, Admitted: admitted})
	// A place lost for want of polls is skipped; its holder joins again at
	// the end and waits once more.
	if err := q.SetRate(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	gone, _ := q.Join(ctx, sale, open, true, "gone")
	size("one more joiner while admission is stopped", Length{Waiting: 1, Joined: 9, Admitted: 8})
	time.Sleep(400 * time.Millisecond) // longer than the grace
	if err := q.SetRate(ctx, sale, 1000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Advance(ctx, sale, open, 1000, false); err != nil { // skipping costs no budget
		t.Fatal(err)
	}
	if _, err := q.Status(ctx, sale, open, gone, ""); !errors.Is(err, ErrTicketExpired) {
		t.Fatalf("abandoned ticket: %v, want ErrTicketExpired", err)
	}
	size("the abandoned place skipped", Length{Waiting: 0, Joined: 9, Admitted: 9})
	if err := q.SetRate(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Join(ctx, sale, open, true, "gone"); err != nil {
		t.Fatal(err)
	}
	size("the holder rejoined", Length{Waiting: 1, Joined: 10, Admitted: 9})
}

// Every key of a sale's queue gets the expiry, the ones made by joins,
// polls and admission alike.
func TestExpireAt(t *testing.T) {
	q, sale := newQueue(t, 200*time.Millisecond)
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	a, _ := q.Join(ctx, sale, open, false, "alice")
	q.Join(ctx, sale, time.Now().Add(time.Hour), true, "carol") // drawn before an opening: the pre-queue
	time.Sleep(300 * time.Millisecond)                          // past the grace: admission gives these places up (the dead set)
	q.Join(ctx, sale, open, false, "dave")                      // and admits dave's
	if _, _, err := q.Advance(ctx, sale, open, 1000, false); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Status(ctx, sale, open, a, ""); err != nil && !errors.Is(err, ErrTicketExpired) {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour)
	if err := q.Expire(ctx, map[int64]time.Time{sale: at}); err != nil {
		t.Fatal(err)
	}
	for _, name := range keyNames {
		ms, err := q.client.Do(ctx, q.client.B().Pttl().Key(key(sale, name)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Duration(ms) * time.Millisecond; left < 59*time.Minute || left > time.Hour {
			t.Errorf("key %s: expires in %v (PTTL %d), want about an hour", name, left, ms)
		}
	}
}

// A ticket polled by another user is unknown to them, and their poll does
// not keep its place alive (a ticket id is a secret, but its holder alone
// should decide whether her place lives).
func TestStatusOfAnotherUsersTicket(t *testing.T) {
	q, sale := newQueue(t, time.Minute)
	ctx := testenv.Context(t)
	open := time.Now().Add(-time.Second)
	a, err := q.Join(ctx, sale, open, false, "alice")
	if err != nil {
		t.Fatal(err)
	}
	seen := func() float64 {
		t.Helper()
		v, err := q.client.Do(ctx, q.client.B().Zscore().Key(key(sale, "seen")).Member(a).Build()).AsFloat64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := seen()
	time.Sleep(5 * time.Millisecond)
	if _, err := q.Status(ctx, sale, open, a, "mallory"); !errors.Is(err, ErrUnknownTicket) {
		t.Fatalf("mallory polls alice's ticket: %v, want ErrUnknownTicket", err)
	}
	if after := seen(); after != before {
		t.Fatalf("mallory's poll kept alice's place alive: last seen %v -> %v", before, after)
	}
	if st, err := q.Status(ctx, sale, open, a, "alice"); err != nil || st.UserID != "alice" || seen() == before {
		t.Fatalf("alice polls her ticket: %+v, %v, last seen moved: %v", st, err, seen() != before)
	}
}

// Admission walks abandoned places a chunk at a time, across the drawn
// pre-queue and the queue behind it, at most maxSteps places a round: the
// live shoppers are admitted, each abandoned place is written off (its
// ticket lost, its shopper free to join again), and no round walks more
// than its bound, so none holds the sale's Redis node for long.
func TestAdvanceWalksAbandonedPlaces(t *testing.T) {
	q, sale := newQueue(t, 300*time.Millisecond)
	q.maxSteps = 250 // not a multiple of the script's chunk
	ctx := testenv.Context(t)
	open := time.Now().Add(400 * time.Millisecond)
	type place struct {
		user, ticket string
		live         bool
	}
	var places []place
	join := func(n int, prefix string) {
		for i := range n {
			user := fmt.Sprintf("%s-%d", prefix, i)
			tk, err := q.Join(ctx, sale, open, true, user)
			if err != nil {
				t.Fatal(err)
			}
			places = append(places, place{user, tk, i%37 == 0})
		}
	}
	join(150, "early") // drawn at the opening
	time.Sleep(time.Until(open))
	join(220, "late")                  // in arrival order behind them
	time.Sleep(350 * time.Millisecond) // every place past its grace
	for _, p := range places {
		if p.live { // these poll: alive again
			if _, err := q.Status(ctx, sale, open, p.ticket, p.user); err != nil {
				t.Fatal(err)
			}
		}
	}
	rounds := 0
	for admitted := int64(0); admitted < int64(len(places)); rounds++ {
		before := admitted
		var err error
		if admitted, _, err = q.Advance(ctx, sale, open, 1e6, false); err != nil {
			t.Fatal(err)
		}
		if walked := admitted - before; walked > int64(q.maxSteps) {
			t.Fatalf("one round walked %d places, want at most %d", walked, q.maxSteps)
		}
		if rounds > 20 {
			t.Fatalf("admitted %d of %d places after %d rounds", admitted, len(places), rounds)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rounds < 2 {
		t.Errorf("%d places walked in %d round, want more than one under a bound of %d", len(places), rounds, q.maxSteps)
	}
	for _, p := range places {
		st, err := q.Status(ctx, sale, open, p.ticket, p.user)
		switch {
		case p.live && (err != nil || !st.IsAdmitted()):
			t.Errorf("live %s: %+v, %v; want admitted", p.user, st, err)
		case !p.live && !errors.Is(err, ErrTicketExpired):
			t.Errorf("abandoned %s: %+v, %v; want ErrTicketExpired", p.user, st, err)
		}
	}
	again, err := q.Join(ctx, sale, open, true, places[1].user) // abandoned
	if err != nil || again == places[1].ticket {
		t.Errorf("%s joins again: %q, %v; want a new ticket", places[1].user, again, err)
	}
}
