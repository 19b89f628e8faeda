package quiet

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/tools/testenv"
)

// counter answers the given backlogs in turn, then the last one forever.
func counter(backlogs ...int64) (func(context.Context) (int64, error), *int) {
	calls := 0
	return func(context.Context) (int64, error) {
		n := backlogs[min(calls, len(backlogs)-1)]
		calls++
		return n, nil
	}, &calls
}

func TestWait(t *testing.T) {
	ctx := context.Background()
	t.Run("quiet at once: one count, no wait", func(t *testing.T) {
		count, calls := counter(0)
		if n, err := Wait(ctx, count, time.Minute, time.Millisecond, io.Discard); n != 0 || err != nil || *calls != 1 {
			t.Fatalf("backlog %d, err %v after %d counts; want 0, nil, 1", n, err, *calls)
		}
	})
	t.Run("worked off while waiting", func(t *testing.T) {
		count, calls := counter(900, 400, 0)
		if n, err := Wait(ctx, count, time.Minute, time.Millisecond, io.Discard); n != 0 || err != nil || *calls != 3 {
			t.Fatalf("backlog %d, err %v after %d counts; want 0, nil, 3", n, err, *calls)
		}
	})
	t.Run("bound reached: what is left", func(t *testing.T) {
		count, _ := counter(900, 700)
		start := time.Now()
		n, err := Wait(ctx, count, 50*time.Millisecond, 5*time.Millisecond, io.Discard)
		if n != 700 || err != nil {
			t.Fatalf("backlog %d, err %v; want 700, nil", n, err)
		}
		if time.Since(start) < 50*time.Millisecond {
			t.Fatalf("gave up after %v, before the bound", time.Since(start))
		}
	})
	t.Run("bound 0 only counts", func(t *testing.T) {
		count, calls := counter(900, 0)
		if n, _ := Wait(ctx, count, 0, time.Millisecond, io.Discard); n != 900 || *calls != 1 {
			t.Fatalf("backlog %d after %d counts; want 900 after 1", n, *calls)
		}
	})
	t.Run("count fails while waiting: the last backlog, not done", func(t *testing.T) {
		boom := errors.New("boom")
		calls := 0
		count := func(context.Context) (int64, error) {
			if calls++; calls == 1 {
				return 900, nil
			}
			return 0, boom
		}
		var progress strings.Builder
		n, err := Wait(ctx, count, time.Minute, time.Millisecond, &progress)
		if n != 900 || !errors.Is(err, boom) || strings.Contains(progress.String(), "done") {
			t.Fatalf("backlog %d, err %v, progress %q; want 900, boom, and no \"done\"", n, err, progress.String())
		}
	})
	t.Run("count fails", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := Wait(ctx, func(context.Context) (int64, error) { return 0, boom }, time.Minute, time.Millisecond, io.Discard); !errors.Is(err, boom) {
			t.Fatalf("err %v, want boom", err)
		}
	})
}

// The backlog query runs against the real schema.
func TestBacklogQuery(t *testing.T) {
	testenv.Require(t, testenv.PostgresAddr())
	ctx := testenv.Context(t)
	pool, err := pgxpool.New(ctx, testenv.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n, err := Backlog(pool)(ctx); err != nil || n < 0 {
		t.Fatalf("backlog %d, %v", n, err)
	}
}
