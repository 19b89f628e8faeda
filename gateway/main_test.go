package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	pkgconfig "flashsale/pkg/config"
)

// The command line is checked before any configuration: help needs none,
// and nothing is dialled for a bad command line.
func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     pkgconfig.Vars
		wantErr string // "" means success
		wantOut string
	}{
		{name: "-h", args: []string{"-h"}, wantOut: "usage: gateway"},
		{name: "--help", args: []string{"--help"}, wantOut: "SIGHUP"},
		// Help works even with a configuration that would not load.
		{name: "-h with a broken configuration", args: []string{"-h"}, env: pkgconfig.Vars{"FLASHSALE_CONFIG": "/nonexistent", "FLASHSALE_NOPE": "1"}, wantOut: "usage: gateway"},
		{name: "unknown flag", args: []string{"-x"}, wantErr: "command line", wantOut: "usage: gateway"},
		{name: "argument", args: []string{"serve"}, wantErr: `unexpected arguments ["serve"]`},
		{name: "no secrets", args: nil, wantErr: "FLASHSALE_ADMIN_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			env := tt.env
			if env == nil {
				env = pkgconfig.Vars{}
			}
			err := run(context.Background(), tt.args, env, &out, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("got output %q, want it to contain %q", out.String(), tt.wantOut)
			}
		})
	}
}
