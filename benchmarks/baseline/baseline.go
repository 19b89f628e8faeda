// Package baseline is the set of designs our gateway is measured against,
// one per process, each behind the same purchase URL, the same JWT check
// (pkg/auth) and the same JSON answers as the gateway, so that the load
// generator and the classifier (tools/outcome) cannot tell them apart:
//
//   - bare: a fasthttp handler answering a constant 410 SOLD_OUT, no JWT,
//     no router: the ceiling for HTTP on this machine;
//   - pg-update: the articles' small-sale design, one transaction per
//     request: UPDATE ... SET sold = sold + 1 WHERE sold < quantity, then
//     INSERT the order (the partial unique index answers 409 for a repeat);
//   - pg-lock: SELECT ... FOR UPDATE of the item row, check, UPDATE, INSERT;
//   - redis-naive: tools/naive.Reserve (GET, then DECR), which oversells.
//
// None of them is meant to be used; they exist to be beaten.
package baseline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"flashsale/pkg/auth"
	"flashsale/pkg/httpserver"
)

// Designs a process can serve.
const (
	Bare       = "bare"
	PGUpdate   = "pg-update"
	PGLock     = "pg-lock"
	RedisNaive = "redis-naive"
)

// Designs lists every design, in the order the benchmark runs them.
func Designs() []string { return []string{Bare, PGUpdate, PGLock, RedisNaive} }

// PurchaseRoute is the gateway's purchase URL; the gate segment is accepted
// as is (the baselines have no time gate).
const PurchaseRoute = "/api/flash-sales/{saleId}/g/{gate}/items/{itemId}/purchase"

// Config of one baseline process.
type Config struct {
	Design      string
	Addr        string
	JWTKey      []byte
	JWTIssuer   string
	PostgresDSN string
	// PGConns is the size of the PostgreSQL pool of the pg-* designs.
	PGConns   int
	RedisAddr string
	// RequestTimeout bounds one request's database or Redis work; a
	// fasthttp RequestCtx has no deadline of its own.
	RequestTimeout time.Duration
	// PaymentTTL is how long an order of the pg-* designs stays PENDING.
	PaymentTTL      time.Duration
	ShutdownTimeout time.Duration
}

// Validate reports every problem at once, each naming its setting.
func (c Config) Validate() error {
	var errs []error
	bad := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	bad(slices.Contains(Designs(), c.Design), "-design %q: want one of %s", c.Design, strings.Join(Designs(), ", "))
	bad(c.Addr != "", "-addr: empty")
	if c.Design != Bare {
		bad(len(c.JWTKey) >= 32, "FLASHSALE_JWT_HS256_KEY: missing or shorter than 32 bytes")
	}
	if c.Design == PGUpdate || c.Design == PGLock {
		bad(c.PostgresDSN != "", "FLASHSALE_PG_DSN: empty")
		bad(c.PGConns > 0 && c.PGConns <= 190, "-pg-conns: want 1..190 (the local PostgreSQL allows 200), got %d", c.PGConns)
	}
	if c.Design == RedisNaive {
		bad(c.RedisAddr != "", "FLASHSALE_REDIS_ADDR: empty")
	}
	bad(c.RequestTimeout > 0, "-request-timeout: must be positive")
	bad(c.PaymentTTL >= time.Second, "-payment-ttl: want at least 1s")
	bad(c.ShutdownTimeout > 0, "-shutdown-timeout: must be positive")
	return errors.Join(errs...)
}

// Server is one design ready to serve.
type Server struct {
	cfg      Config
	handler  fasthttp.RequestHandler
	verifier *auth.Verifier
	pool     *pgxpool.Pool
	redis    rueidis.Client
	base     context.Context
}

// New dials what the design needs and warms it up: the PostgreSQL pool is
// filled to PGConns before the first request, so no design pays for its
// connections during the measurement.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("baseline config:\n%w", err)
	}
	s := &Server{cfg: cfg, base: context.WithoutCancel(ctx)}
	if cfg.Design == Bare {
		s.handler = bare
		return s, nil
	}
	var err error
	s.verifier, err = auth.NewVerifier(cfg.JWTKey, nil, cfg.JWTIssuer, "")
	if err != nil {
		return nil, err
	}
	var buy func(ctx context.Context, saleID, itemID int64, user string) answer
	switch cfg.Design {
	case PGUpdate, PGLock:
		if s.pool, err = dialPostgres(ctx, cfg.PostgresDSN, cfg.PGConns); err != nil {
			return nil, err
		}
		buy = s.buyUpdate
		if cfg.Design == PGLock {
			buy = s.buyLock
		}
	case RedisNaive:
		// The gateway's own client options, so Redis is reached the same way.
		s.redis, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.RedisAddr},
			DisableCache: true, PipelineMultiplex: 2})
		if err != nil {
			return nil, fmt.Errorf("connect redis %s: %w", cfg.RedisAddr, err)
		}
		buy = s.buyNaive
	}
	r := router.New()
	r.POST(PurchaseRoute, s.purchase(buy))
	r.NotFound = errNotFound.Write
	r.MethodNotAllowed = errMethod.Write
	r.HandleMethodNotAllowed = true
	s.handler = r.Handler
	return s, nil
}

func dialPostgres(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres dsn: %w", err)
	}
	pc.MaxConns = int32(conns)
	pc.MinConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	// Hold every connection at once, so that all of them are open before
	// the first request.
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres warm-up: %w", err)
		}
		held = append(held, c)
	}
	return pool, nil
}

// Handler is the design's request handler.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Close releases the clients.
func (s *Server) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.redis != nil {
		s.redis.Close()
	}
}

// HTTPServer wraps a handler in the gateway's own fasthttp settings, so the
// baselines and the gateway differ only in what their handlers do.
func HTTPServer(name string, h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               h,
		Name:                  name,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		Concurrency:           256 * 1024,
		MaxRequestBodySize:    4096,
		ReadBufferSize:        8192,
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		CloseOnShutdown:       true,
	}
}

// Serve answers on ln until ctx ends, then shuts down within
// ShutdownTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := HTTPServer("flashsale-baseline-"+s.cfg.Design, s.handler)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(ln) })
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		return httpserver.Shutdown(sctx, srv, ln)
	})
	return g.Wait()
}
