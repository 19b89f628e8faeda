package stock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// slotState is one hash slot of a sharded sale, read at one instant.
type slotState struct {
	tag     string
	holders map[string]string
	journal map[string]string
	applied map[string]bool
	epoch   string
	stock   map[string]*int64 // stock or pool key -> units; nil when missing
}

// slotKeys lists the stock keys (pool keys for the base slot) of itemIDs
// held in slot tag.
func (l layout) slotKeys(tag string, itemIDs []int64) []string {
	out := make([]string, 0, len(itemIDs))
	for _, id := range itemIDs {
		if tag == l.base() {
			out = append(out, l.poolKey(id))
			continue
		}
		out = append(out, tag+":stock:"+strconv.FormatInt(id, 10))
	}
	return out
}

func (s *Store) readSlot(ctx context.Context, l layout, tag string, itemIDs []int64) (slotState, error) {
	stockKeys := l.slotKeys(tag, itemIDs)
	keys := append([]string{holdersOf(tag), journalOf(tag), appliedOf(tag), epochOf(tag)}, stockKeys...)
	res, err := s.slotRead.Exec(ctx, s.client, keys, nil).ToArray()
	if err != nil {
		return slotState{}, fmt.Errorf("read sale %d (%s): %w", l.sale, tag, err)
	}
	if len(res) != 5 {
		return slotState{}, fmt.Errorf("read sale %d (%s): %d replies, want 5", l.sale, tag, len(res))
	}
	st := slotState{tag: tag, applied: map[string]bool{}, stock: map[string]*int64{}}
	if st.holders, err = res[0].AsStrMap(); err != nil {
		return st, fmt.Errorf("read holders of sale %d (%s): %w", l.sale, tag, err)
	}
	if st.journal, err = res[1].AsStrMap(); err != nil {
		return st, fmt.Errorf("read moves of sale %d (%s): %w", l.sale, tag, err)
	}
	ids, err := res[2].AsStrSlice()
	if err != nil {
		return st, fmt.Errorf("read applied moves of sale %d (%s): %w", l.sale, tag, err)
	}
	for _, id := range ids {
		st.applied[id] = true
	}
	st.epoch, _ = res[3].ToString() // missing: "" matches no move
	vals, err := res[4].ToArray()
	if err != nil {
		return st, fmt.Errorf("read stock of sale %d (%s): %w", l.sale, tag, err)
	}
	if len(vals) != len(stockKeys) {
		return st, fmt.Errorf("read stock of sale %d (%s): %d values, want %d", l.sale, tag, len(vals), len(stockKeys))
	}
	for i, k := range stockKeys {
		if n, err := vals[i].AsInt64(); err == nil {
			st.stock[k] = &n
		}
	}
	return st, nil
}

// readSlots reads every slot, then reads the journals and applied sets
// again: if no move took, gave or finished in between, the slots form one
// consistent picture (a reservation or release changes one slot only, and
// each slot is read atomically). Otherwise it tries again, up to a bound.
func (s *Store) readSlots(ctx context.Context, l layout, itemIDs []int64) ([]slotState, error) {
	for range reconcileAttempts {
		states := make([]slotState, 0, l.shards+1)
		for _, tag := range l.slots() {
			st, err := s.readSlot(ctx, l, tag, itemIDs)
			if err != nil {
				return nil, err
			}
			states = append(states, st)
		}
		stable := true
		for _, st := range states {
			again, err := s.readSlot(ctx, l, st.tag, nil)
			if err != nil {
				return nil, err
			}
			if !maps.Equal(again.journal, st.journal) || len(again.applied) != len(st.applied) {
				stable = false
				break
			}
		}
		if stable {
			return states, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reconcile sale %d: %w", l.sale, err)
		}
	}
	return nil, fmt.Errorf("reconcile sale %d: %w", l.sale, ErrBusy)
}

// snapshotOf adds up the slots: units left per item are the pool, every
// shard and the moves taken but not yet given (void moves excluded); an
// item with any key missing is absent (not loaded).
func snapshotOf(l layout, itemIDs []int64, states []slotState) Snapshot {
	snap := Snapshot{Left: make(map[int64]int64, len(itemIDs)), Holders: map[string]string{}}
	byTag := make(map[string]slotState, len(states))
	for _, st := range states {
		byTag[st.tag] = st
		maps.Copy(snap.Holders, st.holders)
	}
	transit := map[int64]int64{}
	for _, st := range states {
		for _, e := range parseJournal(st.tag, st.journal) {
			dst, ok := byTag[tagOfKey(e.dst)]
			if !ok || dst.applied[e.id] || dst.epoch != e.epoch {
				continue
			}
			if id, ok := itemOfKey(e.dst); ok {
				transit[id] += e.units
			}
		}
	}
items:
	for _, id := range itemIDs {
		left := transit[id]
		for _, st := range states {
			for _, k := range l.slotKeys(st.tag, []int64{id}) {
				v := st.stock[k]
				if v == nil {
					continue items
				}
				left += *v
			}
		}
		snap.Left[id] = left
	}
	return snap
}

// reconcileSharded is Reconcile for a sale whose keys span several slots,
// where no WATCH can guard them all. It reads a consistent snapshot
// (readSlots) and asks decide. Only when decide wants a repair does it
// pause the sale: every stock and pool key is taken away (pause.lua, per
// slot, keeping the values), so reservations, releases and moves answer
// "not loaded" and nothing changes; it reads the holders again, asks decide
// once more on that frozen picture, and writes the Copy with Load. If
// decide fails or wants nothing after all, the paused values go back.
func (s *Store) reconcileSharded(ctx context.Context, l layout, itemIDs []int64,
	decide func(context.Context, Snapshot) (*Copy, error)) (Snapshot, error) {
	var snap Snapshot
	for attempt := 0; ; attempt++ {
		if attempt == reconcileAttempts {
			return snap, fmt.Errorf("reconcile sale %d: %w", l.sale, ErrBusy)
		}
		states, err := s.readSlots(ctx, l, itemIDs)
		if err != nil {
			return Snapshot{}, err
		}
		snap = snapshotOf(l, itemIDs, states)
		cp, err := decide(ctx, snap)
		if err != nil {
			return snap, err
		}
		if cp != nil {
			break // decided again below, paused: the copy written is consistent
		}
		// decide read PostgreSQL after the slots: a purchase or release in
		// between shows up there and not in the snapshot (a difference that
		// is not there). Only a snapshot that still holds after decide is a
		// verdict, as the unsharded round's EXEC under WATCH makes sure.
		again, err := s.readSlots(ctx, l, itemIDs)
		if err != nil {
			return Snapshot{}, err
		}
		if sameSlots(states, again) {
			return snap, nil
		}
		if err := ctx.Err(); err != nil {
			return snap, fmt.Errorf("reconcile sale %d: %w", l.sale, err)
		}
	}

	// From the pause on, the sale refuses every purchase until the keys are
	// back: putting them back (restore or Load) must not depend on the
	// caller's deadline, which may run out in between.
	finish := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	}
	restore := func(paused map[string]*int64) error {
		fctx, cancel := finish()
		defer cancel()
		return s.restore(fctx, paused)
	}
	paused := map[string]*int64{}
	for _, tag := range l.slots() {
		keys := l.slotKeys(tag, itemIDs)
		pairs := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			pairs = append(pairs, k, PauseMarker(k))
		}
		// On the finishing context too: a pause the caller's deadline cut
		// between Redis running it and its reply kept its slot's values
		// only in the markers.
		pctx, cancel := finish()
		vals, err := s.pause.Exec(pctx, s.client, pairs, []string{pauseMarkerLife}).ToArray()
		cancel()
		if err == nil && len(vals) != len(keys) {
			err = fmt.Errorf("%d values, want %d", len(vals), len(keys))
		}
		if err != nil {
			// The script may have run: this slot's values are in its
			// markers (pause.lua), and go back from there.
			fctx, cancel := finish()
			defer cancel()
			return snap, errors.Join(fmt.Errorf("reconcile sale %d: pause %s: %w", l.sale, tag, err), restore(paused),
				s.restoreFromMarkers(fctx, keys))
		}
		for i, k := range keys {
			if n, err := vals[i].AsInt64(); err == nil {
				paused[k] = &n
			} else {
				paused[k] = nil
			}
		}
	}
	states := make([]slotState, 0, l.shards+1)
	for _, tag := range l.slots() {
		st, err := s.readSlot(ctx, l, tag, itemIDs)
		if err != nil {
			return snap, errors.Join(err, restore(paused))
		}
		for k := range st.stock {
			st.stock[k] = nil
		}
		for _, k := range l.slotKeys(tag, itemIDs) {
			st.stock[k] = paused[k]
		}
		states = append(states, st)
	}
	snap = snapshotOf(l, itemIDs, states)
	cp, err := decide(ctx, snap)
	if err != nil || cp == nil {
		return snap, errors.Join(err, restore(paused))
	}
	fctx, cancel := finish()
	defer cancel()
	if err := s.Load(fctx, l.sale, cp.Items, cp.Holders); err != nil {
		return snap, fmt.Errorf("reconcile sale %d: the sale is paused (stock not loaded) until a repair succeeds: %w", l.sale, err)
	}
	return snap, nil
}

// sameSlots reports whether two reads of the same slots found the same
// state.
func sameSlots(a, b []slotState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.tag != y.tag || x.epoch != y.epoch || !maps.Equal(x.holders, y.holders) ||
			!maps.Equal(x.journal, y.journal) || !maps.Equal(x.applied, y.applied) ||
			!maps.EqualFunc(x.stock, y.stock, func(p, q *int64) bool { return (p == nil) == (q == nil) && (p == nil || *p == *q) }) {
			return false
		}
	}
	return true
}

// PauseMarker is the key that says stockKey is paused by a repair
// (pause.lua), in the same hash slot: the key's tag comes first.
func PauseMarker(stockKey string) string { return stockKey + ":paused" }

// pauseMarkerLife is how long a pause marker says so, in milliseconds: far
// beyond a repair's read, decision and write (finishTimeout bounds putting
// the keys back). Past it a missing key is taken for lost.
var pauseMarkerLife = strconv.Itoa(int(time.Minute.Milliseconds()))

// finishTimeout bounds putting a paused sale's keys back.
const finishTimeout = 10 * time.Second

// restoreFromMarkers puts back the values pause.lua kept in the markers of
// keys ("v:<n>"), where nothing wrote since: for a pause whose reply was
// lost.
func (s *Store) restoreFromMarkers(ctx context.Context, keys []string) error {
	paused := map[string]*int64{}
	for _, k := range keys {
		m, err := s.client.Do(ctx, s.client.B().Get().Key(PauseMarker(k)).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read pause marker of %s: %w", k, err)
		}
		if v, ok := strings.CutPrefix(m, "v:"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				paused[k] = &n
			}
		}
	}
	return s.restore(ctx, paused)
}

// restore puts back the values pause took, where nothing wrote since.
func (s *Store) restore(ctx context.Context, paused map[string]*int64) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(paused)) {
		v := paused[k]
		if v == nil {
			continue
		}
		err := s.client.Do(ctx, s.client.B().Set().Key(k).Value(strconv.FormatInt(*v, 10)).Nx().Build()).Error()
		if err != nil && !rueidis.IsRedisNil(err) {
			errs = append(errs, fmt.Errorf("restore %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
