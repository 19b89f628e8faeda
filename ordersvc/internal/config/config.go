// Package config is the one typed configuration of the ordersvc binary: every
// setting, its environment name and its default, read in one place and
// validated before anything dials out.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/httpserver"
	"flashsale/pkg/kafkaconf"
	"flashsale/pkg/logging"
	"flashsale/pkg/profiling"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/secret"
)

// Mode says which secrets a subcommand needs: the tools that only talk to
// PostgreSQL and Redis must not demand the HTTP credentials.
type Mode int

const (
	// Tool is migrate, create-sale and load-stock.
	Tool Mode = iota
	// Serve is the long-running service with its two listeners.
	Serve
)

// Secret is a credential; it never prints (pkg/secret).
type Secret = secret.Secret

// Config is every setting of ordersvc.
type Config struct {
	PGDSN        string // FLASHSALE_PG_DSN
	PGDSNDefault bool   // FLASHSALE_PG_DSN set nowhere: PGDSN is the development database
	RedisAddr    string // FLASHSALE_REDIS_ADDR
	KafkaBrokers string // FLASHSALE_KAFKA_BROKERS
	// KafkaAllowWeakTopic lets the service start on brokers off this machine
	// whose orders topic loses orders with one broker (replication factor
	// below 3, min.insync.replicas below 2). FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC
	KafkaAllowWeakTopic bool
	OrdersTopic         string        // FLASHSALE_ORDERS_TOPIC
	DLQTopic            string        // FLASHSALE_DLQ_TOPIC
	ConsumerGroup       string        // FLASHSALE_CONSUMER_GROUP
	BatchSize           int           // FLASHSALE_BATCH_SIZE
	BatchWait           time.Duration // FLASHSALE_BATCH_WAIT
	FetchWait           time.Duration // FLASHSALE_FETCH_WAIT
	JWTKey              Secret        // FLASHSALE_JWT_HS256_KEY or _FILE
	JWTIssuer           string        // FLASHSALE_JWT_ISSUER
	Addr                string        // FLASHSALE_ORDERSVC_ADDR, public API
	AdminAddr           string        // FLASHSALE_ORDERSVC_ADMIN_ADDR
	AdminToken          Secret        // FLASHSALE_ADMIN_TOKEN or _FILE
	ShutdownTimeout     time.Duration // FLASHSALE_SHUTDOWN_TIMEOUT
	RelayInterval       time.Duration // FLASHSALE_RELAY_INTERVAL
	ExpiryInterval      time.Duration // FLASHSALE_EXPIRY_INTERVAL
	ExpiryBatch         int           // FLASHSALE_EXPIRY_BATCH
	// CatchUpTimeout bounds how long load-stock and a reconcile repair wait
	// for the consumer group to reach the orders topic's end before they
	// compute stock from PostgreSQL. FLASHSALE_RECONCILE_CATCHUP_TIMEOUT
	CatchUpTimeout time.Duration
	// ReconcileInterval runs a read-only reconcile of every open sale this
	// often (verdicts on /metrics and the status endpoint); 0 = off.
	// FLASHSALE_RECONCILE_INTERVAL
	ReconcileInterval time.Duration
	LagInterval       time.Duration // FLASHSALE_LAG_INTERVAL, consumer lag readings for /metrics and status
	// InFlightWindow: a Redis holder with no order row and no accepted
	// record is taken for a purchase still in progress until its order id
	// is this old; past it, it is abandoned (its gateway died before
	// publishing). Must exceed the gateways' FLASHSALE_PUBLISH_TIMEOUT by a
	// margin. FLASHSALE_INFLIGHT_WINDOW
	InFlightWindow time.Duration
	// AbandonInterval: how often abandoned reservations of sales in play
	// (open, or just ended) are released (their units back); 0 = off.
	// FLASHSALE_ABANDON_INTERVAL
	AbandonInterval time.Duration
	// AbandonReadRate: holders a second that pass reads from Redis on
	// average, ten pages of 1,000 at a time (0 = unpaced).
	// FLASHSALE_ABANDON_READ_RATE
	AbandonReadRate int
	// HotCopyRetention: how long a sale's copy in Redis is kept after its
	// end, payment window and in-flight window; then its keys expire.
	// FLASHSALE_HOT_COPY_RETENTION
	HotCopyRetention time.Duration
	// FLASHSALE_PAYMENT_WEBHOOK_SECRET or _FILE; empty: no webhook endpoint
	PaymentWebhookSecret Secret
	// PublicPay lets the shopper's own POST .../pay mark her order PAID
	// with the reference she sends. With a payment provider's webhook
	// configured the provider's signed confirmation is the proof of
	// payment, and a shopper must not pay herself: the default is then
	// off (403 PAYMENT_BY_PROVIDER). FLASHSALE_PUBLIC_PAY
	PublicPay bool
	Log       logging.Config   // FLASHSALE_LOG_FORMAT, FLASHSALE_LOG_LEVEL
	Profile   profiling.Config // FLASHSALE_CPU_PROFILE, FLASHSALE_ALLOC_PROFILE
	// KafkaSecurity is TLS and SASL towards the brokers, for every Kafka
	// client of the service. FLASHSALE_KAFKA_SECURITY_PROTOCOL etc.
	KafkaSecurity kafkaconf.Security
	// PublicHTTP and AdminHTTP are the listeners' timeouts and limits:
	// FLASHSALE_READ_TIMEOUT, FLASHSALE_WRITE_TIMEOUT, FLASHSALE_IDLE_TIMEOUT
	// and FLASHSALE_CONCURRENCY (shared with the gateway) for both;
	// FLASHSALE_ORDERSVC_MAX_BODY_BYTES and
	// FLASHSALE_ORDERSVC_ADMIN_MAX_BODY_BYTES bound their request bodies.
	PublicHTTP httpserver.Config
	AdminHTTP  httpserver.Config
}

// Minimum secret lengths.
const (
	MinJWTKeyLen        = 32
	MinAdminTokenLen    = 16
	MinWebhookSecretLen = 32
)

// Load reads the settings from env (and FLASHSALE_CONFIG) over their
// defaults and validates them for mode. The error lists every problem, each
// naming its variable; a name in the file or a FLASHSALE_* variable that no
// program of the project reads is one.
func Load(env pkgconfig.Env, mode Mode) (Config, error) {
	src := pkgconfig.NewSource(env)
	c := Config{
		PGDSN:               src.String("FLASHSALE_PG_DSN", "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable"),
		RedisAddr:           src.String("FLASHSALE_REDIS_ADDR", "127.0.0.1:16379"),
		KafkaBrokers:        src.String("FLASHSALE_KAFKA_BROKERS", "127.0.0.1:19092"),
		KafkaAllowWeakTopic: src.Bool("FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC", false),
		OrdersTopic:         src.String("FLASHSALE_ORDERS_TOPIC", "flash-sale-orders"),
		DLQTopic:            src.String("FLASHSALE_DLQ_TOPIC", "flash-sale-orders.dlq"),
		ConsumerGroup:       src.String("FLASHSALE_CONSUMER_GROUP", "ordersvc"),
		BatchSize:           src.Int("FLASHSALE_BATCH_SIZE", 500),
		BatchWait:           src.Duration("FLASHSALE_BATCH_WAIT", 20*time.Millisecond),
		FetchWait:           src.Duration("FLASHSALE_FETCH_WAIT", 100*time.Millisecond),
		JWTKey:              src.Secret("FLASHSALE_JWT_HS256_KEY"),
		JWTIssuer:           src.String("FLASHSALE_JWT_ISSUER", "flashsale"),
		Addr:                src.String("FLASHSALE_ORDERSVC_ADDR", "127.0.0.1:8090"),
		AdminAddr:           src.String("FLASHSALE_ORDERSVC_ADMIN_ADDR", "127.0.0.1:8091"),
		AdminToken:          src.Secret("FLASHSALE_ADMIN_TOKEN"),
		ShutdownTimeout:     src.Duration("FLASHSALE_SHUTDOWN_TIMEOUT", 15*time.Second),
		RelayInterval:       src.Duration("FLASHSALE_RELAY_INTERVAL", 500*time.Millisecond),
		ExpiryInterval:      src.Duration("FLASHSALE_EXPIRY_INTERVAL", time.Second),
		ExpiryBatch:         src.Int("FLASHSALE_EXPIRY_BATCH", 500),

		CatchUpTimeout:    src.Duration("FLASHSALE_RECONCILE_CATCHUP_TIMEOUT", 30*time.Second),
		ReconcileInterval: src.Duration("FLASHSALE_RECONCILE_INTERVAL", 0),
		LagInterval:       src.Duration("FLASHSALE_LAG_INTERVAL", 2*time.Second),
		InFlightWindow:    src.Duration("FLASHSALE_INFLIGHT_WINDOW", 30*time.Second),
		AbandonInterval:   src.Duration("FLASHSALE_ABANDON_INTERVAL", 5*time.Second),
		AbandonReadRate:   src.Int("FLASHSALE_ABANDON_READ_RATE", 20000),
		HotCopyRetention:  src.Duration("FLASHSALE_HOT_COPY_RETENTION", 7*24*time.Hour),

		PaymentWebhookSecret: src.Secret("FLASHSALE_PAYMENT_WEBHOOK_SECRET"),
		PGDSNDefault:         !src.IsSet("FLASHSALE_PG_DSN"),
	}
	c.PublicPay = src.Bool("FLASHSALE_PUBLIC_PAY", len(c.PaymentWebhookSecret) == 0)
	c.Log = logging.Load(src)
	c.Profile = profiling.Load(src)
	c.KafkaSecurity = kafkaconf.Load(src)
	c.PublicHTTP, c.AdminHTTP = loadHTTP(src)
	src.RejectUnknown()
	return c, errors.Join(src.Err(), c.Validate(mode))
}

// loadHTTP reads the listeners' settings: one set of timeouts, a body
// bound each (the admin API takes whole sales, the public one small
// actions).
func loadHTTP(src *pkgconfig.Source) (public, admin httpserver.Config) {
	public = httpserver.Config{
		ReadTimeout:  src.Duration("FLASHSALE_READ_TIMEOUT", 5*time.Second),
		WriteTimeout: src.Duration("FLASHSALE_WRITE_TIMEOUT", 5*time.Second),
		IdleTimeout:  src.Duration("FLASHSALE_IDLE_TIMEOUT", 60*time.Second),
		Concurrency:  src.Int("FLASHSALE_CONCURRENCY", 256*1024),
		MaxBodyBytes: src.Int("FLASHSALE_ORDERSVC_MAX_BODY_BYTES", 64<<10),
	}
	admin = public
	admin.MaxBodyBytes = src.Int("FLASHSALE_ORDERSVC_ADMIN_MAX_BODY_BYTES", 2<<20)
	return public, admin
}

// checkHTTP: the listeners' settings that cannot work (serve only).
func (c Config) checkHTTP(p *problems) {
	positive := map[string]time.Duration{"FLASHSALE_READ_TIMEOUT": c.PublicHTTP.ReadTimeout,
		"FLASHSALE_WRITE_TIMEOUT": c.PublicHTTP.WriteTimeout, "FLASHSALE_IDLE_TIMEOUT": c.PublicHTTP.IdleTimeout}
	for name, d := range positive {
		if d <= 0 {
			p.add(name, "want > 0, got %s", d)
		}
	}
	if c.PublicHTTP.Concurrency <= 0 {
		p.add("FLASHSALE_CONCURRENCY", "want > 0, got %d", c.PublicHTTP.Concurrency)
	}
	if c.PublicHTTP.MaxBodyBytes <= 0 {
		p.add("FLASHSALE_ORDERSVC_MAX_BODY_BYTES", "want > 0, got %d", c.PublicHTTP.MaxBodyBytes)
	}
	if c.AdminHTTP.MaxBodyBytes <= 0 {
		p.add("FLASHSALE_ORDERSVC_ADMIN_MAX_BODY_BYTES", "want > 0, got %d", c.AdminHTTP.MaxBodyBytes)
	}
}

// Validate reports every problem of c for mode at once, each naming its
// variable.
func (c Config) Validate(mode Mode) error {
	var p problems
	c.checkServers(&p)
	c.checkBatches(&p)
	c.checkIntervals(&p)
	if mode == Serve {
		c.checkServe(&p)
	}
	return errors.Join(p...)
}

// problems collects what is wrong, one error per variable.
type problems []error

func (p *problems) add(name, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (p *problems) hostPort(name, v string) {
	if _, _, err := net.SplitHostPort(v); err != nil {
		p.add(name, "want host:port, got %q", v)
	}
}

// checkServers: where PostgreSQL, Redis and Kafka are, and the topics and
// consumer group this service uses on Kafka.
func (c Config) checkServers(p *problems) {
	if u, err := url.Parse(c.PGDSN); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		p.add("FLASHSALE_PG_DSN", "want a postgres:// URL")
	}
	if err := redisconn.Validate(c.RedisAddr); err != nil {
		p.add("FLASHSALE_REDIS_ADDR", "want host:port, a comma-separated list of them (cluster seeds) or a redis:// or rediss:// URL: %v", err)
	}
	if strings.TrimSpace(c.KafkaBrokers) == "" {
		p.add("FLASHSALE_KAFKA_BROKERS", "empty")
	}
	for _, b := range strings.Split(c.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			p.hostPort("FLASHSALE_KAFKA_BROKERS", b)
		}
	}
	if c.OrdersTopic == "" {
		p.add("FLASHSALE_ORDERS_TOPIC", "empty")
	}
	if c.DLQTopic == "" {
		p.add("FLASHSALE_DLQ_TOPIC", "empty")
	}
	if c.DLQTopic != "" && c.DLQTopic == c.OrdersTopic {
		p.add("FLASHSALE_DLQ_TOPIC", "must differ from FLASHSALE_ORDERS_TOPIC")
	}
	if c.ConsumerGroup == "" {
		p.add("FLASHSALE_CONSUMER_GROUP", "empty")
	}
}

// checkBatches: the sizes and waits of the consumer's and the sweeper's
// batches.
func (c Config) checkBatches(p *problems) {
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		p.add("FLASHSALE_BATCH_SIZE", "want 1..10000, got %d", c.BatchSize)
	}
	if c.BatchWait <= 0 || c.BatchWait > 10*time.Second {
		p.add("FLASHSALE_BATCH_WAIT", "want > 0 and <= 10s, got %s", c.BatchWait)
	}
	if c.FetchWait < time.Millisecond || c.FetchWait > 10*time.Second {
		p.add("FLASHSALE_FETCH_WAIT", "want >= 1ms and <= 10s, got %s", c.FetchWait)
	}
	if c.ExpiryBatch < 1 || c.ExpiryBatch > 10000 {
		p.add("FLASHSALE_EXPIRY_BATCH", "want 1..10000, got %d", c.ExpiryBatch)
	}
}

// checkIntervals: the background loops' periods and the bounds on waits.
func (c Config) checkIntervals(p *problems) {
	if c.ShutdownTimeout <= 0 {
		p.add("FLASHSALE_SHUTDOWN_TIMEOUT", "want > 0, got %s", c.ShutdownTimeout)
	}
	if c.RelayInterval <= 0 {
		p.add("FLASHSALE_RELAY_INTERVAL", "want > 0, got %s", c.RelayInterval)
	}
	if c.ExpiryInterval <= 0 {
		p.add("FLASHSALE_EXPIRY_INTERVAL", "want > 0, got %s", c.ExpiryInterval)
	}
	if c.CatchUpTimeout < 0 || c.CatchUpTimeout > 10*time.Minute {
		p.add("FLASHSALE_RECONCILE_CATCHUP_TIMEOUT", "want 0..10m, got %s", c.CatchUpTimeout)
	}
	if c.ReconcileInterval < 0 || (c.ReconcileInterval > 0 && c.ReconcileInterval < time.Second) {
		p.add("FLASHSALE_RECONCILE_INTERVAL", "want 0 (off) or >= 1s, got %s", c.ReconcileInterval)
	}
	if c.InFlightWindow < time.Second || c.InFlightWindow > time.Hour {
		p.add("FLASHSALE_INFLIGHT_WINDOW", "want 1s..1h (and above the gateways' publish timeout), got %s", c.InFlightWindow)
	}
	if c.AbandonInterval < 0 || (c.AbandonInterval > 0 && c.AbandonInterval < 100*time.Millisecond) {
		p.add("FLASHSALE_ABANDON_INTERVAL", "want 0 (off) or >= 100ms, got %s", c.AbandonInterval)
	}
	if c.AbandonInterval > c.InFlightWindow {
		// A pass at least once a window: an abandoned unit comes back about
		// a window after its purchase, as README and the gateway's log say.
		p.add("FLASHSALE_ABANDON_INTERVAL", "want at most FLASHSALE_INFLIGHT_WINDOW (%s), got %s", c.InFlightWindow, c.AbandonInterval)
	}
	if c.AbandonReadRate != 0 && (c.AbandonReadRate < 1000 || c.AbandonReadRate > 10_000_000) {
		// Below a page a second, one big sale's pass outlasts any sensible
		// interval; above ten million it is not pacing anything.
		p.add("FLASHSALE_ABANDON_READ_RATE", "want 0 (unpaced) or 1000..10000000 holders a second, got %d", c.AbandonReadRate)
	}
	if c.HotCopyRetention < time.Hour {
		// Past its payment and in-flight windows a sale can still see a
		// late release (a gateway settling held orders for minutes, a
		// consumer far behind); an hour covers them.
		p.add("FLASHSALE_HOT_COPY_RETENTION", "want >= 1h, got %s", c.HotCopyRetention)
	}
	if c.LagInterval < 100*time.Millisecond {
		p.add("FLASHSALE_LAG_INTERVAL", "want >= 100ms, got %s", c.LagInterval)
	}
}

// checkServe: what only `serve` needs: the secrets and the listeners.
func (c Config) checkServe(p *problems) {
	if n := len(c.PaymentWebhookSecret); n > 0 && n < MinWebhookSecretLen {
		p.add("FLASHSALE_PAYMENT_WEBHOOK_SECRET", "at least %d bytes when set, got %d", MinWebhookSecretLen, n)
	}
	if !c.PublicPay && len(c.PaymentWebhookSecret) == 0 {
		p.add("FLASHSALE_PUBLIC_PAY", "false needs a payment webhook (FLASHSALE_PAYMENT_WEBHOOK_SECRET): else nothing pays an order, and every one expires")
	}
	if len(c.JWTKey) < MinJWTKeyLen {
		p.add("FLASHSALE_JWT_HS256_KEY", "required, at least %d bytes (or FLASHSALE_JWT_HS256_KEY_FILE), got %d", MinJWTKeyLen, len(c.JWTKey))
	}
	if len(c.AdminToken) < MinAdminTokenLen {
		p.add("FLASHSALE_ADMIN_TOKEN", "required, at least %d bytes (or FLASHSALE_ADMIN_TOKEN_FILE), got %d", MinAdminTokenLen, len(c.AdminToken))
	}
	p.hostPort("FLASHSALE_ORDERSVC_ADDR", c.Addr)
	p.hostPort("FLASHSALE_ORDERSVC_ADMIN_ADDR", c.AdminAddr)
	if c.Addr != "" && c.Addr == c.AdminAddr {
		p.add("FLASHSALE_ORDERSVC_ADMIN_ADDR", "must differ from FLASHSALE_ORDERSVC_ADDR")
	}
	c.checkHTTP(p)
}

// RedactedDSN is dsn without its password and query (which may carry one),
// for saying which database a tool uses.
func RedactedDSN(dsn string) string { return pkgconfig.RedactedDSN(dsn) }
