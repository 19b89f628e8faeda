package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Topics every local broker serves from the start; the gateway publishes to
// the first, ordersvc dead-letters to the second.
const (
	ordersTopic = "flash-sale-orders"
	dlqTopic    = "flash-sale-orders.dlq"
)

// seededTopics lists the topics a fresh broker creates and a probe requires.
var seededTopics = []string{ordersTopic, dlqTopic}

// Config is everything one invocation of the binary needs. loadConfig is the
// only place that fills it: defaults in code, then the environment, then
// flags.
type Config struct {
	// Port is the TCP port on 127.0.0.1; 0 picks a free one (tests).
	Port int
	// DataDir enables kfake persistence; empty keeps everything in memory.
	DataDir string
	// Partitions is the partition count of the seeded topics and of every
	// topic created without an explicit count.
	Partitions int
	// SyncWrites fsyncs every produced batch before it is acknowledged.
	SyncWrites bool
	// LogLevel is the slog level: debug, info, warn or error.
	LogLevel slog.Level
	// ShutdownTimeout bounds the graceful close that writes the snapshot.
	ShutdownTimeout time.Duration

	// Probe asks a running broker for the seeded topics and exits instead
	// of serving.
	Probe bool
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
}

const defaultPort = 19092

func defaultConfig() Config {
	return Config{
		Port:            defaultPort,
		Partitions:      6,
		SyncWrites:      true,
		LogLevel:        slog.LevelInfo,
		ShutdownTimeout: 30 * time.Second,
		ProbeTimeout:    2 * time.Second,
	}
}

// loadConfig reads flags over the environment over defaults and validates
// the result, reporting every problem at once.
func loadConfig(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	cfg := defaultConfig()

	var envErrs []error
	if v := getenv("FLASHSALE_KAFKA_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("FLASHSALE_KAFKA_PORT: %q is not a port number", v))
		} else {
			cfg.Port = p
		}
	}

	fs := flag.NewFlagSet("kafka-broker", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.IntVar(&cfg.Port, "addr-port", cfg.Port, "TCP port to listen on at 127.0.0.1, 0 for any free port (env FLASHSALE_KAFKA_PORT)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory persisting records, topics and group offsets across restarts; empty keeps everything in memory")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the seeded topics and of auto-created topics")
	fs.BoolVar(&cfg.SyncWrites, "sync-writes", cfg.SyncWrites, "fsync each produced batch before acknowledging it (survives power loss, not only a killed broker)")
	logLevel := fs.String("log-level", strings.ToLower(cfg.LogLevel.String()), "log level: debug, info, warn, error")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "maximum time the graceful close may take")
	fs.BoolVar(&cfg.Probe, "probe", cfg.Probe, "check that the broker on -addr-port answers metadata for the seeded topics, then exit")
	fs.DurationVar(&cfg.ProbeTimeout, "probe-timeout", cfg.ProbeTimeout, "maximum time one -probe may take")
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		envErrs = append(envErrs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		envErrs = append(envErrs, fmt.Errorf("log-level: %q is not one of debug, info, warn, error", *logLevel))
	}

	if err := errors.Join(append(envErrs, cfg.Validate())...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every invalid field, each by its flag name.
func (c Config) Validate() error {
	var errs []error
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("addr-port: %d is outside 0..65535", c.Port))
	}
	if c.Probe && c.Port == 0 {
		errs = append(errs, errors.New("addr-port: -probe needs a concrete port, not 0"))
	}
	if c.Partitions < 1 || c.Partitions > 10000 {
		errs = append(errs, fmt.Errorf("partitions: %d is outside 1..10000", c.Partitions))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout: %v must be positive", c.ShutdownTimeout))
	}
	if c.ProbeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("probe-timeout: %v must be positive", c.ProbeTimeout))
	}
	return errors.Join(errs...)
}
