// Package audit checks the invariants of docs/design.md for one sale
// against what the crowd was told: every 202 has its row, nothing is
// oversold, stock is conserved between Redis and PostgreSQL, one active order per user.
package audit

import (
	"flashsale/pkg/event"

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

// Run audits saleID. accepted maps every order id answered with 202 to the
// user it was answered to.
func Run(ctx context.Context, pool *pgxpool.Pool, st *stock.Store, saleID int64, accepted map[string]string) (Verdict, error) {
	v := Verdict{StockConserved: true}
	problem := func(format string, a ...any) { v.Problems = append(v.Problems, fmt.Sprintf(format, a...)) }

	rows, err := pool.Query(ctx, `
		SELECT i.id, i.quantity, i.sold,
		       count(o.id) FILTER (WHERE o.status IN ('PENDING', 'PAID')),
		       count(o.id) FILTER (WHERE o.status = 'REJECTED')
		FROM flash_sale_item i LEFT JOIN flash_sale_order o ON o.item_id = i.id
		WHERE i.sale_id = $1 GROUP BY i.id ORDER BY i.id`, saleID)
	if err != nil {
		return v, fmt.Errorf("audit sale %d: items: %w", saleID, err)
	}
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.ID, &it.Quantity, &it.Sold, &it.Active, &it.Rejected); err != nil {
			rows.Close()
			return v, fmt.Errorf("audit sale %d: %w", saleID, err)
		}
		v.Items = append(v.Items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("audit sale %d: items: %w", saleID, err)
	}
	if len(v.Items) == 0 {
		return v, fmt.Errorf("audit sale %d: no items", saleID)
	}

	var activeTotal int64
	for i := range v.Items {
		it := &v.Items[i]
		activeTotal += it.Active
		left, err := st.Left(ctx, saleID, it.ID)
		switch {
		case errors.Is(err, stock.ErrNotLoaded):
			it.RedisLeft = -1
			v.StockConserved = false
			problem("item %d: stock key missing in Redis", it.ID)
		case err != nil:
			return v, fmt.Errorf("audit sale %d: %w", saleID, err)
		default:
			it.RedisLeft = left
			if left < 0 {
				v.Oversold += -left
				problem("item %d: Redis stock is %d", it.ID, left)
			}
			if left+it.Active != it.Quantity {
				v.StockConserved = false
				problem("item %d: Redis left %d + active %d != quantity %d", it.ID, left, it.Active, it.Quantity)
			}
		}
		if it.Active > it.Quantity {
			v.Oversold += it.Active - it.Quantity
			problem("item %d: %d active orders for %d units", it.ID, it.Active, it.Quantity)
		}
		if it.Sold != it.Active {
			v.StockConserved = false
			problem("item %d: sold column %d != active orders %d", it.ID, it.Sold, it.Active)
		}
	}

	// What the crowd was told against what PostgreSQL holds.
	found := map[string]string{} // order id -> user
	var activeByUser = map[string]int{}
	// A gateway that could not confirm a publish writes the order REJECTED
	// with this reason before answering 503 (it takes the order id, so a
	// late copy of the event is a duplicate): a row of an order nobody was
	// told about, on purpose. So does the order service for a reservation
	// whose gateway died before publishing it (event.RejectAbandoned).
	abandoned := map[string]bool{}
	orows, err := pool.Query(ctx, `SELECT id::text, user_id, status, coalesce(reject_reason, '') FROM flash_sale_order WHERE sale_id = $1`, saleID)
	if err != nil {
		return v, fmt.Errorf("audit sale %d: orders: %w", saleID, err)
	}
	for orows.Next() {
		var id, user, status, reason string
		if err := orows.Scan(&id, &user, &status, &reason); err != nil {
			orows.Close()
			return v, fmt.Errorf("audit sale %d: %w", saleID, err)
		}
		found[id] = user
		abandoned[id] = status == "REJECTED" && (reason == PublishFailed || reason == event.RejectAbandoned)
		if status == "PENDING" || status == "PAID" {
			activeByUser[user]++
		}
	}
	orows.Close()
	if err := orows.Err(); err != nil {
		return v, fmt.Errorf("audit sale %d: orders: %w", saleID, err)
	}
	for id, user := range accepted {
		got, ok := found[id]
		switch {
		case !ok:
			v.Lost++
			if v.Lost <= 5 {
				problem("order %s was answered 202 but has no row", id)
			}
		case got != user:
			v.Duplicates++
			problem("order %s belongs to %s in PostgreSQL, was answered to %s", id, got, user)
		}
	}
	for id := range found {
		if _, ok := accepted[id]; !ok && !abandoned[id] {
			v.Duplicates++
			if v.Duplicates <= 5 {
				problem("order %s exists but nobody was answered 202 for it", id)
			}
		}
	}
	for user, n := range activeByUser {
		if n > 1 {
			v.Duplicates += int64(n - 1)
			problem("user %s holds %d active orders", user, n)
		}
	}

	holders, err := st.Holders(ctx, saleID)
	if err != nil {
		return v, fmt.Errorf("audit sale %d: %w", saleID, err)
	}
	if int64(len(holders)) != activeTotal {
		v.StockConserved = false
		problem("Redis holds %d buyers, PostgreSQL %d active orders", len(holders), activeTotal)
	}

	if err := pool.QueryRow(ctx, `SELECT count(*) FROM stock_release WHERE sale_id = $1 AND released_at IS NULL`, saleID).Scan(&v.UnreleasedRejects); err != nil {
		return v, fmt.Errorf("audit sale %d: outbox: %w", saleID, err)
	}
	if v.UnreleasedRejects > 0 {
		problem("%d ended orders still wait for their unit to be returned", v.UnreleasedRejects)
	}
	return v, nil
}
