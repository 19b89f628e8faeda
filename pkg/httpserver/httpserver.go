// Package httpserver builds the fasthttp servers of both services from
// their typed configuration, the same way: configured timeouts and
// limits, the JSON error body for requests fasthttp cannot read, fasthttp's
// messages on the service's logger, every handler behind Recover, and a
// shutdown that stops a server even if it had not started serving yet.
package httpserver

import (
	"context"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
	"flashsale/pkg/logging"
)

// Config is a listener's part of a service's configuration.
type Config struct {
	ReadTimeout  time.Duration // reading one request, headers and body
	WriteTimeout time.Duration // writing one answer
	IdleTimeout  time.Duration // a keep-alive connection between requests
	// MaxBodyBytes bounds a request body (413 PAYLOAD_TOO_LARGE past it).
	MaxBodyBytes int
	// Concurrency bounds the connections served at once.
	Concurrency int
	// MaxConnsPerIP bounds one client address's connections (0: no bound).
	MaxConnsPerIP int
}

// Option adjusts one server.
type Option func(*fasthttp.Server, *settings)

type settings struct {
	onPanic       func()
	onConnRefused func(reason string)
}

// OnPanic is called after a handler panic has been answered, e.g. to count
// it on /metrics.
func OnPanic(f func()) Option { return func(_ *fasthttp.Server, s *settings) { s.onPanic = f } }

// OnConnRefused is called for each connection refused by a limit, with
// RefusedPerIP or RefusedConcurrency, e.g. to count it on /metrics.
func OnConnRefused(f func(reason string)) Option {
	return func(_ *fasthttp.Server, s *settings) { s.onConnRefused = f }
}

// Server is a fasthttp server whose Serve enforces the configured
// connection limits itself (see connLimits): a refused connection is
// answered in the API's JSON error body with Retry-After.
type Server struct {
	*fasthttp.Server
	limits *connLimits
}

// Serve serves ln under the connection limits until the server shuts down.
func (s *Server) Serve(ln net.Listener) error { return s.Server.Serve(s.limits.wrap(ln)) }

// readBufferSize bounds a request's headers: larger ones get 431.
const readBufferSize = 8192

// New returns the server named name serving h, wrapped in Recover.
func New(name string, h fasthttp.RequestHandler, cfg Config, log *slog.Logger, opts ...Option) *Server {
	srv := &fasthttp.Server{
		Name:               name,
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBodyBytes,
		// The listener enforces both connection limits (connLimits).
		// fasthttp's count of connections being served trails it by a
		// connection's last steps after its Close: twice the limit keeps
		// fasthttp from refusing in plain text what the listener let in.
		Concurrency:    2 * cfg.Concurrency,
		ReadBufferSize: readBufferSize,
		// Shutdown closes idle keep-alive connections instead of waiting
		// out IdleTimeout on each.
		CloseOnShutdown:       true,
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		Logger:                logging.Printf{Log: log},
		ErrorHandler:          httperr.ParseError,
	}
	var s settings
	for _, o := range opts {
		o(srv, &s)
	}
	srv.Handler = Recover(log, s.onPanic, h)
	return &Server{Server: srv, limits: newConnLimits(cfg, s.onConnRefused, log)}
}

// Recover answers a panicking handler's request with 500 and the JSON
// error body, logs the panic with its stack at error level (someone must
// act: it is a bug), and calls onPanic (nil: nothing) so it can be
// counted. The process goes on serving.
func Recover(log *slog.Logger, onPanic func(), next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			log.Error("handler panic", "panic", p, "method", string(ctx.Method()), "path", string(ctx.Path()),
				"stack", string(debug.Stack()))
			ctx.Response.Reset()
			httperr.ErrInternal.Write(ctx)
			if onPanic != nil {
				onPanic()
			}
		}()
		next(ctx)
	}
}

// Shutdown stops srv serving ln: it stops accepting, waits for the open
// requests until ctx ends, and closes ln. fasthttp's own Shutdown closes
// only the listeners its Serve has already taken, so a Serve that starts
// after it (the service's context ended as it was starting) would accept
// for ever; with ln closed its Accept fails and Serve returns nil.
func Shutdown(ctx context.Context, srv *fasthttp.Server, ln net.Listener) error {
	err := srv.ShutdownWithContext(ctx)
	_ = ln.Close()
	return err
}
