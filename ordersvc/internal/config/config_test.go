package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flashsale/ordersvc/internal/config"
	pkgconfig "flashsale/pkg/config"
)

func TestLoad(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "jwt.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("k", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"FLASHSALE_JWT_HS256_KEY_FILE": keyFile, "FLASHSALE_ADMIN_TOKEN": strings.Repeat("a", 16)}
	tests := []struct {
		name    string
		env     map[string]string
		mode    config.Mode
		wantErr []string // variables named in the error; none means valid
		check   func(t *testing.T, c config.Config)
	}{
		{name: "defaults are valid for the tools", mode: config.Tool, check: func(t *testing.T, c config.Config) {
			if c.BatchSize != 500 || c.BatchWait != 20*time.Millisecond || c.FetchWait != 100*time.Millisecond || c.OrdersTopic != "flash-sale-orders" ||
				c.DLQTopic != "flash-sale-orders.dlq" || c.ConsumerGroup != "ordersvc" || c.Addr != "127.0.0.1:8090" ||
				c.AdminAddr != "127.0.0.1:8091" || c.ShutdownTimeout != 15*time.Second || c.RelayInterval != 500*time.Millisecond ||
				c.ExpiryInterval != time.Second || c.ExpiryBatch != 500 || len(c.PaymentWebhookSecret) != 0 ||
				c.CatchUpTimeout != 30*time.Second || c.ReconcileInterval != 0 || c.LagInterval != 2*time.Second ||
				c.InFlightWindow != 30*time.Second || c.AbandonInterval != 5*time.Second || c.AbandonReadRate != 20000 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "serve needs both secrets", mode: config.Serve,
			wantErr: []string{"FLASHSALE_JWT_HS256_KEY", "FLASHSALE_ADMIN_TOKEN"}},
		{name: "serve with secrets from env and file", mode: config.Serve, env: secrets, check: func(t *testing.T, c config.Config) {
			if len(c.JWTKey) != 32 || len(c.AdminToken) != 16 {
				t.Errorf("secrets: key %d bytes, token %d bytes", len(c.JWTKey), len(c.AdminToken))
			}
		}},
		{name: "short secrets", mode: config.Serve, env: map[string]string{"FLASHSALE_JWT_HS256_KEY": "short", "FLASHSALE_ADMIN_TOKEN": "short"},
			wantErr: []string{"FLASHSALE_JWT_HS256_KEY", "FLASHSALE_ADMIN_TOKEN"}},
		{name: "every bad value at once", mode: config.Tool, env: map[string]string{
			"FLASHSALE_BATCH_SIZE": "0", "FLASHSALE_BATCH_WAIT": "soon", "FLASHSALE_FETCH_WAIT": "100us", "FLASHSALE_REDIS_ADDR": "nohost",
			"FLASHSALE_PG_DSN": "mysql://x", "FLASHSALE_DLQ_TOPIC": "flash-sale-orders", "FLASHSALE_LOG_LEVEL": "loud",
			"FLASHSALE_EXPIRY_INTERVAL": "0s", "FLASHSALE_EXPIRY_BATCH": "0",
			"FLASHSALE_RECONCILE_CATCHUP_TIMEOUT": "-1s", "FLASHSALE_RECONCILE_INTERVAL": "10ms", "FLASHSALE_LAG_INTERVAL": "0s",
			"FLASHSALE_INFLIGHT_WINDOW": "500ms", "FLASHSALE_ABANDON_INTERVAL": "10ms", "FLASHSALE_ABANDON_READ_RATE": "999", "FLASHSALE_HOT_COPY_RETENTION": "59m"},
			wantErr: []string{"FLASHSALE_BATCH_SIZE", "FLASHSALE_BATCH_WAIT", "FLASHSALE_FETCH_WAIT", "FLASHSALE_REDIS_ADDR", "FLASHSALE_PG_DSN", "FLASHSALE_DLQ_TOPIC", "FLASHSALE_LOG_LEVEL",
				"FLASHSALE_EXPIRY_INTERVAL", "FLASHSALE_EXPIRY_BATCH",
				"FLASHSALE_RECONCILE_CATCHUP_TIMEOUT", "FLASHSALE_RECONCILE_INTERVAL", "FLASHSALE_LAG_INTERVAL",
				"FLASHSALE_INFLIGHT_WINDOW", "FLASHSALE_ABANDON_INTERVAL", "FLASHSALE_ABANDON_READ_RATE", "FLASHSALE_HOT_COPY_RETENTION"}},
		// The abandoned-reservation pass can be turned off.
		{name: "abandon pass off", mode: config.Tool, env: map[string]string{"FLASHSALE_ABANDON_INTERVAL": "0"},
			check: func(t *testing.T, c config.Config) {
				if c.AbandonInterval != 0 {
					t.Errorf("abandon interval %v, want 0 (off)", c.AbandonInterval)
				}
			}},
		{name: "abandon pass less often than the window", mode: config.Tool, env: map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "10s", "FLASHSALE_ABANDON_INTERVAL": "11s"},
			wantErr: []string{"FLASHSALE_ABANDON_INTERVAL"}},
		{name: "abandon pass once a window", mode: config.Tool, env: map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "10s", "FLASHSALE_ABANDON_INTERVAL": "10s"},
			check: func(t *testing.T, c config.Config) {
				if c.AbandonInterval != c.InFlightWindow {
					t.Errorf("abandon interval %v, want the window %v", c.AbandonInterval, c.InFlightWindow)
				}
			}},
		{name: "abandon read rate too high", mode: config.Tool, env: map[string]string{"FLASHSALE_ABANDON_READ_RATE": "10000001"},
			wantErr: []string{"FLASHSALE_ABANDON_READ_RATE"}},
		{name: "abandon read rate negative", mode: config.Tool, env: map[string]string{"FLASHSALE_ABANDON_READ_RATE": "-1"},
			wantErr: []string{"FLASHSALE_ABANDON_READ_RATE"}},
		// Its reads can be left unpaced.
		{name: "abandon pass unpaced", mode: config.Tool, env: map[string]string{"FLASHSALE_ABANDON_READ_RATE": "0"},
			check: func(t *testing.T, c config.Config) {
				if c.AbandonReadRate != 0 {
					t.Errorf("abandon read rate %d, want 0 (unpaced)", c.AbandonReadRate)
				}
			}},
		{name: "short webhook secret", mode: config.Serve, env: merge(secrets, map[string]string{"FLASHSALE_PAYMENT_WEBHOOK_SECRET": "short"}),
			wantErr: []string{"FLASHSALE_PAYMENT_WEBHOOK_SECRET"}},
		{name: "webhook secret", mode: config.Serve, env: merge(secrets, map[string]string{"FLASHSALE_PAYMENT_WEBHOOK_SECRET": strings.Repeat("w", 32)}),
			check: func(t *testing.T, c config.Config) {
				if len(c.PaymentWebhookSecret) != 32 {
					t.Errorf("webhook secret: %d bytes", len(c.PaymentWebhookSecret))
				}
				if c.PublicPay {
					t.Error("PublicPay on with a webhook secret: a shopper could pay herself")
				}
			}},
		{name: "webhook secret and the shopper's pay on", mode: config.Serve,
			env: merge(secrets, map[string]string{"FLASHSALE_PAYMENT_WEBHOOK_SECRET": strings.Repeat("w", 32), "FLASHSALE_PUBLIC_PAY": "true"}),
			check: func(t *testing.T, c config.Config) {
				if !c.PublicPay {
					t.Error("PublicPay off though FLASHSALE_PUBLIC_PAY=true")
				}
			}},
		{name: "nobody to pay", mode: config.Serve, env: merge(secrets, map[string]string{"FLASHSALE_PUBLIC_PAY": "false"}),
			wantErr: []string{"FLASHSALE_PUBLIC_PAY"}},
		{name: "no webhook: the shopper pays", mode: config.Serve, env: secrets,
			check: func(t *testing.T, c config.Config) {
				if !c.PublicPay {
					t.Error("PublicPay off without a webhook: nobody could pay")
				}
			}},
		// The demo and the e2e harness start both services with one environment.
		{name: "the gateway's and the stack's variables are tolerated", mode: config.Tool,
			env: map[string]string{"FLASHSALE_GATE_KEY": "x", "FLASHSALE_LIMIT_QUEUE_IP": "off", "FLASHSALE_KAFKA_PORT": "1"}},
		{name: "misspelled variable named with the other problems", mode: config.Tool,
			env:     map[string]string{"FLASHSALE_BATCH_SIZ": "10", "FLASHSALE_BATCH_WAIT": "soon"},
			wantErr: []string{"FLASHSALE_BATCH_SIZ: unknown variable", "did you mean FLASHSALE_BATCH_SIZE?", "FLASHSALE_BATCH_WAIT"}},
		{name: "the development database is said to be the default", mode: config.Tool, check: func(t *testing.T, c config.Config) {
			if !c.PGDSNDefault {
				t.Error("PGDSNDefault false with FLASHSALE_PG_DSN unset")
			}
		}},
		{name: "a configured database is not the default", mode: config.Tool, env: map[string]string{"FLASHSALE_PG_DSN": "postgres://u@h/db"},
			check: func(t *testing.T, c config.Config) {
				if c.PGDSNDefault {
					t.Error("PGDSNDefault true with FLASHSALE_PG_DSN set")
				}
			}},
		{name: "same address twice", mode: config.Serve, env: merge(secrets, map[string]string{"FLASHSALE_ORDERSVC_ADMIN_ADDR": "127.0.0.1:8090"}),
			wantErr: []string{"FLASHSALE_ORDERSVC_ADMIN_ADDR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Load(pkgconfig.Vars(tt.env), tt.mode)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
			} else {
				if err == nil {
					t.Fatal("got valid, want an error")
				}
				for _, name := range tt.wantErr {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("error %q does not name %s", err, name)
					}
				}
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestSecretsDoNotPrint(t *testing.T) {
	c, _ := config.Load(pkgconfig.Vars{"FLASHSALE_JWT_HS256_KEY": "super-secret-key-super-secret-key"}, config.Tool)
	for _, s := range []string{c.JWTKey.String(), fmt.Sprintf("%v %+v", c, c)} {
		if strings.Contains(s, "super-secret") {
			t.Errorf("secret printed: %s", s)
		}
	}
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func TestRedactedDSN(t *testing.T) {
	tests := []struct{ name, dsn, want string }{
		{"no password", "postgres://flashsale@127.0.0.1:15432/flashsale?sslmode=disable", "postgres://flashsale@127.0.0.1:15432/flashsale"},
		{"password hidden", "postgres://u:hunter2@db:5432/x", "postgres://u:xxxxx@db:5432/x"},
		{"password in the query dropped", "postgres://u@db/x?password=hunter2&sslmode=require", "postgres://u@db/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := config.RedactedDSN(tt.dsn); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
