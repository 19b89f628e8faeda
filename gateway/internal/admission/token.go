// Package admission issues and checks the signed tokens that let a shopper
// out of the virtual queue and into the purchase path. A token is bound to
// one user and one sale, expires, and carries a unique id so it is spent by
// the purchase it admits.
package admission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Token is what an admission token says.
type Token struct {
	SaleID  int64
	UserID  string
	ID      string // unique: the queue ticket it was issued for
	Expires time.Time
}

// Errors of Verify; every one answers 403 NOT_ADMITTED.
var (
	ErrMalformed = errors.New("admission: malformed token")
	ErrSignature = errors.New("admission: bad signature")
	ErrExpired   = errors.New("admission: token expired")
	ErrOtherSale = errors.New("admission: token is for another sale")
	ErrOtherUser = errors.New("admission: token is for another user")
)

// MaxLen bounds the bytes a verifier looks at.
const MaxLen = 512

const version = "a1"

// Signer signs and verifies tokens with one HMAC-SHA256 key.
type Signer struct{ key []byte }

// NewSigner derives the admission key from the gateway's secret, so it
// differs from the key the purchase gate is derived with.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("admission: secret of %d bytes, want at least 32", len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashsale admission key v1"))
	return &Signer{key: m.Sum(nil)}, nil
}

var b64 = base64.RawURLEncoding

// Sign encodes t as "a1.<payload>.<mac>", URL-safe.
func (s *Signer) Sign(t Token) string {
	payload := version + "|" + strconv.FormatInt(t.SaleID, 10) + "|" + strconv.FormatInt(t.Expires.Unix(), 10) + "|" + t.ID + "|" + t.UserID
	p := b64.EncodeToString([]byte(payload))
	return version + "." + p + "." + b64.EncodeToString(s.mac(p))
}

func (s *Signer) mac(p string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(p))
	return m.Sum(nil)
}

// Verify checks a token for saleID and userID at now.
func (s *Signer) Verify(raw string, saleID int64, userID string, now time.Time) (Token, error) {
	if len(raw) == 0 || len(raw) > MaxLen {
		return Token{}, ErrMalformed
	}
	ver, rest, ok := strings.Cut(raw, ".")
	if !ok || ver != version {
		return Token{}, ErrMalformed
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Token{}, ErrMalformed
	}
	mac, err := b64.DecodeString(sig)
	if err != nil {
		return Token{}, ErrMalformed
	}
	if !hmac.Equal(mac, s.mac(p)) {
		return Token{}, ErrSignature
	}
	// Signed by us: the payload is well formed unless the key leaked.
	payload, err := b64.DecodeString(p)
	if err != nil {
		return Token{}, ErrMalformed
	}
	f := strings.SplitN(string(payload), "|", 5)
	if len(f) != 5 || f[0] != version {
		return Token{}, ErrMalformed
	}
	sale, err1 := strconv.ParseInt(f[1], 10, 64)
	exp, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || f[3] == "" {
		return Token{}, ErrMalformed
	}
	t := Token{SaleID: sale, Expires: time.Unix(exp, 0), ID: f[3], UserID: f[4]}
	switch {
	case !now.Before(t.Expires):
		return t, ErrExpired
	case t.SaleID != saleID:
		return t, ErrOtherSale
	case t.UserID != userID:
		return t, ErrOtherUser
	}
	return t, nil
}
