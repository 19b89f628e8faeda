// Package profiling writes a service's CPU profile and allocation profile
// for its whole run, so a capacity engineer can see where a sale's CPU and
// allocations went (go tool pprof) without an HTTP endpoint on a production
// listener.
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

// Config says where the profiles go; empty: no profile.
type Config struct {
	CPUProfile   string // FLASHSALE_CPU_PROFILE
	AllocProfile string // FLASHSALE_ALLOC_PROFILE
}

// Load reads FLASHSALE_CPU_PROFILE and FLASHSALE_ALLOC_PROFILE. A relative
// path is taken from the working directory.
func Load(src *config.Source) Config {
	return Config{
		CPUProfile:   src.String("FLASHSALE_CPU_PROFILE", ""),
		AllocProfile: src.String("FLASHSALE_ALLOC_PROFILE", ""),
	}
}

// Start starts the CPU profile when one is configured and checks that the
// allocation profile's file can be created. The returned stop writes them
// out: the CPU profile, and the allocations sampled since the process
// started (pprof's "allocs": go tool pprof -sample_index=alloc_objects);
// call it once, when the service has stopped serving. With no profile
// configured both do nothing.
func Start(c Config) (stop func() error, err error) {
	var cpu, allocs *os.File
	closeAll := func() error {
		var errs []error
		for _, f := range []*os.File{cpu, allocs} {
			if f != nil {
				errs = append(errs, f.Close())
			}
		}
		return errors.Join(errs...)
	}
	if c.AllocProfile != "" {
		if allocs, err = os.Create(filepath.Clean(c.AllocProfile)); err != nil {
			return nil, fmt.Errorf("alloc profile: %w", err)
		}
	}
	if c.CPUProfile != "" {
		if cpu, err = os.Create(filepath.Clean(c.CPUProfile)); err != nil {
			return nil, errors.Join(fmt.Errorf("cpu profile: %w", err), closeAll())
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			return nil, errors.Join(fmt.Errorf("cpu profile: %w", err), closeAll())
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
		}
		if allocs != nil {
			if err := pprof.Lookup("allocs").WriteTo(allocs, 0); err != nil {
				errs = append(errs, fmt.Errorf("alloc profile %s: %w", c.AllocProfile, err))
			}
		}
		if err := closeAll(); err != nil {
			errs = append(errs, fmt.Errorf("profiles: %w", err))
		}
		return errors.Join(errs...)
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
			log.Error("profile not written", "err", err)
		}
	}, nil
}
