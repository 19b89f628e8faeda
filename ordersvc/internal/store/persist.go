package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"flashsale/pkg/event"
)

// Kind is what became of one event of a batch.
type Kind int

const (
	// Accepted: a new PENDING order row.
	Accepted Kind = iota + 1
	// Rejected: a new, visible REJECTED row (Reason says why) whose unit goes
	// back to Redis through the stock_release outbox.
	Rejected
	// Duplicate: the order id was already stored, or appeared earlier in the
	// same batch. Status and Reason describe the stored row when it was read.
	Duplicate
	// Unpersistable: no row is possible (Reason ReasonUnknownItem); the
	// caller dead-letters the event and releases its reservation directly.
	Unpersistable
)

func (k Kind) String() string {
	switch k {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	case Duplicate:
		return "duplicate"
	case Unpersistable:
		return "unpersistable"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is the fate of one event of a batch.
type Outcome struct {
	Kind   Kind
	Status string // Duplicate: status of the stored row, "" when not read
	Reason string // Rejected, Unpersistable; Duplicate of a REJECTED row: its reason
}

// Redead reports whether a duplicate is a REJECTED row written by an earlier
// delivery, whose dead-letter message may have been lost in a crash between
// the commit and the produce; the caller dead-letters it again (the DLQ is
// at least once, keyed by the order-id header).
func (o Outcome) Redead() bool { return o.Kind == Duplicate && o.Status == StatusRejected }

const (
	// Locks the batch's items in id order, so concurrent consumers touching
	// the same items queue up instead of deadlocking.
	sqlLockItems = `
		SELECT i.id, i.sale_id, i.quantity - i.sold, (extract(epoch FROM s.payment_ttl) * 1000000)::bigint
		FROM flash_sale_item i JOIN flash_sale s ON s.id = i.sale_id
		WHERE i.id = ANY($1::bigint[])
		ORDER BY i.id
		FOR UPDATE OF i`
	sqlExisting = `
		SELECT id, status, coalesce(reject_reason, '')
		FROM flash_sale_order WHERE id = ANY($1::uuid[])`
	// One lookup in flash_sale_order_one_active per pair, whatever the
	// statistics say: the LATERAL subquery with LIMIT cannot be turned
	// into a join. As a plain join, after the order service had expired
	// most orders and an analyze counted almost no active one, the planner
	// read the sale's whole active set once per pair (a join filter over
	// 500 x 10,000 rows, 700 ms a batch, the last order of a demo
	// persisted 5 to 7 s late). TestActiveLookupSurvivesStaleStatistics.
	sqlActive = `
		SELECT u.sale_id, u.user_id
		FROM unnest($1::bigint[], $2::text[]) AS u(sale_id, user_id)
		CROSS JOIN LATERAL (
			SELECT 1 FROM flash_sale_order o
			WHERE o.sale_id = u.sale_id AND o.user_id = u.user_id AND o.status IN ('PENDING', 'PAID')
			LIMIT 1
		) active`
)

// sqlInsert writes a checked batch, sqlInsertFresh a fresh one (PersistBatch
// says which is which).
var (
	sqlInsert      = insertOrders("ON CONFLICT (id) DO NOTHING")
	sqlInsertFresh = insertOrders("")
)

// insertOrders is the one statement that writes a batch's orders, bumps each
// item's sold counter once (from the rows actually inserted, so a row lost
// to ON CONFLICT is not counted) and queues the units of REJECTED rows for
// release. Foreign keys are checked at the end of the statement, so
// stock_release may reference rows inserted by its sibling. onConflict is
// the INSERT's conflict clause: a checked batch skips an id stored since
// its check; a fresh batch has none, so that a stored id fails it.
func insertOrders(onConflict string) string {
	return `
		WITH input AS (
			SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[],
			                     $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[])
			  AS t(id, sale_id, item_id, user_id, status, created_at, expires_at, reject_reason, admission_id)
		), ins AS (
			INSERT INTO flash_sale_order
			  (id, sale_id, item_id, user_id, status, created_at, expires_at, reject_reason, closed_at, admission_id)
			SELECT id, sale_id, item_id, user_id, status, created_at, expires_at, nullif(reject_reason, ''),
			       CASE WHEN status = 'REJECTED' THEN now() END, nullif(admission_id, '')
			FROM input
			` + onConflict + `
			RETURNING id, sale_id, item_id, user_id, status, reject_reason
		), sold AS (
			UPDATE flash_sale_item i SET sold = i.sold + c.n
			FROM (SELECT item_id, count(*)::int AS n FROM ins WHERE status = 'PENDING' GROUP BY item_id) c
			WHERE i.id = c.item_id
		), outbox AS (
			INSERT INTO stock_release (order_id, sale_id, item_id, user_id, reason)
			SELECT id, sale_id, item_id, user_id,
			       CASE WHEN reject_reason = 'SOLD_OUT_IN_DB' THEN 'REJECTED_SOLD_OUT' ELSE 'REJECTED' END
			FROM ins WHERE status = 'REJECTED'
			ON CONFLICT (order_id) DO NOTHING
		)
		SELECT id FROM ins`
}

type lockedItem struct {
	saleID int64
	left   int64
	ttl    time.Duration
}

type saleUser struct {
	saleID int64
	userID string
}

type existingOrder struct {
	status, reason string
}

// PersistBatch turns a batch of events into order rows in one transaction
// and returns the outcome of each event, in input order. The hot item rows
// are locked and updated once per item per batch, not once per order;
// idempotency is by order id, guarded by the primary key, not by a
// pre-check alone.
//
// A batch is first written fresh: every order new and every shopper
// without an active order, which is what a sale's consumer meets but for a
// redelivery or a repeat buyer. Only the items are read before the insert,
// and the insert has no conflict clause, so the primary key and the
// one-active-order index refuse the whole batch if it was not fresh; it is
// then written again, checked: the orders already stored and the shoppers
// already active are read first, and each event is decided against them.
// A fresh write is tried only when every first-of-its-id event would be
// Accepted against its item, and commits only when no stored row or active
// order was in its way, so it ends as the checked write would have. (With
// a shopper's order being cancelled or expired at that moment, the fresh
// write waits for that to commit and accepts her new order, where the
// checked write, reading before the commit, would have rejected it as
// ALREADY_ACTIVE: either is right.) A refused fresh insert leaves
// PostgreSQL's log a duplicate-key ERROR; a conflict clause instead would
// cost every order of every batch most of what the fresh write saves.
//
// Any error leaves the database untouched and the batch must be retried
// whole; ErrActiveConflict marks the one race a retry resolves.
func (s *Store) PersistBatch(ctx context.Context, events []event.OrderPlaced) ([]Outcome, error) {
	out := make([]Outcome, len(events))
	uniq := dedupe(events, out)
	if len(uniq) == 0 {
		return out, nil
	}
	cause, err := s.persistFresh(ctx, events, uniq, out)
	if err != nil {
		return nil, fmt.Errorf("persist batch: %w", err)
	}
	if cause == "" {
		return out, nil
	}
	if err := s.persistChecked(ctx, events, uniq, out); err != nil {
		return nil, fmt.Errorf("persist batch: %w", err)
	}
	s.checked.add(cause)
	return out, nil
}

// Why a batch was written checked (CheckedBatches).
const (
	// CheckedRejection: an event of the batch would not be accepted against
	// its item (sold out in PostgreSQL, a repeat in the batch, an unknown
	// item), so no fresh write was tried.
	CheckedRejection = "rejection"
	// CheckedConflict: the fresh insert met a stored order id or an active
	// order of the same shopper, or waited on one past freshLockTimeout.
	CheckedConflict = "conflict"
)

// freshLockTimeout bounds a fresh insert's wait for another transaction
// that holds one of its keys: a redelivered order, or a shopper's active
// order, being cancelled or expired. That transaction may be waiting for
// the item row this batch holds (a cancel updates the order, then its
// item), so the fresh write gives up rather than wait for PostgreSQL's
// deadlock detector, and is written checked, which reads such an order
// instead of inserting over it.
const freshLockTimeout = "50ms"

// persistFresh writes the events of uniq as new orders of shoppers without
// an active order, setting their outcomes in out. It returns "" when it
// did, or why the batch must be written checked (CheckedRejection,
// CheckedConflict), having written nothing; out must then be decided
// again.
func (s *Store) persistFresh(ctx context.Context, events []event.OrderPlaced, uniq []int, out []Outcome) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op; on failure the tx is gone anyway

	itemIDs := batchItems(events, uniq)
	b := &pgx.Batch{}
	b.Queue(sqlLockItems, itemIDs)
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, freshLockTimeout)
	br := tx.SendBatch(ctx, b)
	items, err := readLockedItems(br, len(itemIDs))
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("lock items: %w", err)
	}
	pc := &prechecks{items: items, existing: map[uuid.UUID]existingOrder{}, active: make(map[saleUser]bool, len(uniq))}
	plan := pc.plan(events, uniq, out)
	for _, i := range uniq {
		if out[i].Kind != Accepted {
			return CheckedRejection, nil
		}
	}
	if _, err := tx.Exec(ctx, sqlInsertFresh, plan.args()...); err != nil {
		if notFresh(err) {
			return CheckedConflict, nil
		}
		return "", fmt.Errorf("insert: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return "", nil
}

// notFresh reports whether a fresh insert failed on a stored order id or on
// an active order of the same shopper, or gave up waiting for the
// transaction that holds one (freshLockTimeout, or the deadlock detector).
func notFresh(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return false
	}
	switch pgErr.Code {
	case "23505": // unique_violation
		return pgErr.ConstraintName == "flash_sale_order_pkey" || pgErr.ConstraintName == "flash_sale_order_one_active"
	case "55P03", "40P01": // lock_not_available, deadlock_detected
		return true
	}
	return false
}

// persistChecked writes the events of uniq after reading which of them are
// stored already and which of their shoppers are active, and sets their
// outcomes in out.
func (s *Store) persistChecked(ctx context.Context, events []event.OrderPlaced, uniq []int, out []Outcome) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op; on failure the tx is gone anyway

	pc, err := precheck(ctx, tx, events, uniq)
	if err != nil {
		return err
	}
	plan := pc.plan(events, uniq, out)
	if plan.len() > 0 {
		inserted, err := insert(ctx, tx, plan)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		plan.markLost(inserted, out)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// dedupe marks in out every event whose order id appeared earlier in the
// batch as a Duplicate (the first copy decides), and returns the indexes
// of the first copies, in batch order.
func dedupe(events []event.OrderPlaced, out []Outcome) []int {
	firstOf := make(map[uuid.UUID]int, len(events))
	uniq := make([]int, 0, len(events))
	for i, e := range events {
		if _, dup := firstOf[e.OrderID]; dup {
			out[i] = Outcome{Kind: Duplicate}
			continue
		}
		firstOf[e.OrderID] = i
		uniq = append(uniq, i)
	}
	return uniq
}

// prechecks is what PostgreSQL says of a batch before it is decided: its
// items (locked), the orders already stored, and the (sale, user) pairs
// that already hold an active order. decide consumes it.
type prechecks struct {
	items    map[int64]*lockedItem
	existing map[uuid.UUID]existingOrder
	active   map[saleUser]bool
}

// precheck locks the batch's items, finds the orders already stored and
// the users already active, in one round trip. Under READ COMMITTED each
// statement takes its snapshot when it starts, i.e. after the item locks
// are held, so rows committed by a consumer that held those locks before
// us are seen.
func precheck(ctx context.Context, tx pgx.Tx, events []event.OrderPlaced, uniq []int) (*prechecks, error) {
	itemIDs := batchItems(events, uniq)
	orderIDs := make([]uuid.UUID, 0, len(uniq))
	pairSales := make([]int64, 0, len(uniq))
	pairUsers := make([]string, 0, len(uniq))
	pairSeen := make(map[saleUser]bool, len(uniq))
	for _, i := range uniq {
		e := events[i]
		orderIDs = append(orderIDs, e.OrderID)
		if k := (saleUser{e.SaleID, e.UserID}); !pairSeen[k] {
			pairSeen[k] = true
			pairSales = append(pairSales, e.SaleID)
			pairUsers = append(pairUsers, e.UserID)
		}
	}

	b := &pgx.Batch{}
	b.Queue(sqlLockItems, itemIDs)
	b.Queue(sqlExisting, uuidArray(orderIDs))
	b.Queue(sqlActive, pairSales, pairUsers)
	br := tx.SendBatch(ctx, b)
	pc, err := readPrechecks(br, len(itemIDs), len(uniq))
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return pc, err
}

// batchItems returns the item ids of the events of uniq, sorted, each once:
// the order in which sqlLockItems locks them.
func batchItems(events []event.OrderPlaced, uniq []int) []int64 {
	ids := make([]int64, 0, 8)
	for _, i := range uniq {
		ids = append(ids, events[i].ItemID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// plan decides the events of uniq in batch order, sets their outcomes in
// out and returns the rows to insert. The user becomes active with the
// first accepted order, so later ones in the batch are ALREADY_ACTIVE.
func (pc *prechecks) plan(events []event.OrderPlaced, uniq []int, out []Outcome) *batchPlan {
	plan := newBatchPlan(len(uniq))
	for _, i := range uniq {
		var row orderRow
		var write bool
		out[i], row, write = pc.decide(events[i])
		if write {
			row.event = i
			plan.add(row)
		}
	}
	return plan
}

// orderRow is one row of the INSERT and the event it came from.
type orderRow struct {
	event   int // index in the batch
	order   event.OrderPlaced
	status  string
	reason  string
	expires time.Time
}

// decide settles one first-of-its-id event against the prechecks: a
// Duplicate or Unpersistable outcome writes no row (write is false);
// otherwise the order is accepted (taking a unit and making its user
// active, for the events after it in the batch) or rejected, and row is
// what to insert.
func (pc *prechecks) decide(e event.OrderPlaced) (o Outcome, row orderRow, write bool) {
	if ex, ok := pc.existing[e.OrderID]; ok {
		return Outcome{Kind: Duplicate, Status: ex.status, Reason: ex.reason}, orderRow{}, false
	}
	it, ok := pc.items[e.ItemID]
	if !ok || it.saleID != e.SaleID {
		return Outcome{Kind: Unpersistable, Reason: ReasonUnknownItem}, orderRow{}, false
	}
	k := saleUser{e.SaleID, e.UserID}
	row = orderRow{order: e, status: StatusPending, expires: e.PlacedAt.Add(it.ttl)}
	switch {
	case pc.active[k]:
		row.status, row.reason, row.expires = StatusRejected, ReasonAlreadyActive, e.PlacedAt
	case it.left <= 0:
		row.status, row.reason, row.expires = StatusRejected, ReasonSoldOutInDB, e.PlacedAt
	default:
		it.left--
		pc.active[k] = true
	}
	if row.status == StatusPending {
		return Outcome{Kind: Accepted}, row, true
	}
	return Outcome{Kind: Rejected, Reason: row.reason}, row, true
}

// batchPlan is the rows of one sqlInsert, held as the statement takes
// them: one slice per unnest column, plus the event each row came from.
type batchPlan struct {
	ids        []uuid.UUID
	sales      []int64
	items      []int64
	users      []string
	statuses   []string
	createdAts []time.Time
	expiresAts []time.Time
	reasons    []string
	admissions []string
	events     []int // event index per row
}

func newBatchPlan(n int) *batchPlan {
	return &batchPlan{
		ids:        make([]uuid.UUID, 0, n),
		sales:      make([]int64, 0, n),
		items:      make([]int64, 0, n),
		users:      make([]string, 0, n),
		statuses:   make([]string, 0, n),
		createdAts: make([]time.Time, 0, n),
		expiresAts: make([]time.Time, 0, n),
		reasons:    make([]string, 0, n),
		admissions: make([]string, 0, n),
		events:     make([]int, 0, n),
	}
}

// add appends one row to every column.
func (p *batchPlan) add(r orderRow) {
	p.ids = append(p.ids, r.order.OrderID)
	p.sales = append(p.sales, r.order.SaleID)
	p.items = append(p.items, r.order.ItemID)
	p.users = append(p.users, r.order.UserID)
	p.statuses = append(p.statuses, r.status)
	p.createdAts = append(p.createdAts, r.order.PlacedAt)
	p.expiresAts = append(p.expiresAts, r.expires)
	p.reasons = append(p.reasons, r.reason)
	admission := r.order.AdmissionID
	if !event.ValidAdmissionID(admission) {
		admission = "" // the column's check would refuse the whole batch
	}
	p.admissions = append(p.admissions, admission)
	p.events = append(p.events, r.event)
}

func (p *batchPlan) len() int { return len(p.ids) }

// args are sqlInsert's parameters $1 to $9, in order.
func (p *batchPlan) args() []any {
	return []any{uuidArray(p.ids), p.sales, p.items, p.users, p.statuses, p.createdAts, p.expiresAts, p.reasons, p.admissions}
}

// markLost marks as Duplicate, in out, the planned rows that the INSERT
// did not return: another writer stored those ids between our check and
// insert (the item locks make this rare), so the rows are theirs.
func (p *batchPlan) markLost(inserted []uuid.UUID, out []Outcome) {
	if len(inserted) == p.len() {
		return
	}
	got := make(map[uuid.UUID]bool, len(inserted))
	for _, id := range inserted {
		got[id] = true
	}
	for r, id := range p.ids {
		if !got[id] {
			out[p.events[r]] = Outcome{Kind: Duplicate}
		}
	}
}

// insert writes the plan with sqlInsert and returns the ids it inserted.
// A race for the one-active-order index is ErrActiveConflict.
func insert(ctx context.Context, tx pgx.Tx, plan *batchPlan) ([]uuid.UUID, error) {
	rows, err := tx.Query(ctx, sqlInsert, plan.args()...)
	if err != nil {
		return nil, err
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "flash_sale_order_one_active" {
			return nil, fmt.Errorf("%w: %w", ErrActiveConflict, err)
		}
		return nil, err
	}
	return inserted, nil
}

// readPrechecks reads the results of precheck's three statements, in the
// order they were queued.
func readPrechecks(br pgx.BatchResults, nItems, nOrders int) (*prechecks, error) {
	items, err := readLockedItems(br, nItems)
	if err != nil {
		return nil, fmt.Errorf("lock items: %w", err)
	}
	existing, err := readExisting(br)
	if err != nil {
		return nil, fmt.Errorf("find existing orders: %w", err)
	}
	active, err := readActive(br, nOrders)
	if err != nil {
		return nil, fmt.Errorf("find active users: %w", err)
	}
	return &prechecks{items: items, existing: existing, active: active}, nil
}

// readLockedItems reads sqlLockItems: each item's sale, units left and
// payment TTL.
func readLockedItems(br pgx.BatchResults, n int) (map[int64]*lockedItem, error) {
	items := make(map[int64]*lockedItem, n)
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, micros int64
		it := &lockedItem{}
		if err := rows.Scan(&id, &it.saleID, &it.left, &micros); err != nil {
			rows.Close()
			return nil, err
		}
		it.ttl = time.Duration(micros) * time.Microsecond
		items[id] = it
	}
	return items, rows.Err()
}

// readExisting reads sqlExisting: the batch's orders already stored.
func readExisting(br pgx.BatchResults) (map[uuid.UUID]existingOrder, error) {
	existing := map[uuid.UUID]existingOrder{}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id uuid.UUID
		var ex existingOrder
		if err := rows.Scan(&id, &ex.status, &ex.reason); err != nil {
			rows.Close()
			return nil, err
		}
		existing[id] = ex
	}
	return existing, rows.Err()
}

// readActive reads sqlActive: the batch's (sale, user) pairs that already
// hold an active order.
func readActive(br pgx.BatchResults, n int) (map[saleUser]bool, error) {
	active := make(map[saleUser]bool, n)
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k saleUser
		if err := rows.Scan(&k.saleID, &k.userID); err != nil {
			rows.Close()
			return nil, err
		}
		active[k] = true
	}
	return active, rows.Err()
}
