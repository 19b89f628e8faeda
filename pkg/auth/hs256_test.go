package auth

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// signHS256 signs claims (any bytes) under header with key, as an HS256
// token: what a client holding the key could send.
func signHS256(header, claims string) string {
	return signed(header + base64.RawURLEncoding.EncodeToString([]byte(claims)))
}

// signed appends to a token's first two segments their HS256 signature.
func signed(payload string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestHS256HandlesTheCommonShapeOnly(t *testing.T) {
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	v := mustVerifier(t, edPub)
	minted, _ := MintHS256(key, "alice", "flashsale", "", time.Hour, time.Now())
	claims := jwt.MapClaims{"sub": "alice", "iss": "flashsale", "exp": time.Now().Add(time.Hour).Unix()}
	for _, tt := range []struct {
		name  string
		token string
		want  bool
	}{
		{"minted", minted, true},
		{"forged signature", minted[:len(minted)-2] + "AA", true},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, edPriv, claims), false},
		{"HS256, header keys in another order", signHS256("eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.", `{"sub":"alice"}`), false},
		{"a fourth segment", minted + ".x", false},
		{"signature too short", minted[:len(minted)-1], false},
		{"header alone", hs256Header, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c jwt.RegisteredClaims
			if got, _ := v.hs256.verify(tt.token, &c); got != tt.want {
				t.Fatalf("handled = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecodeClaimsReadsMintedTokens: the tokens this system mints take
// the fast claims reading, not encoding/json.
func TestDecodeClaimsReadsMintedTokens(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, aud := range []string{"", "shop"} {
		tok, err := MintHS256(key, "user-42", "flashsale", aud, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		var c jwt.RegisteredClaims
		if !decodeClaims(raw, &c) {
			t.Fatalf("claims %s left to encoding/json", raw)
		}
		want := jwt.RegisteredClaims{Subject: "user-42", Issuer: "flashsale",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
		if aud != "" {
			want.Audience = jwt.ClaimStrings{aud}
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("decoded %+v, want %+v", c, want)
		}
	}
}

// FuzzHS256AgreesWithTheParser: every token, signed with the key or not,
// gets from the fast path the answer golang-jwt's parser gives it.
func FuzzHS256AgreesWithTheParser(f *testing.F) {
	exp := time.Now().Add(time.Hour).Unix()
	for _, c := range []string{
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d}`, exp),
		fmt.Sprintf(`{"sub":"alice","SUB":"bob","Iss":"flashsale","EXP":%d}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"exp":1}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d.75}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":"%d"}`, exp),
		`{"sub":"alice","iss":"flashsale","exp":1e400}`,
		`{"sub":"alice","iss":"flashsale","exp":9e9}`,
		`{"sub":"alice","iss":"flashsale","exp":-1}`,
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"nbf":%d}`, exp, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":["x","y"]}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":7}`, exp),
		fmt.Sprintf(`{"sub":"a\u0000b","iss":"flashsale","exp":%d}`, exp),
		fmt.Sprintf(`{"sub":"\xff","iss":"flashsale","exp":%d}`, exp),
		fmt.Sprintf(`{"sub":7,"iss":"flashsale","exp":%d}`, exp),
		fmt.Sprintf(`{"iss":"flashsale","sub":"alice","aud":["x","flashsale"],"exp":%d,"nbf":0,"iat":1,"jti":"j"}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":[]}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":"x"}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":["x",]}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"aud":[1]}`, exp),
		fmt.Sprintf(`{ "sub": "alice", "iss": "flashsale", "exp": %d }`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":0%d}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d000000}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,}`, exp),
		fmt.Sprintf(`{"sub":"al\u0069ce","iss":"flashsale","exp":%d}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d,"role":"admin"}`, exp),
		fmt.Sprintf(`{"sub":"alice","iss":"flashsale","exp":%d}{}`, exp),
		`{"sub":"alice","iss":"flashsale","exp":0}`,
		`{"sub"}`, `{"sub":}`, `{}`, `{"":""}`,
		`null`, `[]`, `"alice"`, `{`, ``,
	} {
		for mutation := range uint8(4) {
			f.Add(c, mutation)
		}
	}
	// Both with the audience optional (as configured by default) and
	// required.
	var pairs [2][2]*Verifier
	for i, aud := range []string{"", "flashsale"} {
		for j := range 2 {
			v, err := NewVerifier(key, nil, "flashsale", aud)
			if err != nil {
				f.Fatal(err)
			}
			pairs[i][j] = v
		}
		pairs[i][1].hs256 = nil
	}
	f.Fuzz(func(t *testing.T, claims string, mutation uint8) {
		token := signHS256(hs256Header, claims)
		switch mutation % 4 {
		case 1: // another signature: one of its leading characters changed
			i, c := len(token)-hs256SigLen, "A"
			if token[i] == 'A' {
				c = "B"
			}
			token = token[:i] + c + token[i+1:]
		case 2: // padding in the claims segment, signed with it
			token = signed(hs256Header + base64.RawURLEncoding.EncodeToString([]byte(claims)) + "=")
		case 3: // any string at all
			token = claims
		}
		for _, p := range pairs {
			gotSub, gotErr := p[0].UserID(token)
			wantSub, wantErr := p[1].UserID(token)
			if gotSub != wantSub || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("token %q: fast path %q, %v; parser %q, %v", token, gotSub, gotErr, wantSub, wantErr)
			}
		}
	})
}

// TestTokensAreCountedByPath: the collector tells an operator which path
// the shoppers' tokens take.
func TestTokensAreCountedByPath(t *testing.T) {
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	v := mustVerifier(t, edPub)
	minted, _ := MintHS256(key, "alice", "flashsale", "", time.Hour, time.Now())
	claims := jwt.MapClaims{"sub": "alice", "iss": "flashsale", "exp": time.Now().Add(time.Hour).Unix()}
	for _, tok := range []string{minted, minted, sign(t, jwt.SigningMethodEdDSA, edPriv, claims), "not.a.token"} {
		_, _ = v.UserID(tok)
	}
	want := `
# HELP test_tokens_verified_total Bearer tokens verified, accepted or refused, by path: fast for HS256 tokens in the shape minted here, parser for the rest (golang-jwt's full decoding).
# TYPE test_tokens_verified_total counter
test_tokens_verified_total{path="fast"} 2
test_tokens_verified_total{path="parser"} 2
`
	if err := testutil.CollectAndCompare(v.Collector("test"), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
