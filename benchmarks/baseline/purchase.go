package baseline

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/valyala/fasthttp"

	"flashsale/pkg/auth"
	"flashsale/pkg/httperr"
	"flashsale/tools/naive"
)

// apiError is the gateway's refusal type (pkg/httperr), so the bodies
// match byte for byte and the classifier treats every target alike.
type apiError = httperr.Error

func newAPIError(status int, code, message, retryAfter string) apiError {
	return httperr.New(status, code, message).WithRetryAfter(retryAfter)
}

var (
	errNotFound         = newAPIError(fasthttp.StatusNotFound, "NOT_FOUND", "no such sale, item or purchase path", "")
	errUnauthorized     = newAPIError(fasthttp.StatusUnauthorized, "UNAUTHORIZED", "a valid bearer token is required", "")
	errSoldOut          = newAPIError(fasthttp.StatusGone, "SOLD_OUT", "this item is sold out (a shopper who bought it finds her order at GET /api/flash-sales/{saleId}/order)", "")
	errAlreadyPurchased = newAPIError(fasthttp.StatusConflict, "ALREADY_PURCHASED", "you already hold a unit in this sale", "")
	errUnavailable      = newAPIError(fasthttp.StatusServiceUnavailable, "UNAVAILABLE", "temporarily unavailable, retry later", "1")
	errMethod           = newAPIError(fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method not allowed on this path", "")
)

var contentJSON = []byte("application/json")

// bare is the HTTP ceiling: the gateway's sold-out answer, nothing else.
func bare(ctx *fasthttp.RequestCtx) { errSoldOut.Write(ctx) }

// answer of one purchase attempt.
type answer struct {
	refusal *apiError // nil: accepted
	orderID uuid.UUID
}

func refused(e apiError) answer { return answer{refusal: &e} }

var bearerPrefix = []byte("Bearer ")

// purchase does what the gateway does before its sold-out flag (path,
// token), then the design's buy step, and answers like the gateway.
func (s *Server) purchase(buy func(ctx context.Context, saleID, itemID int64, user string) answer) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		saleID, ok1 := pathID(ctx, "saleId")
		itemID, ok2 := pathID(ctx, "itemId")
		if !ok1 || !ok2 {
			errNotFound.Write(ctx)
			return
		}
		h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
		if !bytes.HasPrefix(h, bearerPrefix) || len(h) > auth.MaxTokenLen+len(bearerPrefix) {
			errUnauthorized.Write(ctx)
			return
		}
		user, err := s.verifier.UserID(string(h[len(bearerPrefix):]))
		if err != nil {
			errUnauthorized.Write(ctx)
			return
		}
		rctx, cancel := context.WithTimeout(s.base, s.cfg.RequestTimeout)
		a := buy(rctx, saleID, itemID, user)
		cancel()
		if a.refusal != nil {
			a.refusal.Write(ctx)
			return
		}
		ctx.Response.Header.SetContentTypeBytes(contentJSON)
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		var buf [96]byte
		out := append(buf[:0], `{"orderId":"`...)
		out = append(out, a.orderID.String()...)
		out = append(out, `","status":"PENDING"}`...)
		ctx.SetBody(out)
	}
}

func pathID(ctx *fasthttp.RequestCtx, name string) (int64, bool) {
	s, _ := ctx.UserValue(name).(string)
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

const sqlInsertOrder = `
	INSERT INTO flash_sale_order (id, sale_id, item_id, user_id, status, created_at, expires_at)
	VALUES ($1, $2, $3, $4, 'PENDING', $5, $6)`

// insertOrder writes the order row in the buyer's transaction. A repeat
// buyer hits the partial unique index over active orders: 409, and the
// transaction (with its stock decrement) rolls back.
func (s *Server) insertOrder(ctx context.Context, tx pgx.Tx, saleID, itemID int64, user string) answer {
	id, err := uuid.NewV7()
	if err != nil {
		return refused(errUnavailable)
	}
	now := time.Now()
	if _, err := tx.Exec(ctx, sqlInsertOrder, id, saleID, itemID, user, now, now.Add(s.cfg.PaymentTTL)); err != nil {
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
			return refused(errAlreadyPurchased)
		}
		return refused(errUnavailable)
	}
	return answer{orderID: id}
}

// inTx runs f in one transaction, committing only an accepted answer.
func (s *Server) inTx(ctx context.Context, f func(tx pgx.Tx) answer) answer {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return refused(errUnavailable)
	}
	a := f(tx)
	if a.refusal != nil {
		_ = tx.Rollback(ctx)
		return a
	}
	if err := tx.Commit(ctx); err != nil {
		return refused(errUnavailable)
	}
	return a
}

// buyUpdate is the articles' design: the conditional UPDATE is atomic, so
// it never oversells, but every buyer queues on the item row's lock for the
// length of a committed transaction.
func (s *Server) buyUpdate(ctx context.Context, saleID, itemID int64, user string) answer {
	return s.inTx(ctx, func(tx pgx.Tx) answer {
		tag, err := tx.Exec(ctx, `UPDATE flash_sale_item SET sold = sold + 1 WHERE id = $1 AND sale_id = $2 AND sold < quantity`, itemID, saleID)
		if err != nil {
			return refused(errUnavailable)
		}
		if tag.RowsAffected() == 0 {
			return refused(errSoldOut) // or no such item; the crowd only asks for real ones
		}
		return s.insertOrder(ctx, tx, saleID, itemID, user)
	})
}

// buyLock reads the row under FOR UPDATE, checks it in Go, then writes: the
// pessimistic form, which also holds the lock for sold-out answers.
func (s *Server) buyLock(ctx context.Context, saleID, itemID int64, user string) answer {
	return s.inTx(ctx, func(tx pgx.Tx) answer {
		var sold, quantity int64
		err := tx.QueryRow(ctx, `SELECT sold, quantity FROM flash_sale_item WHERE id = $1 AND sale_id = $2 FOR UPDATE`, itemID, saleID).Scan(&sold, &quantity)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return refused(errNotFound)
		case err != nil:
			return refused(errUnavailable)
		case sold >= quantity:
			return refused(errSoldOut)
		}
		if _, err := tx.Exec(ctx, `UPDATE flash_sale_item SET sold = sold + 1 WHERE id = $1`, itemID); err != nil {
			return refused(errUnavailable)
		}
		return s.insertOrder(ctx, tx, saleID, itemID, user)
	})
}

// buyNaive is GET then DECR: no persistence, no per-user check, and an
// oversell whenever two buyers read the last units at once.
func (s *Server) buyNaive(ctx context.Context, saleID, itemID int64, _ string) answer {
	ok, err := naive.Reserve(ctx, s.redis, saleID, itemID)
	switch {
	case err != nil:
		return refused(errUnavailable)
	case !ok:
		return refused(errSoldOut)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return refused(errUnavailable)
	}
	return answer{orderID: id}
}
