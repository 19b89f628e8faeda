// Package audit checks the invariants of docs/design.md for one sale
// against what the crowd was told: every 202 has its row, nothing is
// oversold, stock is conserved between Redis and PostgreSQL, one active order per user.
package audit

import (
	"flashsale/pkg/event"
	"slices"
	"strings"

	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"flashsale/pkg/stock"
)

// PublishFailed is the reject_reason of the row a gateway writes for an
// order whose publish it gave up on (gateway/internal/purchase).
const PublishFailed = event.RejectPublishFailed

// Item is the audit of one item.
type Item struct {
	ID        int64 `json:"id"`
	Quantity  int64 `json:"quantity"`
	Sold      int64 `json:"sold"`      // flash_sale_item.sold
	Active    int64 `json:"active"`    // PENDING + PAID rows
	Rejected  int64 `json:"rejected"`  // REJECTED rows
	RedisLeft int64 `json:"redisLeft"` // -1 when the key is missing
}

// Verdict is the outcome of an audit.
type Verdict struct {
	// Oversold counts units sold beyond quantity, in PostgreSQL rows or in
	// Redis (a negative stock).
	Oversold int64 `json:"oversold"`
	// Lost counts 202 answers with no order row.
	Lost int64 `json:"lost"`
	// Duplicates counts rows nobody was told about plus active orders
	// beyond one per user.
	Duplicates int64 `json:"duplicates"`
	// StockConserved: for every item Redis left + active = quantity and
	// sold = active, and Redis holders match active orders.
	StockConserved bool `json:"stock_conserved"`
	// UnreleasedRejects counts REJECTED orders whose unit was not given back yet.
	UnreleasedRejects int64    `json:"unreleased_rejects"`
	Items             []Item   `json:"items"`
	Problems          []string `json:"problems,omitempty"`
}

// OK reports whether every invariant holds.
func (v Verdict) OK() bool {
	return v.Oversold == 0 && v.Lost == 0 && v.Duplicates == 0 && v.StockConserved && v.UnreleasedRejects == 0
}

// facts is what PostgreSQL and Redis hold for one sale, read without
// judging it: judge decides what it means.
type facts struct {
	items []itemFacts
	// orders are every row of the sale, in the order PostgreSQL returned them.
	orders []orderRow
	// holders are the buyers Redis holds a unit for: user -> order id.
	holders map[string]string
	// unreleased counts ended orders whose unit was not given back yet.
	unreleased int64
}

// itemFacts is an item's PostgreSQL row and its Redis stock (RedisLeft).
// A missing key is a flag here, not RedisLeft -1: a stock of -1 in Redis
// is an oversell.
type itemFacts struct {
	Item
	redisMissing bool
}

// orderRow is one flash_sale_order row.
type orderRow struct {
	id, user, status, reason string
}

// Run audits saleID. accepted maps every order id answered with 202 to the
// user it was answered to. The verdict is meaningful only when err is nil.
func Run(ctx context.Context, pool *pgxpool.Pool, st *stock.Store, saleID int64, accepted map[string]string) (Verdict, error) {
	f, err := read(ctx, pool, st, saleID)
	if err != nil {
		return Verdict{}, fmt.Errorf("audit sale %d: %w", saleID, err)
	}
	return judge(f, accepted), nil
}

// read gathers the facts in the order the audit has always read them:
// items, each item's Redis stock, orders, Redis holders, the release outbox.
func read(ctx context.Context, pool *pgxpool.Pool, st *stock.Store, saleID int64) (facts, error) {
	var f facts
	var err error
	if f.items, err = readItems(ctx, pool, st, saleID); err != nil {
		return f, err
	}
	if f.orders, err = readOrders(ctx, pool, saleID); err != nil {
		return f, err
	}
	if f.holders, err = st.Holders(ctx, saleID); err != nil {
		return f, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, saleID).Scan(&f.unreleased); err != nil {
		return f, fmt.Errorf("outbox: %w", err)
	}
	return f, nil
}

// readItems reads the sale's items with their order counts from PostgreSQL,
// then each item's stock left in Redis.
func readItems(ctx context.Context, pool *pgxpool.Pool, st *stock.Store, saleID int64) ([]itemFacts, error) {
	rows, err := pool.Query(ctx, `
		SELECT i.id, i.quantity, i.sold,
		       count(o.id) FILTER (WHERE o.status IN ('PENDING', 'PAID')),
		       count(o.id) FILTER (WHERE o.status = 'REJECTED')
		FROM flash_sale_item i LEFT JOIN flash_sale_order o ON o.sale_id = i.sale_id AND o.item_id = i.id
		WHERE i.sale_id = $1 GROUP BY i.id ORDER BY i.id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	var items []itemFacts
	for rows.Next() {
		var it itemFacts
		if err := rows.Scan(&it.ID, &it.Quantity, &it.Sold, &it.Active, &it.Rejected); err != nil {
			rows.Close()
			return nil, err
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	if len(items) == 0 {
		return nil, errors.New("no items")
	}
	for i := range items {
		left, err := st.Left(ctx, saleID, items[i].ID)
		switch {
		case errors.Is(err, stock.ErrNotLoaded):
			items[i].redisMissing = true
		case err != nil:
			return nil, err
		default:
			items[i].RedisLeft = left
		}
	}
	return items, nil
}

// readOrders reads every order row of the sale.
func readOrders(ctx context.Context, pool *pgxpool.Pool, saleID int64) ([]orderRow, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, user_id, status, coalesce(reject_reason, '') FROM flash_sale_order WHERE sale_id = $1`, saleID)
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	var orders []orderRow
	for rows.Next() {
		var o orderRow
		if err := rows.Scan(&o.id, &o.user, &o.status, &o.reason); err != nil {
			rows.Close()
			return nil, err
		}
		orders = append(orders, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	return orders, nil
}

// judge holds the facts against the invariants and against accepted, what
// the crowd was told (order id -> user answered 202). It reads nothing.
func judge(f facts, accepted map[string]string) Verdict {
	v := Verdict{StockConserved: true}
	activeTotal := v.judgeItems(f.items)
	active := v.judgeOrders(f.orders, accepted)
	if int64(len(f.holders)) != activeTotal {
		v.StockConserved = false
		v.problem("Redis holds %d buyers, PostgreSQL %d active orders", len(f.holders), activeTotal)
	}
	// Who holds, not only how many: a holder naming no active order (or
	// another one) blocks its shopper, or lets one without it reserve
	// again, whatever the counts say.
	var wrong []string
	for user, order := range f.holders {
		if active[user] != order {
			wrong = append(wrong, fmt.Sprintf("Redis holds %s for %s, PostgreSQL's active order is %q", order, user, active[user]))
		}
	}
	for user, order := range active {
		if _, ok := f.holders[user]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s holds active order %s, Redis no unit", user, order))
		}
	}
	if len(wrong) > 0 {
		v.StockConserved = false
		slices.Sort(wrong)
		v.problem("%d holders differ from the active orders: %s", len(wrong), strings.Join(wrong[:min(3, len(wrong))], "; "))
	}
	v.UnreleasedRejects = f.unreleased
	if v.UnreleasedRejects > 0 {
		v.problem("%d ended orders still wait for their unit to be returned", v.UnreleasedRejects)
	}
	return v
}

func (v *Verdict) problem(format string, a ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, a...))
}

// judgeItems checks each item's stock: Redis left + active = quantity,
// sold = active, nothing beyond quantity. It returns the active orders of
// the sale, which Redis must hold a unit for each of.
func (v *Verdict) judgeItems(items []itemFacts) (activeTotal int64) {
	for _, fi := range items {
		it := fi.Item
		activeTotal += it.Active
		if fi.redisMissing {
			it.RedisLeft = -1
			v.StockConserved = false
			v.problem("item %d: stock key missing in Redis", it.ID)
		} else {
			left := it.RedisLeft
			if left < 0 {
				v.Oversold += -left
				v.problem("item %d: Redis stock is %d", it.ID, left)
			}
			if left+it.Active != it.Quantity {
				v.StockConserved = false
				v.problem("item %d: Redis left %d + active %d != quantity %d", it.ID, left, it.Active, it.Quantity)
			}
		}
		if it.Active > it.Quantity {
			v.Oversold += it.Active - it.Quantity
			v.problem("item %d: %d active orders for %d units", it.ID, it.Active, it.Quantity)
		}
		if it.Sold != it.Active {
			v.StockConserved = false
			v.problem("item %d: sold column %d != active orders %d", it.ID, it.Sold, it.Active)
		}
		v.Items = append(v.Items, it)
	}
	return activeTotal
}

// judgeOrders holds what the crowd was told against what PostgreSQL holds:
// every 202 has its row for its user, and a row that is not REJECTED; no
// row nobody was told about, one active order per user. It returns the
// active orders, user -> order id.
func (v *Verdict) judgeOrders(orders []orderRow, accepted map[string]string) (active map[string]string) {
	active = map[string]string{}
	found := map[string]string{}    // order id -> user
	rejected := map[string]string{} // order id -> reason, of REJECTED rows
	var activeByUser = map[string]int{}
	// A gateway that could not confirm a publish writes the order REJECTED
	// with this reason before answering 503 (it takes the order id, so a
	// late copy of the event is a duplicate): a row of an order nobody was
	// told about, on purpose. So does the order service for a reservation
	// whose gateway died before publishing it (event.RejectAbandoned).
	abandoned := map[string]bool{}
	for _, o := range orders {
		found[o.id] = o.user
		abandoned[o.id] = o.status == "REJECTED" && (o.reason == PublishFailed || o.reason == event.RejectAbandoned)
		if o.status == "REJECTED" {
			rejected[o.id] = o.reason
		}
		if o.status == "PENDING" || o.status == "PAID" {
			activeByUser[o.user]++
			active[o.user] = o.id
		}
	}
	for id, user := range accepted {
		got, ok := found[id]
		switch {
		case !ok:
			v.Lost++
			if v.Lost <= 5 {
				v.problem("order %s was answered 202 but has no row", id)
			}
		case got != user:
			v.Duplicates++
			v.problem("order %s belongs to %s in PostgreSQL, was answered to %s", id, got, user)
		case rejected[id] == soldOutInDB:
			// Redis sold a unit PostgreSQL did not have.
			v.Oversold++
			v.problem("order %s was answered 202 but PostgreSQL had no unit for it (REJECTED %s)", id, soldOutInDB)
		default:
			if reason, ok := rejected[id]; ok {
				// Told she won, then written off: a 202 not honoured
				// (one answered before the broker's ack, or taken for
				// abandoned while it was still being published).
				v.Lost++
				v.problem("order %s was answered 202 but is REJECTED (%s)", id, reason)
			}
		}
	}
	for id := range found {
		if _, ok := accepted[id]; !ok && !abandoned[id] {
			v.Duplicates++
			if v.Duplicates <= 5 {
				v.problem("order %s exists but nobody was answered 202 for it", id)
			}
		}
	}
	for user, n := range activeByUser {
		if n > 1 {
			v.Duplicates += int64(n - 1)
			v.problem("user %s holds %d active orders", user, n)
		}
	}
	return active
}

// soldOutInDB is the reason of an order PostgreSQL refused for lack of a
// unit (ordersvc's store.ReasonSoldOutInDB): Redis sold one more than it had.
const soldOutInDB = "SOLD_OUT_IN_DB"
