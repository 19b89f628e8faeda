package store_test

import (
	"testing"
	"time"

	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/tools/testenv"
)

// The skew is read from clock_timestamp(): about zero on one machine, and
// the shift of a host clock set ahead or behind.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	st := store.New(testdb.Pool(t))
	for _, shift := range []time.Duration{0, 20 * time.Second, -90 * time.Second} {
		skew, within, err := st.ClockSkew(testenv.Context(t), func() time.Time { return time.Now().Add(shift) })
		if err != nil {
			t.Fatal(err)
		}
		if d := (skew - shift).Abs(); d > within+5*time.Millisecond {
			t.Errorf("host clock shifted by %v: skew %v ±%v", shift, skew, within)
		}
	}
}
