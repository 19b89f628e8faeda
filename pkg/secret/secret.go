// Package secret is the type of a credential held in configuration (JWT
// key, gate key, admin token, webhook secret, passwords): it never prints,
// whichever way it is formatted, encoded or logged, so a config struct can
// be logged or dumped whole without leaking one.
package secret

import (
	"fmt"
	"log/slog"
)

// Redacted is what every rendering of a Secret shows.
const Redacted = "[redacted]"

// Secret is a credential. Its bytes are reached only by converting it
// ([]byte(s)) or passing it where a []byte is wanted.
type Secret []byte

// String hides the value from fmt's %s and %v.
func (Secret) String() string { return Redacted }

// GoString hides the value from %#v.
func (Secret) GoString() string { return Redacted }

// Format hides the value from every other verb (%x, %d, %q ...), which
// would otherwise print a byte slice's contents.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// MarshalJSON hides the value from encoding/json.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText hides the value from text encoders (and from JSON map keys).
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// LogValue hides the value from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// Set reports whether the secret has a value.
func (s Secret) Set() bool { return len(s) > 0 }
