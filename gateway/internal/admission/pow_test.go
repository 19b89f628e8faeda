package admission

import (
	"errors"
	"testing"
	"time"
)

func TestProofOfWork(t *testing.T) {
	s := signer(t)
	now := time.Unix(1_800_000_000, 0)
	ch := s.Challenge(7, "alice", 12, now.Add(time.Minute))
	nonce := Solve(ch, 12)
	if err := s.CheckProof(ch, nonce, 7, "alice", now); err != nil {
		t.Fatalf("solved proof refused: %v", err)
	}
	wrong := "x"
	for LeadingZeroBits(ch, wrong) >= 12 {
		wrong += "x"
	}
	other, _ := NewSigner([]byte("another-secret-0123456789abcdef-xyz!"))
	foreign := other.Challenge(7, "alice", 0, now.Add(time.Minute))
	tests := []struct {
		name             string
		challenge, nonce string
		sale             int64
		user             string
		at               time.Time
	}{
		{"unsolved", ch, wrong, 7, "alice", now},
		{"another user's challenge", ch, nonce, 7, "bob", now},
		{"another sale", ch, nonce, 8, "alice", now},
		{"expired", ch, nonce, 7, "alice", now.Add(time.Minute)},
		{"challenge not ours (difficulty 0)", foreign, "1", 7, "alice", now},
		{"empty nonce", ch, "", 7, "alice", now},
		{"garbage", "zzz", "1", 7, "alice", now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.CheckProof(tt.challenge, tt.nonce, tt.sale, tt.user, tt.at); !errors.Is(err, ErrBadProof) {
				t.Fatalf("CheckProof() = %v, want ErrBadProof", err)
			}
		})
	}
}

func FuzzCheckProof(f *testing.F) {
	s := signer(f)
	f.Add(s.Challenge(1, "u", 8, time.Unix(2e9, 0)), "1")
	f.Fuzz(func(t *testing.T, ch, nonce string) {
		_ = s.CheckProof(ch, nonce, 1, "u", time.Unix(1e9, 0)) // must not panic
	})
}
