package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"golang.org/x/sync/errgroup"

	"flashsale/ordersvc/internal/api"
	"flashsale/ordersvc/internal/config"
	"flashsale/ordersvc/internal/consumer"
	"flashsale/ordersvc/internal/expiry"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/relay"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/auth"
	"flashsale/pkg/httpserver"
	"flashsale/pkg/redisconn"
)

// Serve migrates the database, then runs the consumer, the relay, the
// expiry sweeper and both listeners until ctx ends, and shuts them down in
// order: unready, stop accepting (requests in flight finish), finish the
// in-flight batch and commit its offsets, flush the dead-letter producer,
// let the sweeper finish its batch and the relay stop (rows not drained
// stay in the outbox for the next start), close the clients and pools.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	ignoreHangups(ctx, log)
	verifier, err := auth.NewVerifier(cfg.JWTKey, nil, cfg.JWTIssuer, "")
	if err != nil {
		return fmt.Errorf("jwt verifier: %w", err)
	}
	c, err := openClients(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer c.close()
	svc, err := newService(ctx, cfg, c, verifier, log)
	if err != nil {
		return err
	}
	publicLn, adminLn, err := listen(ctx, cfg)
	if err != nil {
		svc.cons.Close()
		return err
	}
	log.Info("ordersvc serving", "public", publicLn.Addr().String(), "admin", adminLn.Addr().String(),
		"topic", cfg.OrdersTopic, "group", cfg.ConsumerGroup)
	err = svc.run(ctx, cfg, publicLn, adminLn, log)
	log.Info("ordersvc stopped", "err", err)
	return err
}

// ignoreHangups keeps SIGHUP from ending the service until ctx ends. Its
// default action is to exit at once, skipping the graceful shutdown, and
// operators send it to every flashsale process after a configuration push
// (the gateway reloads on it). The order service has nothing to reload: it
// logs that its settings take effect at a restart.
func ignoreHangups(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Warn("SIGHUP ignored: the order service reads its configuration at start; restart it to apply a change")
			}
		}
	}()
}

// clients are the connections the service holds for its whole life.
type clients struct {
	pool *pgxpool.Pool
	rc   rueidis.Client
	lag  *lag.Reader
}

func (c clients) close() {
	c.lag.Close()
	c.rc.Close()
	c.pool.Close()
}

// openClients migrates the database and opens Redis and the Kafka lag
// reader, checking that the orders topic keeps orders through a broker's
// loss before anything consumes from it.
func openClients(ctx context.Context, cfg config.Config, log *slog.Logger) (clients, error) {
	pool, from, to, err := openMigrated(ctx, cfg)
	if err != nil {
		return clients{}, err
	}
	log.Info("schema ready", "from", from, "to", to)
	rc, err := openRedis(ctx, cfg, log)
	if err != nil {
		pool.Close()
		return clients{}, err
	}
	lr, err := openLag(cfg)
	if err != nil {
		rc.Close()
		pool.Close()
		return clients{}, err
	}
	c := clients{pool: pool, rc: rc, lag: lr}
	if err := checkDurability(ctx, cfg, lr, log); err != nil {
		c.close()
		return clients{}, err
	}
	return c, nil
}

// service is the running parts: the consumer and what returns stock (the
// relay, the sweeper), the lag readings, the sale operations and the two
// listeners' servers.
type service struct {
	cons          *consumer.Consumer
	relay         *relay.Relay
	sweeper       *expiry.Sweeper
	tracker       *lag.Tracker
	sales         *sale.Service
	health        *api.Health
	redis         redisCheck            // readiness of Redis, and the clock's skew from it
	webhook       *api.PaymentWebhook   // nil without FLASHSALE_PAYMENT_WEBHOOK_SECRET
	pgClock       func(context.Context) // measures PostgreSQL's clock for /metrics
	public, admin *httpserver.Server
}

// newService wires the parts over c. On error nothing is left open.
func newService(ctx context.Context, cfg config.Config, c clients, verifier *auth.Verifier, log *slog.Logger) (*service, error) {
	st, m := store.New(c.pool), metrics.New()
	redis := newRedisCheck(c.rc, cfg, log)
	if err := m.Register(redis.w.Collector(metrics.Namespace)); err != nil {
		return nil, fmt.Errorf("register the clock skew: %w", err)
	}
	if err := m.CountCheckedBatches(st.CheckedBatches, store.CheckedRejection, store.CheckedConflict); err != nil {
		return nil, fmt.Errorf("register the checked batches: %w", err)
	}
	stk := stockStore(c.rc, st)
	rl := relay.New(st, stk, log.With("component", "relay"), m)
	var webhook *api.PaymentWebhook
	if len(cfg.PaymentWebhookSecret) > 0 {
		var err error
		if webhook, err = api.NewPaymentWebhook(st, c.rc, cfg.PaymentWebhookSecret, m, log); err != nil {
			return nil, err
		}
	}
	tracker := lag.NewTracker(c.lag, func(rd lag.Reading) {
		parts := make(map[int32]int64, len(rd.Lag.Partitions))
		for _, p := range rd.Lag.Partitions {
			parts[p.Partition] = p.Lag
		}
		m.ObserveConsumerLag(rd.Err == nil, rd.Lag.Total, parts, rd.At)
	})
	cons, err := consumer.New(consumer.Config{
		Brokers: cfg.KafkaBrokers, Topic: cfg.OrdersTopic, DLQTopic: cfg.DLQTopic, Group: cfg.ConsumerGroup,
		BatchSize: cfg.BatchSize, BatchWait: cfg.BatchWait, FetchWait: cfg.FetchWait, ShutdownTimeout: cfg.ShutdownTimeout, Security: cfg.KafkaSecurity,
		Lag: tracker,
	}, st, stk, rl, log.With("component", "consumer"), m)
	if err != nil {
		return nil, err
	}
	svc := &service{cons: cons, relay: rl, tracker: tracker, webhook: webhook, pgClock: measurePostgresClock(st, m, log),
		sweeper: expiry.New(st, rl, log.With("component", "expiry"), m, cfg.ExpiryBatch),
		redis:   redis,
		sales: sale.NewService(st, stk, sale.WithAcceptedRecords(c.rc), sale.WithCatchUp(c.lag, cfg.CatchUpTimeout),
			sale.WithLagTracker(tracker), sale.WithMetrics(m), sale.WithInFlightWindow(cfg.InFlightWindow),
			sale.WithReleases(rl.Drain), sale.WithHolderReadRate(cfg.AbandonReadRate)),
	}
	svc.health = api.NewHealth(st, m, map[string]api.ReadyChecker{"kafka-consumer": cons, "redis": svc.redis})
	// Requests in flight at shutdown finish (their own timeouts bound them,
	// well inside ShutdownTimeout) rather than fail on the cancelled root.
	base := context.WithoutCancel(ctx)
	countPanic := httpserver.OnPanic(m.Panics.Inc)
	countRefused := httpserver.OnConnRefused(func(reason string) { m.ConnsRefused.WithLabelValues(reason).Inc() })
	public := api.NewPublic(st, c.rc, rl, verifier, svc.health, log)
	if !cfg.PublicPay {
		public.ProviderPaysOnly()
	}
	svc.public = httpserver.New("ordersvc-public", public.Handler(base), cfg.PublicHTTP, log, countPanic, countRefused)
	svc.admin = httpserver.New("ordersvc-admin", api.NewAdmin(svc.sales, cfg.AdminToken, svc.health, webhook, log).StopLongOpsWith(ctx).Handler(base), cfg.AdminHTTP, log, countPanic, countRefused)
	return svc, nil
}

// redisCheck is the readiness check of Redis, which the service writes
// (releases, repairs, loads): it answers, no node may evict the sale's
// keys, and this host's clock agrees with Redis's.
type redisCheck struct{ w *redisconn.Watch }

func newRedisCheck(rc rueidis.Client, cfg config.Config, log *slog.Logger) redisCheck {
	return redisCheck{redisconn.NewWatch(rc, redisconn.Recheck, redisconn.MaxClockSkew(cfg.InFlightWindow), log)}
}

func (r redisCheck) Ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return r.w.Ready(ctx)
}

// listen opens the public and the admin listener.
func listen(ctx context.Context, cfg config.Config) (public, admin net.Listener, err error) {
	var lc net.ListenConfig
	if public, err = lc.Listen(ctx, "tcp", cfg.Addr); err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	if admin, err = lc.Listen(ctx, "tcp", cfg.AdminAddr); err != nil {
		public.Close()
		return nil, nil, fmt.Errorf("listen %s: %w", cfg.AdminAddr, err)
	}
	return public, admin, nil
}

// retentionInterval is how often the sales' copies in Redis are given
// their expiry (a copy loaded since the last pass has none until the next).
const retentionInterval = time.Minute

// measurePostgresClock returns one measure of PostgreSQL's clock against
// this host's, recorded for /metrics (alert FlashsaleClockSkew). It is
// exported, not a readiness check: PostgreSQL ends the payment windows
// that the gateways' clocks start, and one PostgreSQL is every order
// service's, so a readiness check on it would stop them all at once. A
// failed measure, or one whose round trip is too slow to tell (over a
// second), keeps the last figure.
func measurePostgresClock(st *store.Store, m *metrics.Counters, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		skew, within, err := st.ClockSkew(ctx, time.Now)
		if err != nil || within > time.Second/2 {
			log.Debug("postgres clock not measured", "err", err, "within", within)
			return
		}
		m.ObservePostgresClockSkew(skew)
	}
}

// every calls f now and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func(context.Context)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// unsettledInterval is how often the refused payments still to refund
// are counted for /metrics.
const unsettledInterval = 30 * time.Second

// run serves until ctx ends, then shuts down in order (see Serve).
func (s *service) run(ctx context.Context, cfg config.Config, publicLn, adminLn net.Listener, log *slog.Logger) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(s.public, publicLn) })
	g.Go(func() error { return serveHTTP(s.admin, adminLn) })
	g.Go(func() error { return s.cons.Run(gctx) })
	g.Go(func() error { return s.relay.Run(gctx, cfg.RelayInterval) })
	g.Go(func() error { return s.sweeper.Run(gctx, cfg.ExpiryInterval) })
	g.Go(func() error { return s.tracker.Run(gctx, cfg.LagInterval) })
	g.Go(func() error { return s.redis.w.Run(gctx) })
	g.Go(func() error { return every(gctx, redisconn.Recheck, s.pgClock) })
	if cfg.ReconcileInterval > 0 {
		g.Go(func() error {
			return s.sales.WatchOpenSales(gctx, cfg.ReconcileInterval, log.With("component", "reconcile"))
		})
	}
	if cfg.AbandonInterval > 0 {
		g.Go(func() error {
			return s.sales.WatchAbandoned(gctx, cfg.AbandonInterval, log.With("component", "abandoned"))
		})
	}
	g.Go(func() error {
		return s.sales.WatchRetention(gctx, retentionInterval, cfg.HotCopyRetention, log.With("component", "retention"))
	})
	if s.webhook != nil {
		g.Go(func() error { return every(gctx, unsettledInterval, s.webhook.CountUnsettled) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.health.Drain()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), cfg.ShutdownTimeout)
		defer cancel()
		return errors.Join(shutdownHTTP(sctx, "public", s.public, publicLn), shutdownHTTP(sctx, "admin", s.admin, adminLn),
			s.relay.Wait(sctx)) // a cancel's release that outlived its answer
	})
	return g.Wait()
}

func serveHTTP(s *httpserver.Server, ln net.Listener) error {
	if err := s.Serve(ln); err != nil {
		return fmt.Errorf("serve %s: %w", s.Name, err)
	}
	return nil
}

func shutdownHTTP(ctx context.Context, name string, s *httpserver.Server, ln net.Listener) error {
	if err := httpserver.Shutdown(ctx, s.Server, ln); err != nil {
		return fmt.Errorf("shutdown %s listener: %w", name, err)
	}
	return nil
}

// checkDurability reads the orders topic's replication settings at start.
// Outside the local stack (any broker not on loopback) a topic that would
// lose acknowledged orders with one broker (replication factor below 3,
// min.insync.replicas below 2, unclean election) stops the service unless
// FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC says the operator knows. A topic that
// cannot be read is logged, not fatal: the broker may be starting, and the
// consumer waits for it anyway.
func checkDurability(ctx context.Context, cfg config.Config, lr *lag.Reader, log *slog.Logger) error {
	d, err := lr.Durability(ctx)
	switch {
	case errors.Is(err, lag.ErrTopicMissing):
		log.Warn("orders topic does not exist yet: the broker will create it with its defaults on the first publish; create it with the production settings instead (deploy/README.md)",
			"topic", cfg.OrdersTopic)
		return nil
	case err != nil:
		log.Warn("orders topic settings not readable at start", "topic", cfg.OrdersTopic, "err", err)
		return nil
	case d.Durable():
		log.Info("orders topic", "topic", cfg.OrdersTopic, "settings", d.String())
		return nil
	case lag.Loopback(cfg.KafkaBrokers):
		log.Info("orders topic is not replicated (local stack)", "topic", cfg.OrdersTopic, "settings", d.String())
		return nil
	case cfg.KafkaAllowWeakTopic:
		log.Error("orders topic loses acknowledged orders when one broker dies; running anyway (FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC)",
			"topic", cfg.OrdersTopic, "settings", d.String())
		return nil
	}
	return fmt.Errorf("orders topic %q has %s: one broker's loss would lose orders shoppers were told are accepted; "+
		"give it replication factor 3, min.insync.replicas 2 and no unclean election (deploy/README.md), "+
		"or set FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC=true", cfg.OrdersTopic, d)
}
