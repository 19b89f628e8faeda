// Package profiling writes a service's CPU profile for its whole run, so a
// capacity engineer can see where a sale's CPU went (go tool pprof) without
// an HTTP endpoint on a production listener.
package profiling

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"

	"flashsale/pkg/config"
)

// Config says where the CPU profile goes; empty: no profile.
type Config struct {
	CPUProfile string // FLASHSALE_CPU_PROFILE
}

// Load reads FLASHSALE_CPU_PROFILE. A relative path is taken from the
// working directory.
func Load(src *config.Source) Config {
	return Config{CPUProfile: src.String("FLASHSALE_CPU_PROFILE", "")}
}

// Start starts the CPU profile when one is configured. The returned stop
// writes it out; call it once, when the service has stopped serving. With no
// profile configured both do nothing.
func Start(c Config) (stop func() error, err error) {
	if c.CPUProfile == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(filepath.Clean(c.CPUProfile))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("cpu profile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile %s: %w", c.CPUProfile, err)
		}
		return nil
	}, nil
}

// StartLogged is Start for a service: the returned stop logs a profile it
// could not write instead of returning the error (at shutdown nobody is
// left to hand it to).
func StartLogged(c Config, log *slog.Logger) (stop func(), err error) {
	stopErr, err := Start(c)
	if err != nil {
		return nil, err
	}
	return func() {
		if err := stopErr(); err != nil {
			log.Error("cpu profile not written", "err", err)
		}
	}, nil
}
