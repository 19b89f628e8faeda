// Package config reads typed settings for the binaries: defaults in code, then
// an optional env-style file (FLASHSALE_CONFIG, KEY=VALUE lines), then the
// process environment. Every problem is collected so that a bad config is
// reported at once, each problem naming its variable.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Source looks settings up in the environment, then in the config file.
type Source struct {
	getenv func(string) string
	file   map[string]string
	errs   []error
}

// NewSource reads the file named by FLASHSALE_CONFIG, if set.
func NewSource(getenv func(string) string) *Source {
	s := &Source{getenv: getenv, file: map[string]string{}}
	if path := getenv("FLASHSALE_CONFIG"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			s.Fail("FLASHSALE_CONFIG", fmt.Errorf("read %s: %w", path, err))
			return s
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				s.Fail("FLASHSALE_CONFIG", fmt.Errorf("%s:%d: want KEY=VALUE", path, n))
				continue
			}
			s.file[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return s
}

func (s *Source) lookup(name string) (string, bool) {
	if v := s.getenv(name); v != "" {
		return v, true
	}
	v, ok := s.file[name]
	return v, ok && v != ""
}

// Fail records a problem with one setting.
func (s *Source) Fail(name string, err error) {
	s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
}

// Err reports every recorded problem, or nil.
func (s *Source) Err() error { return errors.Join(s.errs...) }

// String returns the setting or def.
func (s *Source) String(name, def string) string {
	if v, ok := s.lookup(name); ok {
		return v
	}
	return def
}

// Int returns the setting parsed as an integer, or def.
func (s *Source) Int(name string, def int) int {
	v, ok := s.lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		s.Fail(name, fmt.Errorf("not an integer: %q", v))
		return def
	}
	return n
}

// Float returns the setting parsed as a float, or def.
func (s *Source) Float(name string, def float64) float64 {
	v, ok := s.lookup(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		s.Fail(name, fmt.Errorf("not a number: %q", v))
		return def
	}
	return f
}

// Duration returns the setting parsed by time.ParseDuration, or def.
func (s *Source) Duration(name string, def time.Duration) time.Duration {
	v, ok := s.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s.Fail(name, fmt.Errorf("not a duration: %q", v))
		return def
	}
	return d
}

// Bool returns the setting parsed by strconv.ParseBool, or def.
func (s *Source) Bool(name string, def bool) bool {
	v, ok := s.lookup(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.Fail(name, fmt.Errorf("not a boolean: %q", v))
		return def
	}
	return b
}

// Secret returns NAME, or the contents of the file named by NAME_FILE, so
// secrets can come from mounted files instead of the environment. A secret
// is never part of an error message.
func (s *Source) Secret(name string) []byte {
	if v, ok := s.lookup(name); ok {
		return []byte(v)
	}
	if path, ok := s.lookup(name + "_FILE"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			s.Fail(name+"_FILE", fmt.Errorf("read secret file %s: %w", path, err))
			return nil
		}
		return bytes.TrimSpace(b)
	}
	return nil
}
