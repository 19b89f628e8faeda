package openapi

import (
	"strconv"
	"testing"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false}, // overflows int64
		{"0", 0, false},                   // ids are positive
		{"01", 0, false},                  // leading zero: a second URL for sale 1 (FuzzMatchPurchase's finding)
		{"00", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{"1 ", 0, false},
		{" 1", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{"99999999999999999999", 0, false}, // 20 digits
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseID(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseID(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
			}
			if gb, okb := ParseID([]byte(tt.in)); gb != got || okb != ok {
				t.Fatalf("ParseID([]byte(%q)) = %d, %v; the string form gave %d, %v", tt.in, gb, okb, got, ok)
			}
		})
	}
}

func TestParseIDAllocs(t *testing.T) {
	b := []byte("123456")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseID(b) }); n != 0 {
		t.Fatalf("ParseID allocates %v times a call, want 0", n)
	}
}

// FuzzParseID: whatever is accepted is the canonical form of its value.
func FuzzParseID(f *testing.F) {
	f.Add("1")
	f.Add("01")
	f.Add("+7")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseID(s)
		if ok && strconv.FormatInt(n, 10) != s {
			t.Fatalf("%q accepted as %d", s, n)
		}
		if !ok && n != 0 {
			t.Fatalf("%q refused with %d", s, n)
		}
	})
}
