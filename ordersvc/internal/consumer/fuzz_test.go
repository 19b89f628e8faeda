package consumer

import (
	"errors"
	"os"
	"strings"
	"testing"

	"flashsale/pkg/event"
)

// decode takes untrusted bytes from the topic: whatever it accepts must be
// storable (no NUL byte PostgreSQL would refuse forever) and valid, and
// whatever it refuses must be ErrInvalid, so it is dead-lettered.
func FuzzDecode(f *testing.F) {
	if golden, err := os.ReadFile("../../../pkg/event/testdata/order_placed_v1.json"); err == nil {
		f.Add(golden)
	}
	f.Add([]byte(`{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":1,"itemId":1,"userId":"a\u0000b","placedAt":"2026-12-02T12:00:00Z"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode(b)
		if err != nil {
			if !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("refusal is not ErrInvalid: %v", err)
			}
			return
		}
		if strings.IndexByte(e.UserID, 0) >= 0 {
			t.Fatalf("accepted a NUL in user id %q", e.UserID)
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted an invalid event: %v", err)
		}
	})
}
