package config

import (
	"strings"
	"testing"
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
		{"publish timeout too short", map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "1ms"}, []string{"FLASHSALE_PUBLISH_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range good {
				env[k] = v
			}
			for k, v := range tt.override {
				env[k] = v
			}
			_, err := Load(func(k string) string { return env[k] })
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
