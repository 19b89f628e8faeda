// Package config is the gateway's one typed configuration: defaults in code,
// overridden by the FLASHSALE_CONFIG file and the environment, validated
// before anything dials out.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"flashsale/gateway/internal/ratelimit"
	pkgconfig "flashsale/pkg/config"
	"flashsale/pkg/httpserver"
	"flashsale/pkg/kafkaconf"
	"flashsale/pkg/logging"
	"flashsale/pkg/profiling"
	"flashsale/pkg/redisconn"
	"flashsale/pkg/secret"
)

// rule parses "rate/burst" (per second), or "0" / "off" to disable.
func rule(s *pkgconfig.Source, name, def string) ratelimit.Rule {
	v := s.String(name, def)
	if v == "0" || v == "off" {
		return ratelimit.Rule{}
	}
	r, b, ok := strings.Cut(v, "/")
	rate, err1 := strconv.ParseFloat(r, 64)
	burst, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		s.Fail(name, fmt.Errorf("want RATE/BURST like 1/3, or off: %q", v))
		return ratelimit.Rule{}
	}
	rl := ratelimit.Rule{Rate: rate, Burst: burst}
	if err := rl.Validate(); err != nil {
		s.Fail(name, fmt.Errorf("%q: %w", v, err))
		return ratelimit.Rule{}
	}
	return rl
}

// prefixes parses a comma-separated list of CIDRs or addresses.
func prefixes(s *pkgconfig.Source, name string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range list(s.String(name, "")) {
		if !strings.Contains(p, "/") {
			a, err := netip.ParseAddr(p)
			if err != nil {
				s.Fail(name, fmt.Errorf("not an address or CIDR: %q", p))
				continue
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			s.Fail(name, fmt.Errorf("not a CIDR: %q", p))
			continue
		}
		out = append(out, pr.Masked())
	}
	return out
}

func list(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Config of the gateway.
type Config struct {
	Addr      string // public listener for shoppers
	AdminAddr string // metrics, health, operator endpoints

	RedisAddr    string
	RedisTimeout time.Duration // bound of one Redis call on the purchase path
	// RedisFlushDelay is how long a Redis connection waits for more
	// commands before it writes (rueidis MaxFlushDelay): fewer, larger
	// writes for both sides under load, at most this much added latency.
	RedisFlushDelay time.Duration
	// RedisConns is how many pipelined connections the gateway keeps to
	// each Redis node (a power of two). One carries the most commands per
	// write and per read, which cost Redis a third less CPU while selling
	// than four (benchmarks/README.md); more can help a Redis node with
	// cores to spare for its I/O threads.
	RedisConns   int
	KafkaBrokers string
	OrdersTopic  string
	// PublishTimeout bounds the wait for the broker's acknowledgement.
	PublishTimeout time.Duration
	PublishLinger  time.Duration
	// PublishFailFastAfter deliveries to one partition failed in a row make
	// the purchases of its sales answer 503 at once for PublishFailFastFor
	// instead of each waiting out the publish timeout; then one trial
	// delivery decides (0: off). Other partitions' sales keep selling.
	PublishFailFastAfter int
	PublishFailFastFor   time.Duration
	// PublishSpread puts one item's orders on every partition of the
	// orders topic in turn (the default) instead of keying them by item.
	PublishSpread bool
	PostgresDSN   string // catalog reads, and settling unconfirmed publishes
	// SettleTimeout bounds one settling transaction (the REJECTED row that
	// decides an order whose publish was not confirmed).
	SettleTimeout time.Duration
	// InFlightWindow is the order service's FLASHSALE_INFLIGHT_WINDOW (the
	// same variable): an acknowledgement later than half of it after the
	// purchase began is settled, not trusted (purchase.SetInFlightWindow).
	InFlightWindow time.Duration
	OrdersvcAddr   string // host:port the order endpoints are proxied to
	// OrdersvcAdminAddr is the order service's admin listener, read by the
	// dashboard for orders by status, consumer lag and the reconcile verdict.
	OrdersvcAdminAddr string
	// ReusePort opens the public listener with SO_REUSEPORT, so several
	// gateway processes share one port and the kernel spreads connections.
	ReusePort bool

	JWTKey     secret.Secret
	JWTIssuer  string
	GateKey    secret.Secret
	AdminToken secret.Secret
	// KafkaSecurity is TLS and SASL towards the brokers.
	KafkaSecurity kafkaconf.Security

	// Rate limits per route, per user (JWT subject) and per client IP.
	LimitPurchaseUser ratelimit.Rule
	LimitPurchaseIP   ratelimit.Rule
	LimitQueueUser    ratelimit.Rule
	LimitQueueIP      ratelimit.Rule
	// LimitPollUser bounds each shopper's polls of her queue
	// ticket, apart from the queue's per-user rule (httpapi.NewPollLimits).
	LimitPollUser  ratelimit.Rule
	LimitMaxKeys   int            // buckets held per limiter, bounding memory
	TrustedProxies []netip.Prefix // peers whose X-Forwarded-For is believed

	QueueGrace      time.Duration // a queue place without a poll for this long is given up
	QueueAdvance    time.Duration // how often this gateway advances admission
	AdmissionTTL    time.Duration // lifetime of an admission token
	QueueBypass     []string      // users who need no admission token (test accounts)
	PowChallengeTTL time.Duration

	CatalogRefresh time.Duration
	StockPoll      time.Duration // also the bound on a stale sold-out flag

	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	IdleTimeout     time.Duration
	MaxConnsPerIP   int
	Concurrency     int
	MaxBodyBytes    int
	ShutdownTimeout time.Duration
	Log             logging.Config
	Profile         profiling.Config // FLASHSALE_CPU_PROFILE, FLASHSALE_ALLOC_PROFILE
	// Settings are the texts every setting above was read from (secrets
	// included: never print a value), so that a reload can name the
	// changes it does not apply (Reloadable).
	Settings pkgconfig.Settings
}

// Reloadable are the settings a running gateway applies on SIGHUP; a
// change to any other needs a restart.
var Reloadable = []string{"FLASHSALE_LIMIT_PURCHASE_USER", "FLASHSALE_LIMIT_PURCHASE_IP",
	"FLASHSALE_LIMIT_QUEUE_USER", "FLASHSALE_LIMIT_QUEUE_IP", "FLASHSALE_LIMIT_POLL_USER", "FLASHSALE_QUEUE_BYPASS"}

// NeedRestart lists, sorted, the settings whose text next changes from c's
// that a reload does not apply.
func (c Config) NeedRestart(next Config) []string {
	return slices.DeleteFunc(c.Settings.Changed(next.Settings), func(name string) bool {
		return slices.Contains(Reloadable, name)
	})
}

// HTTP is the listeners' configuration (both listeners share it).
func (c Config) HTTP() httpserver.Config {
	return httpserver.Config{ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout,
		MaxBodyBytes: c.MaxBodyBytes, Concurrency: c.Concurrency, MaxConnsPerIP: c.MaxConnsPerIP}
}

// Load reads the configuration from env (and FLASHSALE_CONFIG). A name in
// the file or a FLASHSALE_* variable that no program of the project reads
// is a problem like a bad value.
func Load(env pkgconfig.Env) (Config, error) {
	s := pkgconfig.NewSource(env)
	c := Config{
		Addr:                 s.String("FLASHSALE_GATEWAY_ADDR", "127.0.0.1:8080"),
		AdminAddr:            s.String("FLASHSALE_GATEWAY_ADMIN_ADDR", "127.0.0.1:8081"),
		RedisAddr:            s.String("FLASHSALE_REDIS_ADDR", "127.0.0.1:16379"),
		RedisTimeout:         s.Duration("FLASHSALE_REDIS_TIMEOUT", time.Second),
		RedisFlushDelay:      s.Duration("FLASHSALE_REDIS_FLUSH_DELAY", 100*time.Microsecond),
		RedisConns:           s.Int("FLASHSALE_REDIS_CONNS", 1),
		KafkaBrokers:         s.String("FLASHSALE_KAFKA_BROKERS", "127.0.0.1:19092"),
		OrdersTopic:          s.String("FLASHSALE_ORDERS_TOPIC", "flash-sale-orders"),
		PublishTimeout:       s.Duration("FLASHSALE_PUBLISH_TIMEOUT", 3*time.Second),
		PublishLinger:        s.Duration("FLASHSALE_PUBLISH_LINGER", 5*time.Millisecond),
		PublishFailFastAfter: s.Int("FLASHSALE_PUBLISH_FAIL_FAST_AFTER", 5),
		PublishFailFastFor:   s.Duration("FLASHSALE_PUBLISH_FAIL_FAST_FOR", time.Second),
		PublishSpread:        s.Bool("FLASHSALE_PUBLISH_SPREAD", true),
		PostgresDSN:          s.String("FLASHSALE_PG_DSN", "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable"),
		SettleTimeout:        s.Duration("FLASHSALE_SETTLE_TIMEOUT", time.Second),
		InFlightWindow:       s.Duration("FLASHSALE_INFLIGHT_WINDOW", 30*time.Second),
		OrdersvcAddr:         s.String("FLASHSALE_ORDERSVC_ADDR", "127.0.0.1:8090"),
		OrdersvcAdminAddr:    s.String("FLASHSALE_ORDERSVC_ADMIN_ADDR", "127.0.0.1:8091"),
		ReusePort:            s.Bool("FLASHSALE_REUSEPORT", false),
		JWTKey:               s.Secret("FLASHSALE_JWT_HS256_KEY"),
		JWTIssuer:            s.String("FLASHSALE_JWT_ISSUER", "flashsale"),
		GateKey:              s.Secret("FLASHSALE_GATE_KEY"),
		AdminToken:           s.Secret("FLASHSALE_ADMIN_TOKEN"),
		KafkaSecurity:        kafkaconf.Load(s),
		LimitPurchaseUser:    rule(s, "FLASHSALE_LIMIT_PURCHASE_USER", "1/3"),
		LimitPurchaseIP:      rule(s, "FLASHSALE_LIMIT_PURCHASE_IP", "50/100"),
		LimitQueueUser:       rule(s, "FLASHSALE_LIMIT_QUEUE_USER", "2/5"),
		LimitQueueIP:         rule(s, "FLASHSALE_LIMIT_QUEUE_IP", "50/100"),
		LimitPollUser:        rule(s, "FLASHSALE_LIMIT_POLL_USER", "4/10"),
		LimitMaxKeys:         s.Int("FLASHSALE_LIMIT_MAX_KEYS", 1_000_000),
		TrustedProxies:       prefixes(s, "FLASHSALE_TRUSTED_PROXIES"),
		QueueGrace:           s.Duration("FLASHSALE_QUEUE_GRACE", 60*time.Second),
		QueueAdvance:         s.Duration("FLASHSALE_QUEUE_ADVANCE", 100*time.Millisecond),
		AdmissionTTL:         s.Duration("FLASHSALE_ADMISSION_TTL", 10*time.Minute),
		QueueBypass:          list(s.String("FLASHSALE_QUEUE_BYPASS", "")),
		PowChallengeTTL:      s.Duration("FLASHSALE_POW_CHALLENGE_TTL", 2*time.Minute),
		CatalogRefresh:       s.Duration("FLASHSALE_CATALOG_REFRESH", 2*time.Second),
		StockPoll:            s.Duration("FLASHSALE_STOCK_POLL", time.Second),
		ReadTimeout:          s.Duration("FLASHSALE_READ_TIMEOUT", 5*time.Second),
		WriteTimeout:         s.Duration("FLASHSALE_WRITE_TIMEOUT", 5*time.Second),
		IdleTimeout:          s.Duration("FLASHSALE_IDLE_TIMEOUT", 60*time.Second),
		MaxConnsPerIP:        s.Int("FLASHSALE_MAX_CONNS_PER_IP", 0),
		Concurrency:          s.Int("FLASHSALE_CONCURRENCY", 256*1024),
		MaxBodyBytes:         s.Int("FLASHSALE_MAX_BODY_BYTES", 4096),
		ShutdownTimeout:      s.Duration("FLASHSALE_SHUTDOWN_TIMEOUT", 15*time.Second),
		Log:                  logging.Load(s),
		Profile:              profiling.Load(s),
	}
	c.Settings = s.Read()
	s.RejectUnknown()
	errs := []error{s.Err(), c.validate()}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("gateway config:\n%w", err)
	}
	return c, nil
}

// Advice names settings that are valid but work against each other; the
// gateway logs each at start. Nothing here can be wrong for every
// deployment, so nothing is refused.
func (c Config) Advice() []string {
	var out []string
	if least := 2*c.PublishTimeout + c.RedisTimeout; c.InFlightWindow <= least {
		out = append(out, fmt.Sprintf("FLASHSALE_INFLIGHT_WINDOW (%s) is not above twice FLASHSALE_PUBLISH_TIMEOUT plus FLASHSALE_REDIS_TIMEOUT (%s): "+
			"an acknowledgement that comes after half the window is settled through PostgreSQL instead of trusted, "+
			"so slow acknowledgements cost a transaction each and a 503 whenever the settling finds no order", c.InFlightWindow, least))
	}
	return out
}

func (c Config) validate() error {
	var errs []error
	need := func(ok bool, name, msg string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", name, msg))
		}
	}
	need(c.Addr != "", "FLASHSALE_GATEWAY_ADDR", "empty")
	need(c.AdminAddr != "" && c.AdminAddr != c.Addr, "FLASHSALE_GATEWAY_ADMIN_ADDR", "empty or equal to the public address")
	if err := redisconn.Validate(c.RedisAddr); err != nil {
		errs = append(errs, fmt.Errorf("FLASHSALE_REDIS_ADDR: %w", err))
	}
	need(c.KafkaBrokers != "", "FLASHSALE_KAFKA_BROKERS", "empty")
	need(c.OrdersTopic != "", "FLASHSALE_ORDERS_TOPIC", "empty")
	need(c.PostgresDSN != "", "FLASHSALE_PG_DSN", "empty")
	need(len(c.JWTKey) >= 32, "FLASHSALE_JWT_HS256_KEY", "missing or shorter than 32 bytes (or set FLASHSALE_JWT_HS256_KEY_FILE)")
	need(len(c.GateKey) >= 32, "FLASHSALE_GATE_KEY", "missing or shorter than 32 bytes (or set FLASHSALE_GATE_KEY_FILE)")
	need(len(c.AdminToken) >= 16, "FLASHSALE_ADMIN_TOKEN", "missing or shorter than 16 bytes (or set FLASHSALE_ADMIN_TOKEN_FILE)")
	need(c.RedisTimeout > 0, "FLASHSALE_REDIS_TIMEOUT", "must be positive")
	need(c.RedisFlushDelay >= 0 && c.RedisFlushDelay <= time.Millisecond, "FLASHSALE_REDIS_FLUSH_DELAY", "must be between 0 and 1ms")
	if _, err := redisconn.Multiplex(c.RedisConns); err != nil {
		errs = append(errs, fmt.Errorf("FLASHSALE_REDIS_CONNS: %w", err))
	}
	need(c.SettleTimeout >= 10*time.Millisecond, "FLASHSALE_SETTLE_TIMEOUT", "must be at least 10ms")
	need(c.PublishTimeout >= 100*time.Millisecond, "FLASHSALE_PUBLISH_TIMEOUT", "must be at least 100ms")
	// The order service's bounds: every service must be given one value.
	need(c.InFlightWindow >= time.Second && c.InFlightWindow <= time.Hour, "FLASHSALE_INFLIGHT_WINDOW", "must be 1s..1h (as the order service's)")
	need(c.PublishLinger >= 0, "FLASHSALE_PUBLISH_LINGER", "must not be negative")
	need(c.PublishFailFastAfter >= 0, "FLASHSALE_PUBLISH_FAIL_FAST_AFTER", "must not be negative (0 turns failing fast off)")
	need(c.PublishFailFastFor >= 10*time.Millisecond, "FLASHSALE_PUBLISH_FAIL_FAST_FOR", "must be at least 10ms")
	need(c.LimitMaxKeys >= 64, "FLASHSALE_LIMIT_MAX_KEYS", "must be at least 64")
	if err := ratelimit.ValidatePoll(c.LimitPollUser); err != nil {
		errs = append(errs, fmt.Errorf("FLASHSALE_LIMIT_POLL_USER: %w", err))
	}
	need(c.QueueGrace >= time.Second, "FLASHSALE_QUEUE_GRACE", "must be at least 1s")
	// A round admits at most one second's worth of the rate (queue_advance.lua:
	// an idle gap is no burst), so rounds further apart admit below it.
	need(c.QueueAdvance > 0 && c.QueueAdvance <= time.Second, "FLASHSALE_QUEUE_ADVANCE", "must be positive and at most 1s (a round admits at most one second's worth of the rate)")
	need(c.AdmissionTTL >= time.Second, "FLASHSALE_ADMISSION_TTL", "must be at least 1s")
	need(c.PowChallengeTTL >= time.Second, "FLASHSALE_POW_CHALLENGE_TTL", "must be at least 1s")
	need(c.CatalogRefresh > 0, "FLASHSALE_CATALOG_REFRESH", "must be positive")
	need(c.StockPoll > 0, "FLASHSALE_STOCK_POLL", "must be positive")
	need(c.ReadTimeout > 0, "FLASHSALE_READ_TIMEOUT", "must be positive")
	need(c.WriteTimeout > 0, "FLASHSALE_WRITE_TIMEOUT", "must be positive")
	need(c.IdleTimeout > 0, "FLASHSALE_IDLE_TIMEOUT", "must be positive")
	need(c.MaxConnsPerIP >= 0, "FLASHSALE_MAX_CONNS_PER_IP", "must not be negative")
	need(c.Concurrency > 0, "FLASHSALE_CONCURRENCY", "must be positive")
	need(c.MaxBodyBytes > 0, "FLASHSALE_MAX_BODY_BYTES", "must be positive")
	need(c.ShutdownTimeout > 0, "FLASHSALE_SHUTDOWN_TIMEOUT", "must be positive")
	return errors.Join(errs...)
}
