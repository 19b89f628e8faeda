package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"flashsale/pkg/config"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		check  func(t *testing.T, out string)
		silent bool // info is below the level
	}{
		{"json", Config{Format: JSON, Level: slog.LevelInfo}, func(t *testing.T, out string) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("not one JSON record: %q: %v", out, err)
			}
			if rec["msg"] != "started" || rec["service"] != "gateway" || rec["port"] != float64(8080) {
				t.Errorf("record %v", rec)
			}
		}, false},
		{"text", Config{Format: Text, Level: slog.LevelDebug}, func(t *testing.T, out string) {
			if !strings.Contains(out, "msg=started") || !strings.Contains(out, "service=gateway") {
				t.Errorf("text record %q", out)
			}
		}, false},
		{"level filters", Config{Format: JSON, Level: slog.LevelWarn}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			New(&b, tt.cfg, "gateway").Info("started", "port", 8080)
			if tt.silent {
				if b.Len() != 0 {
					t.Errorf("logged below the level: %q", b.String())
				}
				return
			}
			tt.check(t, b.String())
		})
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Format
		wantErr bool
	}{{"json", JSON, false}, {"TEXT", Text, false}, {"logfmt", "", true}, {"", "", true}} {
		got, err := ParseFormat(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if l, err := ParseLevel("warn"); err != nil || l != slog.LevelWarn {
		t.Errorf("ParseLevel(warn) = %v, %v", l, err)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) accepted")
	}
}

// fasthttp's messages arrive at debug level, formatted.
func TestPrintf(t *testing.T) {
	var b bytes.Buffer
	Printf{New(&b, Config{Format: JSON, Level: slog.LevelDebug}, "ordersvc")}.Printf("error when serving connection %q: %s", "1.2.3.4:5", "reset")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "DEBUG" || rec["detail"] != `error when serving connection "1.2.3.4:5": reset` {
		t.Errorf("record %v", rec)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		env     config.Vars
		want    Config
		wantErr string
	}{
		{"defaults", config.Vars{}, Config{JSON, slog.LevelInfo}, ""},
		// set empty, each means its default
		{"empty", config.Vars{"FLASHSALE_LOG_FORMAT": "", "FLASHSALE_LOG_LEVEL": ""}, Config{JSON, slog.LevelInfo}, ""},
		{"text debug", config.Vars{"FLASHSALE_LOG_FORMAT": "text", "FLASHSALE_LOG_LEVEL": "debug"}, Config{Text, slog.LevelDebug}, ""},
		{"bad format", config.Vars{"FLASHSALE_LOG_FORMAT": "xml"}, Config{}, "FLASHSALE_LOG_FORMAT: want json or text"},
		{"bad level", config.Vars{"FLASHSALE_LOG_LEVEL": "chatty"}, Config{}, "FLASHSALE_LOG_LEVEL: want debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := config.NewSource(tt.env)
			got := Load(src)
			err := src.Err()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Load = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
