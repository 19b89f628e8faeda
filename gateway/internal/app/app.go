// Package app wires the gateway's parts together and runs them until the
// context ends, then shuts them down in order: unready, stop accepting,
// drain in-flight purchases, flush the producer, close pools.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"flashsale/gateway/internal/admission"
	"flashsale/gateway/internal/catalog"
	"flashsale/gateway/internal/config"
	"flashsale/gateway/internal/holding"
	"flashsale/gateway/internal/httpapi"
	"flashsale/gateway/internal/publish"
	"flashsale/gateway/internal/purchase"
	"flashsale/gateway/internal/queue"
	"flashsale/gateway/internal/ratelimit"
	"flashsale/gateway/internal/web"
	"flashsale/pkg/auth"
	"flashsale/pkg/httpserver"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/stock"
)

// Gateway is a wired gateway, ready to Serve.
type Gateway struct {
	cfg        config.Config
	log        *slog.Logger
	redis      rueidis.Client
	redisReady *redisconn.Watch // readiness: Redis answers, no node may evict the sale's keys, and the clocks agree
	pool       *pgxpool.Pool
	producer   *publish.Producer
	catalog    *catalog.Catalog
	stock      *stock.Store
	watcher    *catalog.Watcher
	queue      *queue.Queue
	bypass     *queue.Bypass
	api        *httpapi.API
	dash       *web.Dashboard
	public     *httpserver.Server
	admin      *httpserver.Server
	// limits are the rate limits the last load of the configuration set
	// (New or Reload): a reload applies only those it changes.
	limits limitSettings
	// queueAdvanceFailed logs a failed admission round at most once a
	// second: rounds run every FLASHSALE_QUEUE_ADVANCE (100 ms) per queued
	// sale, and during a Redis outage each one fails the same way.
	queueAdvanceFailed rate.Sometimes
}

// New dials the dependencies. It fails fast when one is missing, except the
// Kafka broker, which the producer reaches lazily (purchases answer 503
// until it does).
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{cfg: cfg, log: log, limits: limitsOf(cfg), queueAdvanceFailed: rate.Sometimes{Interval: time.Second}}
	if err := g.build(ctx); err != nil {
		// Closes the clients the steps before the failed one dialed (none
		// when Redis itself failed).
		g.Close()
		return nil, err
	}
	return g, nil
}

// build runs New's steps in order; the first error stops it. Each step's
// error already names its operation (the constructors wrap their own).
func (g *Gateway) build(ctx context.Context) error {
	if err := g.dialClients(ctx); err != nil {
		return err
	}
	// Before the catalog is read, as always: a bad key fails without
	// touching PostgreSQL.
	verifier, err := auth.NewVerifier(g.cfg.JWTKey, nil, g.cfg.JWTIssuer, "")
	if err != nil {
		return err
	}
	if err := g.loadCatalog(ctx); err != nil {
		return err
	}
	if err := g.buildAPI(ctx, verifier); err != nil {
		return err
	}
	g.api.SetConfiguredBypass(g.cfg.QueueBypass)
	g.refreshBypass(ctx)
	return g.buildServers()
}

// dialClients creates the Redis client, the PostgreSQL pool and the Kafka
// producer, in that order, keeping each one that succeeds for Close.
func (g *Gateway) dialClients(ctx context.Context) error {
	// One node or a cluster's seed list: redisconn lets rueidis pick the mode.
	multiplex, err := redisconn.Multiplex(g.cfg.RedisConns) // validated with the config
	if err != nil {
		return err
	}
	rc, err := redisconn.New(g.cfg.RedisAddr, rueidis.ClientOption{
		DisableCache:      true,
		ConnWriteTimeout:  g.cfg.RedisTimeout,
		Dialer:            net.Dialer{Timeout: g.cfg.RedisTimeout},
		PipelineMultiplex: multiplex,
		MaxFlushDelay:     g.cfg.RedisFlushDelay,
	})
	if err != nil {
		return err
	}
	g.redis = rc
	if err := redisconn.RefuseEviction(ctx, rc, g.log); err != nil {
		return err
	}
	g.redisReady = redisconn.NewWatch(rc, redisconn.Recheck, redisconn.MaxClockSkew(g.cfg.InFlightWindow), g.log)
	g.pool, err = pgxpool.New(ctx, g.cfg.PostgresDSN)
	if err != nil {
		return fmt.Errorf("postgres pool: %w", err)
	}
	g.producer, err = publish.New(publish.Config{Brokers: g.cfg.KafkaBrokers, Topic: g.cfg.OrdersTopic,
		Timeout: g.cfg.PublishTimeout, Linger: g.cfg.PublishLinger,
		FailFastAfter: g.cfg.PublishFailFastAfter, FailFastFor: g.cfg.PublishFailFastFor, Spread: g.cfg.PublishSpread,
		Security: g.cfg.KafkaSecurity, Log: g.log.With("component", "publish")})
	return err
}

// loadCatalog reads the sales from PostgreSQL (required) and their stock
// from Redis (a failure is only logged: the watcher polls again).
func (g *Gateway) loadCatalog(ctx context.Context) error {
	g.catalog = catalog.New(g.pool, g.cfg.GateKey)
	g.stock = stock.New(g.redis, stock.WithShards(g.catalog.Shards))
	if err := g.catalog.Refresh(ctx); err != nil {
		return err
	}
	g.watcher = catalog.NewWatcher(g.catalog, g.redis, g.stock, g.log)
	if err := g.watcher.Poll(ctx); err != nil {
		g.log.Warn("first stock poll failed", "err", err)
	}
	return nil
}

// buildAPI assembles the HTTP API: admission, the buyer, the queue and the
// rate limits.
func (g *Gateway) buildAPI(ctx context.Context, verifier *auth.Verifier) error {
	signer, err := admission.NewSigner(g.cfg.GateKey)
	if err != nil {
		return err
	}
	buyer, finder, err := g.newBuyer()
	if err != nil {
		return err
	}
	reg, m, err := newMetrics()
	if err != nil {
		return err
	}
	cfg := g.cfg
	g.queue = queue.New(g.redis, cfg.QueueGrace)
	g.bypass = queue.NewBypass(g.redis)
	g.api = &httpapi.API{
		Queue:           g.queue,
		Admission:       signer,
		PurchaseLimits:  httpapi.NewLimits(cfg.LimitPurchaseUser, cfg.LimitPurchaseIP, cfg.LimitMaxKeys),
		QueueLimits:     httpapi.NewLimits(cfg.LimitQueueUser, cfg.LimitQueueIP, cfg.LimitMaxKeys),
		PollLimits:      httpapi.NewPollLimits(cfg.LimitPollUser, cfg.LimitMaxKeys),
		TrustedProxies:  cfg.TrustedProxies,
		RedisTimeout:    cfg.RedisTimeout,
		AdmissionTTL:    cfg.AdmissionTTL,
		PowChallengeTTL: cfg.PowChallengeTTL,
		Bypass:          g.bypass,
		Catalog:         g.catalog,
		Buyer:           buyer,
		Holding:         finder,
		Stock:           g.stock,
		Verifier:        verifier,
		Orders:          &fasthttp.HostClient{Addr: cfg.OrdersvcAddr, MaxConns: 512, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
		Log:             g.log,
		Metrics:         m,
		Gatherer:        reg,
		Ready: func(ctx context.Context) error {
			if err := g.redisReady.Ready(ctx); err != nil {
				return fmt.Errorf("redis: %w", err)
			}
			if !g.catalog.Loaded() {
				return catalog.ErrNoCatalog
			}
			return nil
		},
		AdminToken: cfg.AdminToken,
		BaseCtx:    context.WithoutCancel(ctx),
		Now:        time.Now,
	}
	return register(reg, g.api.Collector(), g.producer, buyer, g.redisReady.Collector(httpapi.Namespace),
		verifier.Collector(httpapi.Namespace))
}

// newBuyer builds the purchase path and the finder of a user's held order
// that it shares with the API.
func (g *Gateway) newBuyer() (*purchase.Buyer, *holding.Finder, error) {
	// Settles purchases whose publish was not confirmed; one bounded call on
	// the purchase path, like a Redis call.
	settler, err := purchase.NewSettler(g.pool, g.cfg.SettleTimeout)
	if err != nil {
		return nil, nil, err
	}
	finder, err := holding.New(g.stock, g.redis, g.pool)
	if err != nil {
		return nil, nil, err
	}
	b := purchase.NewBuyer(g.redis, g.stock, g.producer, settler, finder, g.cfg.RedisTimeout, g.log)
	b.SetInFlightWindow(g.cfg.InFlightWindow)
	return b, finder, nil
}

// buildServers builds the public and admin servers around the API.
func (g *Gateway) buildServers() error {
	// The sale page (/sale/) and the dashboard (/dashboard/, /admin/dashboard)
	// wrap the API handlers; every other path reaches them untouched.
	public, err := web.SalePage(g.api.Public())
	if err != nil {
		return fmt.Errorf("sale page: %w", err)
	}
	g.dash, err = web.NewDashboard(web.Sources{Catalog: g.catalog, Queue: g.queue, Gatherer: g.api.Gatherer,
		Orders:         web.NewOrdersClient(g.cfg.OrdersvcAdminAddr, g.cfg.AdminToken, 500*time.Millisecond),
		PurchaseLimits: g.api.PurchaseLimits, QueueLimits: g.api.QueueLimits, PollLimits: g.api.PollLimits,
		AdminToken: g.cfg.AdminToken, RedisTimeout: g.cfg.RedisTimeout, Log: g.log})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	g.public = g.server("flashsale-gateway", public)
	g.admin = g.server("flashsale-gateway-admin", g.dash.Admin(g.api.Admin()))
	return nil
}

func (g *Gateway) server(name string, h fasthttp.RequestHandler) *httpserver.Server {
	return httpserver.New(name, h, g.cfg.HTTP(), g.log, httpserver.OnPanic(g.api.CountPanic),
		httpserver.OnConnRefused(g.api.CountConnRefused))
}

// Reload applies the settings that can change without a restart: the rate
// limits whose value in cfg changed since the last load (see reloadLimits:
// a limit set through PUT /admin/limits otherwise stays) and the configured
// bypass users. It is what SIGHUP does, after re-reading the config file;
// other settings need a restart, and a warning names those that differ
// from the ones the gateway started with, at every reload until then. It
// is called from one goroutine.
func (g *Gateway) Reload(ctx context.Context, cfg config.Config) {
	if names := g.cfg.NeedRestart(cfg); len(names) > 0 {
		g.log.Warn("configuration changes not applied: they need a restart", "settings", names)
	}
	next := limitsOf(cfg)
	applied, kept := reloadLimits([5]*ratelimit.Limiter{g.api.PurchaseLimits.User, g.api.PurchaseLimits.IP,
		g.api.QueueLimits.User, g.api.QueueLimits.IP, g.api.PollLimits.User}, g.limits, next)
	g.limits = next
	g.api.SetConfiguredBypass(cfg.QueueBypass)
	g.refreshBypass(ctx)
	g.log.Info("configuration reloaded", "limits_applied", applied, "limits_kept_from_admin_api", kept,
		"purchase_user", g.api.PurchaseLimits.User.Rule(), "purchase_ip", g.api.PurchaseLimits.IP.Rule(),
		"queue_user", g.api.QueueLimits.User.Rule(), "queue_ip", g.api.QueueLimits.IP.Rule(),
		"poll_user", g.api.PollLimits.User.Rule(), "bypass_users", len(cfg.QueueBypass))
}

// Metrics exposes the counters (tests read them).
func (g *Gateway) Metrics() *httpapi.Metrics { return g.api.Metrics }

// Serve listens on the configured addresses until ctx ends, then shuts down.
func (g *Gateway) Serve(ctx context.Context) error {
	pub, err := listenPublic(g.cfg.Addr, g.cfg.ReusePort)
	if err != nil {
		return err
	}
	adm, err := net.Listen("tcp", g.cfg.AdminAddr)
	if err != nil {
		pub.Close()
		return fmt.Errorf("listen %s: %w", g.cfg.AdminAddr, err)
	}
	return g.ServeListeners(ctx, pub, adm)
}

// ServeListeners serves on given listeners (tests pass their own).
func (g *Gateway) ServeListeners(ctx context.Context, pub, adm net.Listener) error {
	g.log.Info("gateway listening", "public", pub.Addr().String(), "admin", adm.Addr().String())
	// The producer's events are read until Close ends them, not until ctx
	// does: purchases still in flight during the shutdown wait for
	// delivery reports, which the client cannot hand out while its events
	// channel is full.
	drained := make(chan struct{})
	go func(producer *publish.Producer) {
		defer close(drained)
		g.drainProducerEvents(producer)
	}(g.producer)
	// The releases and settlements of failed purchases run past the HTTP
	// drain, whose purchases may queue some: they stop once their queues
	// are empty (or the shutdown timeout has passed), not with ctx.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return g.public.Serve(pub) })
	eg.Go(func() error { return g.admin.Serve(adm) })
	eg.Go(func() error { return g.watcher.Run(ctx, g.cfg.CatalogRefresh, g.cfg.StockPoll) })
	eg.Go(func() error { g.runAdmission(ctx); return nil })
	eg.Go(func() error { g.expireQueues(ctx); return nil })
	eg.Go(func() error { g.api.Buyer.RunRetries(work); return nil })
	eg.Go(func() error { g.api.Buyer.RunSettles(work); return nil })
	eg.Go(func() error { g.dash.Run(ctx); return nil })
	eg.Go(func() error { return g.redisReady.Run(ctx) })
	eg.Go(func() error {
		<-ctx.Done()
		deadline := time.Now().Add(g.cfg.ShutdownTimeout)
		err := g.shutdown(pub, adm)
		g.waitBuyerIdle(deadline)
		stopWork()
		return err
	})
	err := eg.Wait()
	g.Close()
	<-drained
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// runAdmission advances every open queued sale's admission, refreshes the
// bypass list and evicts idle rate-limit buckets, until ctx ends.
func (g *Gateway) runAdmission(ctx context.Context) {
	advance := time.NewTicker(g.cfg.QueueAdvance)
	defer advance.Stop()
	slow := time.NewTicker(time.Second)
	defer slow.Stop()
	sweeps := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-advance.C:
			g.advanceQueues(ctx)
		case <-slow.C:
			g.refreshBypass(ctx)
			if sweeps++; sweeps%30 == 0 {
				for _, l := range []*ratelimit.Limiter{g.api.PurchaseLimits.User, g.api.PurchaseLimits.IP,
					g.api.QueueLimits.User, g.api.QueueLimits.IP, g.api.PollLimits.User} {
					l.Sweep(time.Minute)
				}
			}
		}
	}
}

func (g *Gateway) advanceQueues(ctx context.Context) {
	now := time.Now()
	for _, s := range g.catalog.Sales() {
		if !s.Queue.Enabled || !s.IsOpen(now) {
			continue
		}
		c, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
		admitted, rate, err := g.queue.Advance(c, s.ID, s.StartsAt, s.Queue.AdmissionRate, s.StateAt(now) == catalog.SoldOut)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				g.queueAdvanceFailed.Do(func() { g.log.Warn("queue advance failed", "sale", s.ID, "err", err) })
			}
			continue
		}
		g.api.SetQueueGauge(s.ID, admitted, rate)
	}
}

// queueRetention is how long a queued sale's waiting room stays in Redis
// after the sale ends (to look into a complaint about the queue).
const queueRetention = 24 * time.Hour

// expireQueues gives the waiting room of every sale in the catalog that
// has one or had one (a queue an operator turned off keeps its keys) its
// expiry, a day after the sale's end, every 30 s until ctx ends: the keys
// made since the last round get it too, and a changed end moves it. One
// pipeline a round, on its own goroutine: admission rounds never wait for
// it.
func (g *Gateway) expireQueues(ctx context.Context) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		at := map[int64]time.Time{}
		for _, s := range g.catalog.Sales() {
			if end := s.EndsAt.Add(queueRetention); now.Before(end) {
				at[s.ID] = end
			}
		}
		if len(at) == 0 {
			continue
		}
		c, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
		err := g.queue.Expire(c, at)
		cancel()
		if err != nil && ctx.Err() == nil {
			g.log.Warn("waiting rooms' expiry not set; tried again in 30 s", "err", err)
		}
	}
}

func (g *Gateway) refreshBypass(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	defer cancel()
	changes := g.api.BypassChanges()
	users, err := g.bypass.List(c)
	if err != nil {
		g.log.Warn("bypass list not refreshed", "err", err)
		return
	}
	g.api.RefreshBypass(changes, users)
}

func (g *Gateway) drainProducerEvents(producer *publish.Producer) {
	for ev := range producer.Events() {
		if e, ok := ev.(kafka.Error); ok && (e.IsFatal() || e.Code() == kafka.ErrAllBrokersDown) {
			g.log.Warn("kafka producer", "err", e)
			switch {
			case e.IsFatal():
				producer.Fatal(e)
			case e.Code() == kafka.ErrAllBrokersDown:
				producer.BrokersDown()
			}
		}
	}
}

func (g *Gateway) shutdown(pub, adm net.Listener) error {
	g.api.SetDraining()
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	// Shutdown stops accepting and waits for in-flight purchases, each of
	// which already has its broker acknowledgement or its release.
	if err := httpserver.Shutdown(ctx, g.public.Server, pub); err != nil {
		errs = append(errs, fmt.Errorf("shutdown public listener: %w", err))
	}
	if err := httpserver.Shutdown(ctx, g.admin.Server, adm); err != nil {
		errs = append(errs, fmt.Errorf("shutdown admin listener: %w", err))
	}
	g.log.Info("gateway stopped accepting; in-flight purchases drained")
	return errors.Join(errs...)
}

// waitBuyerIdle waits, until deadline (the shutdown timeout from the
// start of the shutdown), for the releases and settlements of failed
// purchases to finish: a unit given back now is not left to the order
// service's abandoned-reservation pass.
func (g *Gateway) waitBuyerIdle(deadline time.Time) {
	for !g.api.Buyer.Idle() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Close releases the clients; Serve calls it on the way out.
func (g *Gateway) Close() {
	if g.producer != nil {
		if left := g.producer.Close(g.cfg.ShutdownTimeout); left > 0 {
			g.log.Error("kafka producer closed with unflushed messages", "count", left)
		}
		g.producer = nil
	}
	if g.pool != nil {
		g.pool.Close()
		g.pool = nil
	}
	if g.redis != nil {
		g.redis.Close()
		g.redis = nil
	}
}
