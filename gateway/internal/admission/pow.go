package admission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Proof of work at the queue's door: a hashcash-style puzzle the sale page
// solves in the browser. The gateway issues a challenge bound to user, sale
// and expiry (signed, so it keeps no state) and checks a solution with one
// hash: SHA-256(challenge ":" nonce) must start with `difficulty` zero bits.

// ErrBadProof is returned for a wrong, stale or foreign proof of work.
var ErrBadProof = errors.New("admission: bad proof of work")

// Challenge returns a puzzle for user in sale, valid until expires.
func (s *Signer) Challenge(saleID int64, userID string, difficulty int, expires time.Time) string {
	p := "p1|" + strconv.FormatInt(saleID, 10) + "|" + strconv.Itoa(difficulty) + "|" + strconv.FormatInt(expires.Unix(), 10) + "|" + userID
	enc := b64.EncodeToString([]byte(p))
	return enc + "." + b64.EncodeToString(s.mac(enc))
}

// CheckProof verifies a challenge this signer issued and its solution.
func (s *Signer) CheckProof(challenge, nonce string, saleID int64, userID string, now time.Time) error {
	if len(challenge) > MaxLen || len(nonce) == 0 || len(nonce) > 64 {
		return ErrBadProof
	}
	enc, sig, ok := strings.Cut(challenge, ".")
	if !ok {
		return ErrBadProof
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, s.mac(enc)) {
		return ErrBadProof
	}
	raw, err := b64.DecodeString(enc)
	if err != nil {
		return ErrBadProof
	}
	f := strings.SplitN(string(raw), "|", 5)
	if len(f) != 5 || f[0] != "p1" || f[1] != strconv.FormatInt(saleID, 10) || f[4] != userID {
		return ErrBadProof
	}
	difficulty, err1 := strconv.Atoi(f[2])
	exp, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || !now.Before(time.Unix(exp, 0)) {
		return ErrBadProof
	}
	if LeadingZeroBits(challenge, nonce) < difficulty {
		return ErrBadProof
	}
	return nil
}

// LeadingZeroBits of SHA-256(challenge ":" nonce); the sale page computes
// the same in JavaScript.
func LeadingZeroBits(challenge, nonce string) int {
	h := sha256.Sum256([]byte(challenge + ":" + nonce))
	n := 0
	for i := 0; i < len(h); i += 8 {
		w := binary.BigEndian.Uint64(h[i:])
		z := bits.LeadingZeros64(w)
		n += z
		if z < 64 {
			break
		}
	}
	return n
}

// Solve finds a nonce for challenge (tests and the load-test tool use it).
func Solve(challenge string, difficulty int) string {
	for i := 0; ; i++ {
		nonce := strconv.Itoa(i)
		if LeadingZeroBits(challenge, nonce) >= difficulty {
			return nonce
		}
	}
}
