package auth

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claim bits for decodeClaims' check that no claim comes twice.
const (
	seenIss = 1 << iota
	seenSub
	seenAud
	seenExp
	seenNbf
	seenIat
	seenJti
)

// maxPlainDigits bounds a time claim decodeClaims reads: 15 digits, well
// inside the integers a float64 holds exactly (golang-jwt reads a time
// claim as a float64).
const maxPlainDigits = 15

// decodeClaims reads the claims of a token in the shape MintHS256 mints
// them (golang-jwt's encoding of RegisteredClaims): one JSON object, no
// whitespace, the registered claims only, each at most once, strings of
// printable ASCII without escapes, times as plain integers, the audience a
// string or an array of such strings. It fills c and reports true only for
// that shape; for anything else it leaves c alone and reports false, and
// encoding/json, as golang-jwt's parser uses it, reads the claims instead.
// On the shape it reads, it gives what encoding/json gives
// (FuzzHS256AgreesWithTheParser): encoding/json's decoding of
// jwt.RegisteredClaims was two thirds of a token's verification, and
// goes through reflection, an extra encoding/json pass per time claim and
// a float per time.
func decodeClaims(b []byte, c *jwt.RegisteredClaims) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	var out jwt.RegisteredClaims
	seen := 0
	i := 1
	if len(b) == 2 {
		*c = out
		return true
	}
	for {
		key, n := plainString(b[i:])
		if n == 0 || i+n >= len(b) || b[i+n] != ':' {
			return false
		}
		i += n + 1
		var bit int
		switch key {
		case "iss":
			bit = seenIss
			out.Issuer, n = plainString(b[i:])
		case "sub":
			bit = seenSub
			out.Subject, n = plainString(b[i:])
		case "jti":
			bit = seenJti
			out.ID, n = plainString(b[i:])
		case "aud":
			bit = seenAud
			out.Audience, n = audience(b[i:])
		case "exp":
			bit = seenExp
			out.ExpiresAt, n = plainSeconds(b[i:])
		case "nbf":
			bit = seenNbf
			out.NotBefore, n = plainSeconds(b[i:])
		case "iat":
			bit = seenIat
			out.IssuedAt, n = plainSeconds(b[i:])
		default:
			return false
		}
		if n == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		i += n
		switch {
		case i == len(b)-1: // the closing brace, checked above
			*c = out
			return true
		case b[i] != ',':
			return false
		}
		i++
	}
}

// plainString reads a JSON string of printable ASCII without escapes at
// the start of b, and returns it and the bytes it took (0: not one).
func plainString(b []byte) (string, int) {
	if len(b) < 2 || b[0] != '"' {
		return "", 0
	}
	for j := 1; j < len(b); j++ {
		switch ch := b[j]; {
		case ch == '"':
			return string(b[1:j]), j + 1
		case ch < 0x20 || ch > 0x7e || ch == '\\':
			return "", 0
		}
	}
	return "", 0
}

// audience reads the audience as golang-jwt's ClaimStrings does: one
// plain string, or an array of them (an empty one gives none).
func audience(b []byte) (jwt.ClaimStrings, int) {
	if s, n := plainString(b); n > 0 {
		return jwt.ClaimStrings{s}, n
	}
	if len(b) < 2 || b[0] != '[' {
		return nil, 0
	}
	if b[1] == ']' {
		return nil, 2
	}
	var aud jwt.ClaimStrings
	for i := 1; ; {
		s, n := plainString(b[i:])
		if n == 0 || i+n >= len(b) {
			return nil, 0
		}
		aud = append(aud, s)
		i += n
		switch b[i] {
		case ']':
			return aud, i + 1
		case ',':
			i++
		default:
			return nil, 0
		}
	}
}

// plainSeconds reads a time claim written as a plain non-negative integer
// of at most maxPlainDigits digits, as golang-jwt's NumericDate would
// read it.
func plainSeconds(b []byte) (*jwt.NumericDate, int) {
	var secs int64
	j := 0
	for ; j < len(b) && j <= maxPlainDigits && b[j] >= '0' && b[j] <= '9'; j++ {
		secs = secs*10 + int64(b[j]-'0')
	}
	if j == 0 || j > maxPlainDigits || (j > 1 && b[0] == '0') {
		return nil, 0
	}
	return jwt.NewNumericDate(time.Unix(secs, 0)), j
}
