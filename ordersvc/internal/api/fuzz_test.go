package api_test

import (
	"testing"
	"unicode/utf8"

	"flashsale/ordersvc/internal/api"
)

// A pay body comes from the shopper: whatever is accepted is a reference
// PostgreSQL stores as given (1..128 printable characters).
func FuzzDecodePayRequest(f *testing.F) {
	for _, s := range []string{`{"paymentRef":"psp-123"}`, `{"paymentRef":""}`, `{"paymentRef":"a\u0000"}`, `{}`, `[]`, `{"paymentRef":"x"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := api.DecodePayRequest(b)
		if err != nil {
			return
		}
		if !api.ValidPaymentRef(req.PaymentRef) || !utf8.ValidString(req.PaymentRef) || utf8.RuneCountInString(req.PaymentRef) > api.MaxPaymentRefLen {
			t.Fatalf("accepted an invalid reference %q", req.PaymentRef)
		}
	})
}

// A webhook body is checked after its signature, but is still decoded
// from bytes an attacker may have a secret for.
func FuzzDecodePaymentConfirmation(f *testing.F) {
	f.Add([]byte(`{"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","paymentRef":"psp-1"}`))
	f.Add([]byte(`{"orderId":"0190f5a27c4e7b1a9f001234567890ab","paymentRef":"psp-1"}`))
	f.Add([]byte(`{"orderId":"","paymentRef":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ref, err := api.DecodePaymentConfirmation(b)
		if err != nil {
			return
		}
		if len(id.String()) != 36 || !api.ValidPaymentRef(ref) {
			t.Fatalf("accepted %v %q", id, ref)
		}
	})
}
