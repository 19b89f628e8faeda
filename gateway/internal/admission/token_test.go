package admission

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func signer(t testing.TB) *Signer {
	s, err := NewSigner([]byte("admission-test-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	s := signer(t)
	now := time.Unix(1_800_000_000, 0)
	good := s.Sign(Token{SaleID: 7, UserID: "alice", ID: "t1", Expires: now.Add(time.Minute)})
	other, _ := NewSigner([]byte("another-secret-0123456789abcdef-xyz!"))
	forged := other.Sign(Token{SaleID: 7, UserID: "alice", ID: "t1", Expires: now.Add(time.Minute)})
	parts := strings.Split(good, ".")
	bob := strings.Split(s.Sign(Token{SaleID: 7, UserID: "bob", ID: "t1", Expires: now.Add(time.Minute)}), ".")
	swapped := parts[0] + "." + bob[1] + "." + parts[2] // bob's payload under alice's mac

	tests := []struct {
		name  string
		raw   string
		sale  int64
		user  string
		at    time.Time
		want  error
		valid bool
	}{
		{"valid", good, 7, "alice", now, nil, true},
		{"another user", good, 7, "bob", now, ErrOtherUser, false},
		{"another sale", good, 8, "alice", now, ErrOtherSale, false},
		{"expired", good, 7, "alice", now.Add(time.Minute), ErrExpired, false},
		{"forged with another key", forged, 7, "alice", now, ErrSignature, false},
		{"payload swapped under a valid mac", swapped, 7, "bob", now, ErrSignature, false},
		{"truncated", good[:len(good)-3], 7, "alice", now, ErrSignature, false},
		{"empty", "", 7, "alice", now, ErrMalformed, false},
		{"garbage", "a1.!!!.???", 7, "alice", now, ErrMalformed, false},
		{"wrong version", "a2" + good[2:], 7, "alice", now, ErrMalformed, false},
		{"oversized", strings.Repeat("a", MaxLen+1), 7, "alice", now, ErrMalformed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := s.Verify(tt.raw, tt.sale, tt.user, tt.at)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify() error = %v, want %v", err, tt.want)
			}
			if tt.valid && (tok.ID != "t1" || tok.UserID != "alice") {
				t.Fatalf("Verify() = %+v", tok)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	s := signer(f)
	f.Add(s.Sign(Token{SaleID: 1, UserID: "u", ID: "x", Expires: time.Unix(2e9, 0)}))
	f.Add("a1..")
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := s.Verify(raw, 1, "u", time.Unix(1e9, 0))
		if err == nil && (tok.SaleID != 1 || tok.UserID != "u" || tok.ID == "") {
			t.Fatalf("accepted %q as %+v", raw, tok)
		}
	})
}
