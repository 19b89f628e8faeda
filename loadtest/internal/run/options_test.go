package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flashsale/pkg/config"
	"flashsale/tools/configdoc"
)

func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	keyFile, tokenFile := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "admin.token")
	for path, v := range map[string]string{keyFile: strings.Repeat("k", 32) + "\n", tokenFile: "token-from-file\n"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		env     config.Vars
		check   func(t *testing.T, o Options)
		wantErr []string
	}{
		{name: "defaults without configuration", env: config.Vars{}, check: func(t *testing.T, o Options) {
			if o.AdminToken != "" || len(o.JWTKey) != 0 || o.PostgresDSN != Defaults().PostgresDSN {
				t.Errorf("got %+v, want the defaults", o)
			}
		}},
		{name: "secrets from NAME_FILE like the services", env: config.Vars{"FLASHSALE_JWT_HS256_KEY_FILE": keyFile, "FLASHSALE_ADMIN_TOKEN_FILE": tokenFile},
			check: func(t *testing.T, o Options) {
				if string(o.JWTKey) != strings.Repeat("k", 32) || o.AdminToken != "token-from-file" {
					t.Errorf("got key %d bytes, token %q", len(o.JWTKey), o.AdminToken)
				}
			}},
		{name: "secrets and targets from the environment", env: config.Vars{"FLASHSALE_ADMIN_TOKEN": "t", "FLASHSALE_JWT_HS256_KEY": "k",
			"FLASHSALE_PG_DSN": "postgres://x@h/db", "FLASHSALE_REDIS_ADDR": "h:1", "FLASHSALE_JWT_ISSUER": "iss"},
			check: func(t *testing.T, o Options) {
				if o.AdminToken != "t" || string(o.JWTKey) != "k" || o.PostgresDSN != "postgres://x@h/db" || o.RedisAddr != "h:1" || o.JWTIssuer != "iss" {
					t.Errorf("got %+v", o)
				}
			}},
		// demo.sh runs loadtest in the services' environment.
		{name: "the services' variables are tolerated", env: config.Vars{"FLASHSALE_GATE_KEY": "g", "FLASHSALE_BATCH_SIZE": "1"}},
		{name: "unknown variable and missing secret file", env: config.Vars{"FLASHSALE_ADMIN_TOKN": "t", "FLASHSALE_JWT_HS256_KEY_FILE": filepath.Join(dir, "missing")},
			wantErr: []string{"FLASHSALE_ADMIN_TOKN: unknown variable", "did you mean FLASHSALE_ADMIN_TOKEN?", "FLASHSALE_JWT_HS256_KEY_FILE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := FromEnv(tt.env)
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

// pkg/config's list of known variables names exactly what loadtest reads
// as read by the tools (the benchmark commands read the same).
func TestKnownListsEveryVariable(t *testing.T) {
	env, asked := configdoc.Recorder()
	_, _ = FromEnv(env)
	missing, extra := configdoc.Diff(config.ReadBy(config.Tools), asked())
	if len(missing) > 0 {
		t.Errorf("read by loadtest but not listed for the tools in pkg/config/known.go: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("listed for the tools in pkg/config/known.go but not read by loadtest: %v", extra)
	}
}
