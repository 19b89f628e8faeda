// Package config reads typed settings for the binaries: defaults in code, then
// an optional env-style file (FLASHSALE_CONFIG, KEY=VALUE lines), then the
// process environment. Every problem is collected so that a bad config is
// reported at once, each problem naming its variable; a name that no program
// of the project reads is one of those problems (see known.go).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"flashsale/pkg/secret"
)

// Env is the environment as a loader sees it. A variable set to "" is set:
// it overrides the file, which a getenv func could not tell apart.
type Env interface {
	// Lookup is os.LookupEnv.
	Lookup(name string) (string, bool)
	// Names lists every variable set, for the check of unknown names.
	Names() []string
}

// Vars is an Env held in a map: main's snapshot of the process
// environment (Environ), or a test's literal.
type Vars map[string]string

// Lookup returns the variable and whether it is set.
func (v Vars) Lookup(name string) (string, bool) {
	s, ok := v[name]
	return s, ok
}

// Names lists the variables set, sorted.
func (v Vars) Names() []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Environ turns os.Environ's KEY=value strings into Vars.
func Environ(kv []string) Vars {
	v := Vars{}
	for _, e := range kv {
		if k, val, ok := strings.Cut(e, "="); ok && k != "" {
			v[k] = val
		}
	}
	return v
}

// Source looks settings up in the environment, then in the config file.
type Source struct {
	env      Env
	file     map[string]string
	filePath string
	errs     []error
	read     Settings
}

// Settings are the settings a Source was asked for, each with a digest of
// the text it found ("" and absent are told apart; a secret's digest is
// of the secret itself): what a reload compares with the running
// configuration, to name the changes it cannot apply. A digest, not the
// text, so that printing a configuration whole (%+v, a log line) shows no
// secret; keyed per process, so that it cannot be checked against
// guesses elsewhere.
type Settings map[string]setting

type setting struct {
	digest uint64
	set    bool
}

// digestSeed keys the settings' digests for the life of the process.
var digestSeed = maphash.MakeSeed()

func newSetting(text string, set bool) setting {
	return setting{digest: maphash.String(digestSeed, text), set: set}
}

// Changed lists, sorted, the names whose setting differs between s and
// other (set in one only, or to another text).
func (s Settings) Changed(other Settings) []string {
	var names []string
	for name, v := range s {
		if other[name] != v {
			names = append(names, name)
		}
	}
	for name := range other {
		if _, ok := s[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Read returns the settings the source was asked for so far.
func (s *Source) Read() Settings { return maps.Clone(s.read) }

// NewSource reads the file named by FLASHSALE_CONFIG, if set.
func NewSource(env Env) *Source {
	s := &Source{env: env, file: map[string]string{}, read: Settings{}}
	path, _ := env.Lookup("FLASHSALE_CONFIG")
	if path == "" {
		return s
	}
	s.filePath = path
	b, err := os.ReadFile(path)
	if err != nil {
		s.Fail("FLASHSALE_CONFIG", fmt.Errorf("read %s: %w", path, err))
		return s
	}
	file, errs := ParseFile(b)
	s.file = file
	for _, err := range errs {
		s.Fail("FLASHSALE_CONFIG", fmt.Errorf("%s:%w", path, err))
	}
	return s
}

// ParseFile reads the KEY=VALUE lines of a config file, as a shell would
// read the simple ones: blank lines and lines starting with # are skipped,
// an "export " before the key is allowed, a # after whitespace starts a
// comment, and a value in single or double quotes is taken as written
// (comments and spaces inside kept, nothing expanded). A later line wins.
// Each error starts with the line number.
func ParseFile(b []byte) (map[string]string, []error) {
	out := map[string]string{}
	var errs []error
	for n, line := range strings.Split(string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))), "\n") {
		k, v, err := parseLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d: %w", n+1, err))
			continue
		}
		if k != "" {
			out[k] = v
		}
	}
	return out, errs
}

// parseLine returns the key and value of one line, or "" for a blank or
// comment line.
func parseLine(line string) (key, value string, err error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return "", "", nil
	}
	if rest, ok := strings.CutPrefix(line, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
		line = strings.TrimSpace(rest)
	}
	k, v, ok := strings.Cut(line, "=")
	if !ok {
		return "", "", errors.New("want KEY=VALUE")
	}
	k = strings.TrimSpace(k)
	if !validKey(k) {
		return "", "", fmt.Errorf("key %q: want letters, digits and _ (no spaces around =)", k)
	}
	trimmed := strings.TrimLeft(v, " \t")
	if trimmed != v && strings.HasPrefix(trimmed, "#") {
		return k, "", nil // KEY= # note
	}
	v = trimmed
	if v != "" && (v[0] == '"' || v[0] == '\'') {
		end := strings.IndexByte(v[1:], v[0])
		if end < 0 {
			return "", "", fmt.Errorf("%s: unterminated quote", k)
		}
		if after := strings.TrimSpace(v[end+2:]); after != "" && !strings.HasPrefix(after, "#") {
			return "", "", fmt.Errorf("%s: text after the closing quote", k)
		}
		return k, v[1 : end+1], nil
	}
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = v[:i]
			break
		}
	}
	return k, strings.TrimSpace(v), nil
}

func validKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// lookup finds a setting: the environment wins over the file even when it
// is set to "".
func (s *Source) lookup(name string) (string, bool) {
	v, ok := s.env.Lookup(name)
	if !ok {
		v, ok = s.file[name]
	}
	s.read[name] = newSetting(v, ok)
	return v, ok
}

// IsSet reports whether the environment or the file sets name.
func (s *Source) IsSet(name string) bool {
	_, ok := s.lookup(name)
	return ok
}

// Fail records a problem with one setting.
func (s *Source) Fail(name string, err error) {
	s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
}

// Err reports every recorded problem, or nil.
func (s *Source) Err() error { return errors.Join(s.errs...) }

// String returns the setting or def; a setting set to "" is "".
func (s *Source) String(name, def string) string {
	if v, ok := s.lookup(name); ok {
		return v
	}
	return def
}

// typed returns the setting for a number, duration or boolean: one set to
// "" has no such value and means the default, so that an empty variable
// still overrides the file.
func (s *Source) typed(name string) (string, bool) {
	v, ok := s.lookup(name)
	return v, ok && v != ""
}

// Int returns the setting parsed as an integer, or def.
func (s *Source) Int(name string, def int) int {
	v, ok := s.typed(name)
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
	v, ok := s.typed(name)
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
	v, ok := s.typed(name)
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
	v, ok := s.typed(name)
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
// is never part of an error message. NAME set to "" (in the environment,
// over a file that sets it) gives way to NAME_FILE if that is set.
func (s *Source) Secret(name string) secret.Secret {
	if v, ok := s.lookup(name); ok && v != "" {
		return secret.Secret(v)
	}
	if path, ok := s.lookup(name + "_FILE"); ok && path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			s.Fail(name+"_FILE", fmt.Errorf("read secret file %s: %w", path, err))
			return nil
		}
		v := bytes.TrimSpace(b)
		s.read[name] = newSetting(string(v), true) // a file rewritten in place is a change too
		return secret.Secret(v)
	}
	return nil
}

// RedactedDSN is a database URL without its password and query (which may
// carry one), for saying which database a tool uses.
func RedactedDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}
