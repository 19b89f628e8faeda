package config

import (
	"maps"
	"slices"
	"strings"
	"testing"

	pkgconfig "flashsale/pkg/config"
)

func TestLoad(t *testing.T) {
	good := map[string]string{
		"FLASHSALE_JWT_HS256_KEY": strings.Repeat("k", 32),
		"FLASHSALE_GATE_KEY":      strings.Repeat("g", 32),
		"FLASHSALE_ADMIN_TOKEN":   strings.Repeat("a", 16),
	}
	tests := []struct {
		name     string
		override map[string]string
		wantErrs []string // every one must be named in the error
	}{
		{"defaults with secrets", nil, nil},
		{"missing secrets all reported", map[string]string{"FLASHSALE_JWT_HS256_KEY": "", "FLASHSALE_GATE_KEY": "", "FLASHSALE_ADMIN_TOKEN": ""},
			[]string{"FLASHSALE_JWT_HS256_KEY", "FLASHSALE_GATE_KEY", "FLASHSALE_ADMIN_TOKEN"}},
		{"bad duration and same admin address", map[string]string{"FLASHSALE_REDIS_TIMEOUT": "soon", "FLASHSALE_GATEWAY_ADMIN_ADDR": "127.0.0.1:8080"},
			[]string{"FLASHSALE_REDIS_TIMEOUT", "FLASHSALE_GATEWAY_ADMIN_ADDR"}},
		{"bad limits and proxies", map[string]string{"FLASHSALE_LIMIT_PURCHASE_USER": "fast", "FLASHSALE_TRUSTED_PROXIES": "10.0.0.0/8,nonsense"},
			[]string{"FLASHSALE_LIMIT_PURCHASE_USER", "FLASHSALE_TRUSTED_PROXIES"}},
		// Each parses, and would let everyone through, refuse everyone or
		// break every answer that shows the rule (ratelimit.Rule.Validate).
		{"limits that parse but cannot work", map[string]string{"FLASHSALE_LIMIT_PURCHASE_USER": "NaN/3", "FLASHSALE_LIMIT_PURCHASE_IP": "Inf/3",
			"FLASHSALE_LIMIT_QUEUE_USER": "1e-11/1", "FLASHSALE_LIMIT_QUEUE_IP": "1/1000000000000"},
			[]string{"FLASHSALE_LIMIT_PURCHASE_USER", "FLASHSALE_LIMIT_PURCHASE_IP", "FLASHSALE_LIMIT_QUEUE_USER", "FLASHSALE_LIMIT_QUEUE_IP"}},
		// The waiting room advises a poll every 500 ms at the most.
		{"ticket polls limited below the advice", map[string]string{"FLASHSALE_LIMIT_POLL_USER": "1/10"}, []string{"FLASHSALE_LIMIT_POLL_USER: rate 1, burst 10: want off, or at least 2"}},
		{"ticket polls with a burst of 1", map[string]string{"FLASHSALE_LIMIT_POLL_USER": "5/1"}, []string{"FLASHSALE_LIMIT_POLL_USER: rate 5, burst 1"}},
		{"ticket polls not limited", map[string]string{"FLASHSALE_LIMIT_POLL_USER": "off"}, nil},
		{"publish timeout too short", map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "1ms"}, []string{"FLASHSALE_PUBLISH_TIMEOUT"}},
		{"in-flight window past the order service's bound", map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "2h"}, []string{"FLASHSALE_INFLIGHT_WINDOW"}},
		{"in-flight window under 1s", map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "500ms"}, []string{"FLASHSALE_INFLIGHT_WINDOW"}},
		// A round admits at most one second's worth: rounds 2 s apart halve the rate.
		{"queue advanced less than once a second", map[string]string{"FLASHSALE_QUEUE_ADVANCE": "2s"}, []string{"FLASHSALE_QUEUE_ADVANCE"}},
		{"Redis connections not a power of two", map[string]string{"FLASHSALE_REDIS_CONNS": "3"}, []string{"FLASHSALE_REDIS_CONNS: want a power of two"}},
		// The demo and the e2e harness start both services with one environment.
		{"the order service's and the stack's variables are tolerated", map[string]string{"FLASHSALE_BATCH_SIZE": "9", "FLASHSALE_STACK_DIR": "/x"}, nil},
		{"misspelled variable named with a suggestion, with the other problems", map[string]string{"FLASHSALE_TRUSTED_PROXY": "10.0.0.1", "FLASHSALE_STOCK_POLL": "0s"},
			[]string{"FLASHSALE_TRUSTED_PROXY: unknown variable", "did you mean FLASHSALE_TRUSTED_PROXIES?", "FLASHSALE_STOCK_POLL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := pkgconfig.Vars{}
			for k, v := range good {
				env[k] = v
			}
			for k, v := range tt.override {
				env[k] = v
			}
			_, err := Load(env)
			if len(tt.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("Load() error = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Load() accepted a bad config")
			}
			for _, w := range tt.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), strings.Repeat("k", 32)) {
				t.Error("secret leaked into the error")
			}
		})
	}
}

// A reload names the changed settings it does not apply: not the limits
// and the bypass list, which it applies; a secret by its name only.
func TestNeedRestart(t *testing.T) {
	env := map[string]string{
		"FLASHSALE_JWT_HS256_KEY": strings.Repeat("k", 32),
		"FLASHSALE_GATE_KEY":      strings.Repeat("g", 32),
		"FLASHSALE_ADMIN_TOKEN":   strings.Repeat("a", 16),
	}
	running, err := Load(pkgconfig.Vars(env))
	if err != nil {
		t.Fatal(err)
	}
	next := maps.Clone(env)
	next["FLASHSALE_LIMIT_PURCHASE_USER"] = "2/4"
	next["FLASHSALE_QUEUE_BYPASS"] = "vip"
	next["FLASHSALE_REDIS_TIMEOUT"] = "2s"
	next["FLASHSALE_JWT_HS256_KEY"] = strings.Repeat("n", 32)
	reloaded, err := Load(pkgconfig.Vars(next))
	if err != nil {
		t.Fatal(err)
	}
	got := running.NeedRestart(reloaded)
	if want := []string{"FLASHSALE_JWT_HS256_KEY", "FLASHSALE_REDIS_TIMEOUT"}; !slices.Equal(got, want) {
		t.Errorf("NeedRestart = %v, want %v", got, want)
	}
	if got := running.NeedRestart(running); len(got) != 0 {
		t.Errorf("NeedRestart of the same configuration = %v, want none", got)
	}
}

// The in-flight window below twice the publish timeout plus the Redis
// timeout is advised against, not refused; the defaults draw no advice.
func TestAdvice(t *testing.T) {
	load := func(over map[string]string) Config {
		t.Helper()
		env := pkgconfig.Vars{
			"FLASHSALE_JWT_HS256_KEY": strings.Repeat("k", 32),
			"FLASHSALE_GATE_KEY":      strings.Repeat("g", 32),
			"FLASHSALE_ADMIN_TOKEN":   strings.Repeat("a", 16),
		}
		maps.Copy(env, over)
		c, err := Load(env)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if a := load(nil).Advice(); len(a) != 0 {
		t.Errorf("advice on the defaults: %q", a)
	}
	a := load(map[string]string{"FLASHSALE_INFLIGHT_WINDOW": "3s", "FLASHSALE_PUBLISH_TIMEOUT": "1s", "FLASHSALE_REDIS_TIMEOUT": "1s"}).Advice()
	if len(a) != 1 || !strings.Contains(a[0], "FLASHSALE_INFLIGHT_WINDOW (3s) is not above") || !strings.Contains(a[0], "(3s):") {
		t.Errorf("advice on a 3s window with 1s timeouts: %q", a)
	}
}
