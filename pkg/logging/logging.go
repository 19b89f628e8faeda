// Package logging is the slog setup of every flashsale service: one
// format and one level chosen by configuration (FLASHSALE_LOG_FORMAT,
// FLASHSALE_LOG_LEVEL), one stream (the process's standard error, so that
// standard output stays for a command's results), and the adapter that
// sends fasthttp's own messages to the same logger.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"flashsale/pkg/config"
)

// Format is how records are written.
type Format string

// The formats: JSON for log collectors (the default), text for a person
// at a terminal.
const (
	JSON Format = "json"
	Text Format = "text"
)

// Config chooses the format and the level.
type Config struct {
	Format Format
	Level  slog.Level
}

// ParseFormat reads json or text.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case JSON, Text:
		return f, nil
	}
	return "", fmt.Errorf("want json or text, got %q", s)
}

// ParseLevel reads debug, info, warn or error (slog's names, with an
// optional offset such as warn+2).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// New returns the logger writing to w (the process's standard error in
// the services) with every record tagged service=name.
func New(w io.Writer, cfg Config, service string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Level}
	var h slog.Handler
	if cfg.Format == Text {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}

// Printf adapts a logger to fasthttp.Logger. fasthttp reports per-client
// trouble through it (a connection that sent garbage or went away), which
// is noise at scale: it goes out at debug level.
type Printf struct{ Log *slog.Logger }

// Printf logs one fasthttp message.
func (p Printf) Printf(format string, args ...any) {
	p.Log.Debug("fasthttp", "detail", fmt.Sprintf(format, args...))
}

// Load reads FLASHSALE_LOG_FORMAT (default json) and FLASHSALE_LOG_LEVEL
// (default info; set empty, each means its default), recording their
// problems on src.
func Load(src *config.Source) Config {
	c := Config{Format: JSON, Level: slog.LevelInfo}
	var err error
	if v := src.String("FLASHSALE_LOG_FORMAT", ""); v != "" {
		if c.Format, err = ParseFormat(v); err != nil {
			src.Fail("FLASHSALE_LOG_FORMAT", err)
		}
	}
	if v := src.String("FLASHSALE_LOG_LEVEL", ""); v != "" {
		if c.Level, err = ParseLevel(v); err != nil {
			src.Fail("FLASHSALE_LOG_LEVEL", err)
		}
	}
	return c
}
