// Package auth verifies the shoppers' bearer tokens (JWT, HS256 or EdDSA)
// and yields the user id from their "sub" claim. The user id never comes
// from a request body or a header the client sets freely.
package auth

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"flashsale/pkg/event"
)

// ErrUnauthenticated is returned for every token that must be refused; the
// wrapped detail is for logs and tests, never shown to the client.
var ErrUnauthenticated = errors.New("auth: invalid bearer token")

// MaxTokenLen bounds the bytes parsed from an Authorization header.
const MaxTokenLen = 1024

// Verifier checks tokens signed with one HMAC key and/or one Ed25519 key.
type Verifier struct {
	hmacKey []byte
	edKey   ed25519.PublicKey
	parser  *jwt.Parser
	// hs256 verifies the common HS256 tokens without the parser's generic
	// decoding (see hs256.go); nil without an HMAC key.
	hs256 *hs256Verifier
	// byFastPath and byParser count the tokens each path decided.
	byFastPath, byParser atomic.Uint64
}

// NewVerifier builds a verifier. At least one key is needed; the HMAC key
// must be at least 32 bytes. Issuer and audience are checked when non-empty.
func NewVerifier(hmacKey []byte, edKey ed25519.PublicKey, issuer, audience string) (*Verifier, error) {
	if len(hmacKey) == 0 && len(edKey) == 0 {
		return nil, errors.New("auth: no verification key configured")
	}
	if len(hmacKey) > 0 && len(hmacKey) < 32 {
		return nil, fmt.Errorf("auth: HMAC key of %d bytes, want at least 32", len(hmacKey))
	}
	if len(edKey) > 0 && len(edKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("auth: Ed25519 public key of %d bytes, want %d", len(edKey), ed25519.PublicKeySize)
	}
	// One copy of the key for both paths: a caller that reused its slice
	// must not leave them verifying with different keys.
	hmacKey = bytes.Clone(hmacKey)
	var methods []string
	if len(hmacKey) > 0 {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if len(edKey) > 0 {
		methods = append(methods, jwt.SigningMethodEdDSA.Alg())
	}
	// The HS256 fast path (hs256.go) reads tokens as the parser does with
	// these options; a decoding option added here must be added there.
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods), // refuses "none" and algorithm confusion
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5 * time.Second),
	}
	if issuer != "" {
		opts = append(opts, jwt.WithIssuer(issuer))
	}
	if audience != "" {
		opts = append(opts, jwt.WithAudience(audience))
	}
	v := &Verifier{hmacKey: hmacKey, edKey: edKey, parser: jwt.NewParser(opts...)}
	if len(hmacKey) > 0 {
		v.hs256 = newHS256Verifier(hmacKey, jwt.NewValidator(opts...))
	}
	return v, nil
}

// UserID verifies a compact JWT and returns its subject.
func (v *Verifier) UserID(token string) (string, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return "", fmt.Errorf("%w: token of %d bytes", ErrUnauthenticated, len(token))
	}
	var claims jwt.RegisteredClaims
	handled, err := v.hs256.verify(token, &claims)
	if handled {
		v.byFastPath.Add(1)
	} else {
		v.byParser.Add(1)
		_, err = v.parser.ParseWithClaims(token, &claims, v.key)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if !event.ValidUserID(claims.Subject) {
		return "", fmt.Errorf("%w: subject of %d bytes is empty, too long or has control characters", ErrUnauthenticated, len(claims.Subject))
	}
	return claims.Subject, nil
}

func (v *Verifier) key(t *jwt.Token) (any, error) {
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		if len(v.hmacKey) > 0 {
			return v.hmacKey, nil
		}
	case *jwt.SigningMethodEd25519:
		if len(v.edKey) > 0 {
			return v.edKey, nil
		}
	}
	return nil, fmt.Errorf("no key for algorithm %v", t.Header["alg"])
}

// MintHS256 signs a shopper token; the load-test tool and tests use it to
// stand in for the identity provider.
func MintHS256(key []byte, userID, issuer, audience string, ttl time.Duration, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{
		Subject:   userID,
		Issuer:    issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	if audience != "" {
		claims.Audience = jwt.ClaimStrings{audience}
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("mint token for %s: %w", userID, err)
	}
	return s, nil
}
