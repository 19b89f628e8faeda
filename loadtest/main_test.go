package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"flashsale/loadtest/internal/run"
	"flashsale/pkg/config"
)

// The command line and the configuration are checked before anything is
// dialled; help needs no configuration and never prints a secret.
func TestRunMain(t *testing.T) {
	secrets := config.Vars{"FLASHSALE_ADMIN_TOKEN": "admin-token-in-env", "FLASHSALE_JWT_HS256_KEY": strings.Repeat("k", 32),
		"FLASHSALE_PG_DSN": "postgres://u:hunter2@127.0.0.1:15432/flashsale"}
	tests := []struct {
		name    string
		args    []string
		env     config.Vars
		wantErr string // "" means success
		wantOut string
	}{
		{name: "-h", args: []string{"-h"}, env: config.Vars{}, wantOut: "usage: loadtest"},
		{name: "--help with secrets in the environment", args: []string{"--help"}, env: secrets, wantOut: "-admin-token"},
		{name: "-h with a broken configuration", args: []string{"-h"}, env: config.Vars{"FLASHSALE_NOPE": "1", "FLASHSALE_CONFIG": "/nonexistent"}, wantOut: "-users"},
		{name: "no secrets", args: []string{"-users", "0"}, env: config.Vars{}, wantErr: "-admin-token"},
		{name: "unknown variable", args: nil, env: config.Vars{"FLASHSALE_USERS": "5"}, wantErr: "FLASHSALE_USERS: unknown variable"},
		{name: "argument", args: []string{"now"}, env: config.Vars{}, wantErr: `unexpected arguments ["now"]`},
		// Validation fails on -users 0 only: the secrets came from the
		// environment (a flag would also do, but ps shows it).
		{name: "secrets from the environment", args: []string{"-users", "0"}, env: secrets, wantErr: "-users must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runMain(context.Background(), tt.args, tt.env, &out, io.Discard)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && strings.Contains(err.Error(), "-admin-token") && tt.env["FLASHSALE_ADMIN_TOKEN"] != "":
				t.Errorf("got %v: the token in the environment was not used", err)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("got output %q, want it to contain %q", out.String(), tt.wantOut)
			}
			for _, secret := range []string{"admin-token-in-env", "kkkkkkkk", "hunter2"} {
				if strings.Contains(out.String(), secret) || (err != nil && strings.Contains(err.Error(), secret)) {
					t.Errorf("secret %q printed", secret)
				}
			}
		})
	}
}

// The run says which database it audits, password hidden, and whether it
// is the development default that nothing configured.
func TestSayDatabase(t *testing.T) {
	tests := []struct {
		name, dsn string
		want      string
	}{
		{"default", run.Defaults().PostgresDSN, "loadtest: using database postgres://flashsale@127.0.0.1:15432/flashsale (the development default: FLASHSALE_PG_DSN and -pg not set)\n"},
		{"configured", "postgres://app:hunter2@db.example:5432/shop?sslmode=require&password=x",
			"loadtest: using database postgres://app:xxxxx@db.example:5432/shop (FLASHSALE_PG_DSN or -pg)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			sayDatabase(&b, tt.dsn)
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}
