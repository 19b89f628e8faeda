// Package queue is the virtual waiting room of a sale, kept in Redis so that
// every gateway sees the same order: join (idempotent per user), status
// (which also keeps a place alive) and advance (admission at the operator's
// rate, skipping abandoned places).
package queue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/lua"
)

// Outcomes of Status.
var (
	ErrUnknownTicket = errors.New("queue: unknown ticket")
	ErrTicketExpired = errors.New("queue: the ticket lost its place")
)

// Queue runs the queue scripts.
type Queue struct {
	client   rueidis.Client
	join     *rueidis.Lua
	status   *rueidis.Lua
	advance  *rueidis.Lua
	size     *rueidis.Lua
	grace    time.Duration
	maxSteps int
}

// maxSteps bounds the places one admission round walks. The round's
// script holds the sale's Redis node meanwhile, 2–3 µs a place when the
// places are abandoned (BenchmarkAdvanceOverAbandoned: 5.9 ms for 2,000),
// and each gateway still walks 20,000 places a second at its 100 ms
// rounds. It was 20,000, read a place at a time: a 73 ms stall of every
// reserve on the node whenever a crowd had left.
const maxSteps = 2000

// New wraps a client. grace is how long a place survives without a poll.
func New(client rueidis.Client, grace time.Duration) *Queue {
	return &Queue{
		client:   client,
		join:     rueidis.NewLuaScript(lua.QueueJoin),
		status:   rueidis.NewLuaScript(lua.QueueStatus),
		advance:  rueidis.NewLuaScript(lua.QueueAdvance),
		size:     rueidis.NewLuaScript(lua.QueueSize),
		grace:    grace,
		maxSteps: maxSteps,
	}
}

// Grace is how long a place survives without a poll.
func (q *Queue) Grace() time.Duration { return q.grace }

func key(saleID int64, name string) string {
	return "{fs:" + strconv.FormatInt(saleID, 10) + "}:q:" + name
}

// Join gives userID a place (the same one when called again) and returns
// the ticket id. Before opensAt, with draw, the place is decided by a random
// draw at the opening; otherwise by arrival.
func (q *Queue) Join(ctx context.Context, saleID int64, opensAt time.Time, draw bool, userID string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("queue join: %w", err)
	}
	ticket := hex.EncodeToString(b[:16])
	drawKey := binary.BigEndian.Uint64(b[16:]) >> 12 // 52 bits: exact in a Redis score
	d := "0"
	if draw {
		d = "1"
	}
	got, err := q.join.Exec(ctx, q.client,
		[]string{key(saleID, "pre"), key(saleID, "post"), key(saleID, "users"), key(saleID, "tix"), key(saleID, "seen"), key(saleID, "dead"), key(saleID, "seq"), key(saleID, "adm")},
		[]string{userID, ticket, strconv.FormatUint(drawKey, 10), strconv.FormatInt(opensAt.UnixMilli(), 10), d}).ToString()
	if err != nil {
		return "", fmt.Errorf("queue join sale %d: %w", saleID, err)
	}
	return got, nil
}

// keyNames are the keys of a sale's queue (the spent admission tokens
// beside them are the stock scripts', which keep them a week).
var keyNames = []string{"pre", "post", "users", "tix", "seen", "dead", "seq", "adm"}

// Expire makes every key of each sale's queue expire at its time (sale
// id -> time), in one pipeline (rueidis sends it to each node at once). A
// queue serves nothing once its sale has ended; without an expiry its keys
// (a few hundred bytes per shopper who joined) stayed in Redis for good.
func (q *Queue) Expire(ctx context.Context, at map[int64]time.Time) error {
	cmds := make(rueidis.Commands, 0, len(at)*len(keyNames))
	for saleID, t := range at {
		for _, name := range keyNames {
			cmds = append(cmds, q.client.B().Pexpireat().Key(key(saleID, name)).MillisecondsTimestamp(t.UnixMilli()).Build())
		}
	}
	var errs []error
	for _, r := range q.client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("queue expiry of %d sales: %d of %d commands failed: %w", len(at), len(errs), len(cmds), errs[0])
	}
	return nil
}

// Status is where a ticket stands.
type Status struct {
	// Position in the queue, from 1; 0 while the early joiners are not drawn.
	Position int64
	// Admitted is how many places have been admitted so far.
	Admitted int64
	// Size is how many places were handed out.
	Size int64
	// UserID holds the ticket.
	UserID string
}

// IsAdmitted reports whether the place has been reached.
func (s Status) IsAdmitted() bool { return s.Position > 0 && s.Position <= s.Admitted }

// Status reads a ticket's place and keeps it alive. A ticket of another
// user than userID is unknown (ErrUnknownTicket), and that poll keeps
// nothing alive; userID "" asks as anyone (tools, tests).
func (q *Queue) Status(ctx context.Context, saleID int64, opensAt time.Time, ticket, userID string) (Status, error) {
	v, err := q.status.Exec(ctx, q.client,
		[]string{key(saleID, "pre"), key(saleID, "post"), key(saleID, "tix"), key(saleID, "seen"), key(saleID, "dead"), key(saleID, "adm")},
		[]string{ticket, strconv.FormatInt(opensAt.UnixMilli(), 10), userID}).ToArray()
	if err != nil {
		return Status{}, fmt.Errorf("queue status sale %d: %w", saleID, err)
	}
	if len(v) != 5 {
		return Status{}, fmt.Errorf("queue status sale %d: %d values", saleID, len(v))
	}
	code, _ := v[0].AsInt64()
	var st Status
	st.Position, _ = v[1].AsInt64()
	st.Admitted, _ = v[2].AsInt64()
	st.Size, _ = v[3].AsInt64()
	st.UserID, _ = v[4].ToString()
	switch code {
	case -1:
		return st, ErrUnknownTicket
	case -2:
		return st, ErrTicketExpired
	}
	return st, nil
}

// Advance admits what the elapsed time allows at the sale's rate
// (defaultRate until an operator sets one). soldOut stops admission.
func (q *Queue) Advance(ctx context.Context, saleID int64, opensAt time.Time, defaultRate float64, soldOut bool) (admitted int64, rate float64, err error) {
	so := "0"
	if soldOut {
		so = "1"
	}
	v, err := q.advance.Exec(ctx, q.client,
		[]string{key(saleID, "pre"), key(saleID, "post"), key(saleID, "users"), key(saleID, "tix"), key(saleID, "seen"), key(saleID, "dead"), key(saleID, "adm")},
		[]string{strconv.FormatInt(opensAt.UnixMilli(), 10), strconv.FormatFloat(defaultRate, 'f', -1, 64),
			strconv.FormatInt(q.grace.Milliseconds(), 10), so, strconv.Itoa(q.maxSteps)}).ToArray()
	if err != nil {
		return 0, 0, fmt.Errorf("queue advance sale %d: %w", saleID, err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("queue advance sale %d: %d values", saleID, len(v))
	}
	admitted, _ = v[0].AsInt64()
	rs, _ := v[1].ToString() // as text: Lua numbers would come back truncated
	rate, _ = strconv.ParseFloat(rs, 64)
	return admitted, rate, nil
}

// Length is a sale's queue at one instant.
type Length struct {
	// Waiting is how many places admission has not reached yet, counting
	// those whose holders left (admission skips them when it gets there).
	Waiting int64 `json:"waiting"`
	// Joined is how many places were handed out; Admitted how many were
	// reached (admitted or skipped).
	Joined   int64 `json:"joined"`
	Admitted int64 `json:"admitted"`
}

// Size reads how long the queue is without walking it (two ZCARDs and an
// HGET in one script), cheap enough for a dashboard's every refresh.
func (q *Queue) Size(ctx context.Context, saleID int64) (Length, error) {
	v, err := q.size.Exec(ctx, q.client,
		[]string{key(saleID, "pre"), key(saleID, "post"), key(saleID, "adm")}, nil).AsIntSlice()
	if err != nil {
		return Length{}, fmt.Errorf("queue size sale %d: %w", saleID, err)
	}
	if len(v) != 3 {
		return Length{}, fmt.Errorf("queue size sale %d: %d values", saleID, len(v))
	}
	return Length{Waiting: v[0], Joined: v[1], Admitted: v[2]}, nil
}

// SetRate changes a sale's admission rate (per second) for every gateway.
func (q *Queue) SetRate(ctx context.Context, saleID int64, rate float64) error {
	if rate < 0 {
		return fmt.Errorf("queue rate %v: must not be negative", rate)
	}
	err := q.client.Do(ctx, q.client.B().Hset().Key(key(saleID, "adm")).FieldValue().
		FieldValue("rate", strconv.FormatFloat(rate, 'f', -1, 64)).Build()).Error()
	if err != nil {
		return fmt.Errorf("set admission rate of sale %d: %w", saleID, err)
	}
	return nil
}

// Rate reads a sale's admission rate; ok is false when none was set.
func (q *Queue) Rate(ctx context.Context, saleID int64) (float64, bool, error) {
	s, err := q.client.Do(ctx, q.client.B().Hget().Key(key(saleID, "adm")).Field("rate").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read admission rate of sale %d: %w", saleID, err)
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("admission rate of sale %d: %q", saleID, s)
	}
	return r, true, nil
}
