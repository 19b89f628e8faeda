// Package run is one whole flash sale driven from outside: set the sale up
// through the admin API, send the crowd at it with vegeta, wait until every
// accepted order is persisted, audit the invariants and report.
package run

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"flashsale/pkg/config"
	"flashsale/tools/herd"
)

// Options of a run; the flags of the loadtest command map onto them.
type Options struct {
	GatewayURL string
	// GatewayAdminURL is read for the gateway's peak memory after the sale
	// ("" skips it).
	GatewayAdminURL string
	AdminURL        string
	AdminToken      string
	JWTKey          []byte
	JWTIssuer       string
	PostgresDSN     string
	RedisAddr       string

	Users int // distinct shoppers, one purchase each
	Stock int // units in all
	Items int // items the stock is split over
	// Shards splits each item's stock over this many Redis shards.
	Shards int

	Profile     string        // herd | steady | ramp
	Rate        int           // requests/s; 0 with herd = as fast as the machine allows
	Duration    time.Duration // hard bound on the attack
	Connections int
	Workers     uint64
	MaxWorkers  uint64
	Timeout     time.Duration // per request
	Client      herd.Client   // the generator's HTTP client

	// Queue sends the crowd through the virtual queue: everyone joins before
	// the opening, polls, and buys once admitted at AdmissionRate per second.
	Queue         bool
	AdmissionRate int64
	// PayShare is the fraction of winners who pay; the rest are left to expire.
	PayShare float64

	OpenIn time.Duration // the sale opens this long after setup
	// QuietWait bounds the wait, before the sale is created, for the order
	// service to work off what earlier sales left due (see tools/quiet).
	QuietWait      time.Duration
	PersistTimeout time.Duration // bound on waiting for orders to reach PostgreSQL
	PollSample     int           // orders checked through the polling endpoint
	OutDir         string
	AllowRemote    bool // targets other than loopback must be asked for
}

// Defaults are the demo's sale: 10,000 units, 500,000 shoppers, a herd.
func Defaults() Options {
	return Options{
		GatewayURL: "http://127.0.0.1:8080", GatewayAdminURL: "http://127.0.0.1:8081", AdminURL: "http://127.0.0.1:8091", JWTIssuer: "flashsale",
		PostgresDSN: "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable", RedisAddr: "127.0.0.1:16379",
		Users: 500_000, Stock: 10_000, Items: 1,
		Profile: "herd", Rate: 0, Duration: 60 * time.Second, Connections: 256, Workers: 64, MaxWorkers: 256,
		AdmissionRate: 5000,
		Timeout:       10 * time.Second, OpenIn: 3 * time.Second, QuietWait: time.Minute, PersistTimeout: 60 * time.Second, PollSample: 1000,
		OutDir: "loadtest/out",
		// fasthttp's client: the sale is bound by the two shared cores, and
		// net/http's costs the generator a third more of them (benchmarks/README).
		Client: herd.FastHTTP,
	}
}

// FromEnv reads over Defaults what a run shares with the services, from env
// and the FLASHSALE_CONFIG file as they read it: the admin token and the
// JWT key (NAME, or the file named by NAME_FILE, so that they need not be
// flags, which ps shows), the token issuer, and the database and Redis of
// the audit. The error names every problem, a FLASHSALE_* name no program
// of the project reads among them.
func FromEnv(env config.Env) (Options, error) {
	o := Defaults()
	src := config.NewSource(env)
	o.AdminToken = string(src.Secret("FLASHSALE_ADMIN_TOKEN"))
	o.JWTKey = src.Secret("FLASHSALE_JWT_HS256_KEY")
	o.JWTIssuer = src.String("FLASHSALE_JWT_ISSUER", o.JWTIssuer)
	o.PostgresDSN = src.String("FLASHSALE_PG_DSN", o.PostgresDSN)
	o.RedisAddr = src.String("FLASHSALE_REDIS_ADDR", o.RedisAddr)
	src.RejectUnknown()
	return o, src.Err()
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	bad(len(o.JWTKey) >= 32, "-jwt-key (or FLASHSALE_JWT_HS256_KEY or FLASHSALE_JWT_HS256_KEY_FILE): missing or shorter than 32 bytes")
	bad(o.AdminToken != "", "-admin-token (or FLASHSALE_ADMIN_TOKEN or FLASHSALE_ADMIN_TOKEN_FILE): missing")
	bad(o.Users > 0, "-users must be positive")
	bad(o.Stock > 0, "-stock must be positive")
	bad(o.Items > 0 && o.Items <= o.Stock, "-items must be between 1 and -stock")
	bad(o.Shards >= 0 && o.Shards <= 64, "-shards must be between 1 and 64")
	bad(o.Profile == "herd" || o.Profile == "steady" || o.Profile == "ramp", "-profile %q: want herd, steady or ramp", o.Profile)
	bad(o.Profile == "herd" || o.Rate > 0, "-rate must be positive for the %s profile", o.Profile)
	bad(!o.Queue || o.AdmissionRate > 0, "-admission-rate must be positive with -queue")
	bad(o.PayShare >= 0 && o.PayShare <= 1, "-pay-share must be between 0 and 1")
	bad(o.Duration > 0, "-duration must be positive: every attack stops by itself")
	bad(o.Connections > 0, "-connections must be positive")
	bad(o.QuietWait >= 0, "-quiet-wait must not be negative")
	bad(o.MaxWorkers > 0 && o.Workers > 0, "-workers and -max-workers must be positive")
	for _, u := range []string{o.GatewayURL, o.AdminURL} {
		if err := checkTarget(u, o.AllowRemote); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkTarget keeps attacks on loopback unless asked otherwise.
func checkTarget(raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("target %q: not a URL", raw)
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("target %q is not loopback; pass -allow-remote to attack it", raw)
}
