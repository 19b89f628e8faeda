// Package ratelimit keeps token buckets (golang.org/x/time/rate) per key,
// per user or per client IP, in a sharded map so that lock contention stays
// off the hot path, with idle buckets evicted so memory stays bounded under
// hundreds of thousands of distinct keys. Rules change live.
package ratelimit

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Rule is a bucket's refill rate (per second) and burst. A zero Rate
// disables the limit.
type Rule struct {
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

// Enabled reports whether the rule limits anything.
func (r Rule) Enabled() bool { return r.Rate > 0 }

// The bounds of a rule that limits (Validate). Outside them the token
// bucket misbehaves: below MinRate x/time/rate's wait for one token
// overflows time.Duration (1e-11 lets every request through, 1e-10 refuses
// even the first), and a burst so large that it never refills in a
// Duration keeps every bucket from counting as idle, so none is evicted.
const (
	MinRate  = 1e-3 // one request in about 17 minutes
	MaxRate  = 1e6
	MaxBurst = 1_000_000
)

// Validate reports why r cannot work: off (Rate 0, a Burst in [0,
// MaxBurst], kept as given) or a finite Rate in [MinRate, MaxRate] with a
// Burst in [1, MaxBurst]. NaN and Inf (which strconv.ParseFloat takes)
// would turn a limit off or let all through, and break every JSON answer
// that shows the rule; a rule turned off with a burst past MaxBurst was
// taken, and every answer that showed it broke the API's schema.
func (r Rule) Validate() error {
	switch {
	case r.Rate == 0 && (r.Burst < 0 || r.Burst > MaxBurst):
		return fmt.Errorf("burst %d: want 0..%d", r.Burst, MaxBurst)
	case r.Rate == 0:
		return nil
	case math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) || r.Rate < MinRate || r.Rate > MaxRate:
		return fmt.Errorf("rate %v: want 0 (off) or %v..%v per second", r.Rate, MinRate, MaxRate)
	case r.Burst < 1 || r.Burst > MaxBurst:
		return fmt.Errorf("burst %d: want 1..%d", r.Burst, MaxBurst)
	}
	return nil
}

// MinPollRate is the least rate a shopper's polls may be limited to: the
// waiting room never advises a poll sooner than 500 ms after the last,
// and a shopper who follows the advice must not be refused (her place
// lapses past the grace without a poll).
const MinPollRate = 2

// ValidatePoll is Validate for the polls' rule, which must also allow the
// advised polls: off, or at least MinPollRate with a burst of at least 2,
// so that a poll a little early on the advice still passes.
func ValidatePoll(r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Enabled() && (r.Rate < MinPollRate || r.Burst < 2) {
		return fmt.Errorf("rate %v, burst %d: want off, or at least %v per second with a burst of at least 2 (the waiting room advises a poll every 500 ms at the most)", r.Rate, r.Burst, MinPollRate)
	}
	return nil
}

const numShards = 64

// Limiter is a set of buckets sharing one rule.
type Limiter struct {
	seed     maphash.Seed
	shards   [numShards]shard
	rule     atomic.Pointer[versioned]
	maxKeys  int // per shard; past it new keys are not tracked (fail open)
	overflow atomic.Uint64
}

type versioned struct {
	Rule
	version uint64
}

type shard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	lim      *rate.Limiter
	version  atomic.Uint64
	lastSeen atomic.Int64 // unix nanoseconds
}

// New creates a limiter holding at most maxKeys buckets in all.
func New(r Rule, maxKeys int) *Limiter {
	l := &Limiter{seed: maphash.MakeSeed(), maxKeys: max(1, maxKeys/numShards)}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*bucket)
	}
	l.rule.Store(&versioned{Rule: r, version: 1})
	return l
}

// Rule returns the rule in force.
func (l *Limiter) Rule() Rule { return l.rule.Load().Rule }

// SetRule changes the rule; existing buckets pick it up on their next use.
// Two changes at once (an operator's PUT and a SIGHUP reload) get versions
// of their own: sharing one, a bucket that took the first rule would keep
// it while Rule reported the second.
func (l *Limiter) SetRule(r Rule) {
	for {
		old := l.rule.Load()
		if l.rule.CompareAndSwap(old, &versioned{Rule: r, version: old.version + 1}) {
			return
		}
	}
}

// Allow takes a token from key's bucket. When refused it also says how
// long until a token is back, for Retry-After. The bucket is asked at the
// moment of the call (not with a time carried from elsewhere), which is what
// keeps x/time/rate exact under contention.
func (l *Limiter) Allow(key []byte) (bool, time.Duration) {
	r := l.rule.Load()
	if !r.Enabled() {
		return true, 0
	}
	b := l.bucket(key, r)
	if b == nil {
		return true, 0 // table full: fail open rather than refuse everyone
	}
	if b.lim.Allow() {
		return true, 0
	}
	return false, time.Duration(math.Ceil(float64(time.Second) / r.Rate))
}

func (l *Limiter) bucket(key []byte, r *versioned) *bucket {
	s := &l.shards[maphash.Bytes(l.seed, key)%numShards]
	now := time.Now().UnixNano()
	s.mu.Lock()
	b, ok := s.m[string(key)] // no allocation for the lookup
	if !ok {
		if len(s.m) >= l.maxKeys {
			s.evictIdle(now, 0, evictSample, true)
			if len(s.m) >= l.maxKeys {
				s.mu.Unlock()
				l.overflow.Add(1)
				return nil
			}
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(r.Rate), r.Burst)}
		b.version.Store(r.version)
		s.m[string(key)] = b
	}
	// Under the shard's lock, and only forward: a call that loaded the rule
	// just before a change must not put the older rule back (or half of it:
	// the limit of one and the burst of the other).
	if b.version.Load() < r.version {
		b.lim.SetLimit(rate.Limit(r.Rate))
		b.lim.SetBurst(r.Burst)
		b.version.Store(r.version)
	}
	s.mu.Unlock()
	b.lastSeen.Store(now)
	return b
}

// evictSample bounds the buckets a new key examines for room when its
// shard is full: it stops at the first one it can evict. Examining the
// whole shard (15,625 buckets at the default FLASHSALE_LIMIT_MAX_KEYS)
// under its lock for every new key made each request of a crowd of new
// keys, against a table of busy buckets, cost about 4 ms and held up every
// key of the shard meanwhile; 32 cost about 17 µs, most of it cache misses
// (BenchmarkAllowFullTable). A map's iteration starts at a random place,
// so when a share p of the shard's buckets has refilled a new key finds
// room but for (1-p)^32 of the time (3 % at p = 10 %); when none has, it
// is not tracked (fail open, counted in Overflows), and Sweep evicts the
// idle ones every 30 s.
const evictSample = 32

// evictIdle removes buckets that are full again (idle long enough to have
// refilled) and unused for longer than idle, examining at most limit of
// them (0: all), and stopping at the first eviction when one is enough.
// Called with s.mu held.
func (s *shard) evictIdle(now int64, idle time.Duration, limit int, one bool) int {
	n, seen := 0, 0
	for k, b := range s.m {
		full := b.lim.TokensAt(time.Unix(0, now)) >= float64(b.lim.Burst())
		if full && (idle == 0 || now-b.lastSeen.Load() > int64(idle)) {
			delete(s.m, k)
			if n++; one {
				break
			}
		}
		if seen++; seen == limit {
			break
		}
	}
	return n
}

// Sweep evicts buckets idle for longer than idle and returns how many.
// A full bucket carries no state, so dropping it changes no answer.
func (l *Limiter) Sweep(idle time.Duration) int {
	now := time.Now().UnixNano()
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += s.evictIdle(now, idle, 0, false)
		s.mu.Unlock()
	}
	return n
}

// Len is the number of buckets held.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// MaxKeys is how many buckets the limiter holds at most (its shards' room
// in all; New rounds the asked number down to a multiple of the shards).
func (l *Limiter) MaxKeys() int { return l.maxKeys * numShards }

// Overflows counts keys that were not tracked because the table was full.
func (l *Limiter) Overflows() uint64 { return l.overflow.Load() }
