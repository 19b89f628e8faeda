package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var key = []byte("0123456789abcdef0123456789abcdef-test-key")

func mustVerifier(t testing.TB, edKey ed25519.PublicKey) *Verifier {
	t.Helper()
	v, err := NewVerifier(key, edKey, "flashsale", "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sign(t testing.TB, m jwt.SigningMethod, k any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUserID(t *testing.T) {
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	v := mustVerifier(t, edPub)
	now := time.Now()
	valid := jwt.MapClaims{"sub": "alice", "iss": "flashsale", "exp": now.Add(time.Hour).Unix()}
	good, _ := MintHS256(key, "alice", "flashsale", "", time.Hour, now)
	parts := strings.Split(good, ".")

	tests := []struct {
		name    string
		token   string
		want    string
		wantErr bool
	}{
		{"minted HS256", good, "alice", false},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, edPriv, valid), "alice", false},
		{"EdDSA other key", sign(t, jwt.SigningMethodEdDSA, otherEd, valid), "", true},
		{"HS256 other key", sign(t, jwt.SigningMethodHS256, []byte("another-key-another-key-another-key!"), valid), "", true},
		{"HS512 refused", sign(t, jwt.SigningMethodHS512, key, valid), "", true},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid), "", true},
		{"expired", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "iss": "flashsale", "exp": now.Add(-time.Minute).Unix()}), "", true},
		{"no exp", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "iss": "flashsale"}), "", true},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "iss": "flashsale", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(time.Hour).Unix()}), "", true},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "iss": "evil", "exp": now.Add(time.Hour).Unix()}), "", true},
		{"empty subject", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"iss": "flashsale", "exp": now.Add(time.Hour).Unix()}), "", true},
		{"huge subject", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": strings.Repeat("x", 200), "iss": "flashsale", "exp": now.Add(time.Hour).Unix()}), "", true},
		{"NUL in subject", sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a\x00b", "iss": "flashsale", "exp": now.Add(time.Hour).Unix()}), "", true},
		{"truncated", good[:len(good)-5], "", true},
		{"tampered payload", parts[0] + "." + parts[1] + "x." + parts[2], "", true},
		{"empty", "", "", true},
		{"garbage", "not.a.jwt", "", true},
		{"oversized", strings.Repeat("a", MaxTokenLen+1), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.UserID(tt.token)
			if tt.wantErr {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("UserID() = %q, %v; want ErrUnauthenticated", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("UserID() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNewVerifierRejectsWeakConfig(t *testing.T) {
	if _, err := NewVerifier(nil, nil, "", ""); err == nil {
		t.Error("no key accepted")
	}
	if _, err := NewVerifier([]byte("short"), nil, "", ""); err == nil {
		t.Error("short HMAC key accepted")
	}
}

func FuzzUserID(f *testing.F) {
	good, _ := MintHS256(key, "alice", "flashsale", "", time.Hour, time.Now())
	f.Add(good)
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	v := mustVerifier(f, nil)
	f.Fuzz(func(t *testing.T, tok string) {
		sub, err := v.UserID(tok)
		if err != nil && !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("unexpected error class: %v", err)
		}
		if err == nil && sub == "" {
			t.Fatal("accepted a token without subject")
		}
	})
}

func BenchmarkUserID(b *testing.B) {
	v := mustVerifier(b, nil)
	tok, _ := MintHS256(key, "alice", "flashsale", "", time.Hour, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.UserID(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForgedToken is the largest token a client may send, signed with
// another key and carrying a long audience list: the cost of a refusal
// before any rate limit that needs the user. With our header the fast path
// checks the signature before it reads anything; with any other header
// (here the same one, its keys in another order) golang-jwt's parser
// decodes the header and the claims first: a forger chooses the dearer.
func BenchmarkForgedToken(b *testing.B) {
	other := []byte("another-key-another-key-another-key!!")
	for _, tt := range []struct {
		name   string
		header map[string]any
	}{
		{"our header", nil},
		{"another header", map[string]any{"typ": "JWT", "alg": "HS256", "kid": "k"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			v := mustVerifier(b, nil)
			aud := make(jwt.ClaimStrings, 0, 512)
			tok := ""
			for {
				aud = append(aud, "a")
				t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "mallory", Issuer: "flashsale",
					ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)), Audience: aud})
				if tt.header != nil {
					t.Header = tt.header
				}
				s, err := t.SignedString(other)
				if err != nil {
					b.Fatal(err)
				}
				if len(s) > MaxTokenLen {
					break
				}
				tok = s
			}
			b.ReportMetric(float64(len(tok)), "bytes")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.UserID(tok); err == nil {
					b.Fatal("a forged token verified")
				}
			}
		})
	}
}
