package event

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sample() OrderPlaced {
	return OrderPlaced{
		Version:  Version,
		OrderID:  uuid.MustParse("0190f5a2-7c4e-7b1a-9f00-1234567890ab"),
		SaleID:   7,
		ItemID:   42,
		UserID:   "user-123",
		PlacedAt: time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC),
	}
}

// The encoding is the contract between gateway and ordersvc: a change here
// must be deliberate (go test -update) and stay readable by the other side.
// A queued sale's event names the admission its reservation spent; the
// field is left out when there is none, so an unqueued sale's event is
// what it was before the field, and a reader that predates the field
// ignores it (encoding/json skips unknown fields).
func TestGolden(t *testing.T) {
	queued := sample()
	queued.AdmissionID = "t-0190f5a2"
	for file, e := range map[string]OrderPlaced{"order_placed_v1.json": sample(), "order_placed_v1_admission.json": queued} {
		t.Run(file, func(t *testing.T) {
			got, err := e.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("encoding changed:\n got %s\nwant %s", got, want)
			}
			back, err := Unmarshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(back, e); diff != "" {
				t.Errorf("decode golden (-got +want):\n%s", diff)
			}
		})
	}
}

// An order is never lost to its admission id: one the order service
// cannot keep (too long, not printable ASCII) decodes, and
// ValidAdmissionID says to drop it.
func TestOddAdmissionIDKeepsTheOrder(t *testing.T) {
	for _, id := range []string{strings.Repeat("t", MaxAdmissionIDLen+1), "tïcket", "del\x7f"} {
		in := `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z","admissionId":"` + id + `"}`
		e, err := Unmarshal([]byte(in))
		if err != nil {
			t.Errorf("Unmarshal with admission id %q: %v, want the event", id, err)
		}
		if ValidAdmissionID(e.AdmissionID) {
			t.Errorf("admission id %q taken for one to keep", e.AdmissionID)
		}
	}
	for _, id := range []string{"", "t", strings.Repeat("t", MaxAdmissionIDLen), "0190f5a27c4e7b1a9f001234567890ab"} {
		if !ValidAdmissionID(id) {
			t.Errorf("admission id %q refused", id)
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ``},
		{"not json", `hello`},
		{"truncated", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7`},
		{"wrong version", `{"v":2,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z"}`},
		{"bad uuid", `{"v":1,"orderId":"nope","saleId":7,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z"}`},
		{"negative item", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":-1,"userId":"u","placedAt":"2026-12-02T12:00:00Z"}`},
		{"missing user", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"placedAt":"2026-12-02T12:00:00Z"}`},
		{"NUL in user id", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"a\u0000b","placedAt":"2026-12-02T12:00:00Z"}`},
		{"missing time", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u"}`},
		{"admission id not a string", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z","admissionId":7}`},
		{"huge sale id", `{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":99999999999999999999,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Unmarshal([]byte(tt.in))
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Unmarshal(%q) error = %v, want ErrInvalid", tt.in, err)
			}
		})
	}
}

// An event of a newer version is ErrNewerVersion whatever its fields look
// like to this reader: a field whose type changed failed the decoding
// first, and the event was taken for garbage (its unit given back, though
// its order may have been answered 202).
func TestNewerVersionWithChangedFields(t *testing.T) {
	for _, in := range []string{
		`{"v":2,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":1764676800000}`,
		`{"v":2,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":"7","itemId":42,"userId":{"id":"u"},"placedAt":"2026-12-02T12:00:00Z"}`,
		`{"v":2,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":"2026-12-02T12:00:00Z"}`,
	} {
		if _, err := Unmarshal([]byte(in)); !errors.Is(err, ErrNewerVersion) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrNewerVersion", in, err)
		}
	}
	// An event of this version whose fields do not decode is garbage.
	if _, err := Unmarshal([]byte(`{"v":1,"orderId":"0190f5a2-7c4e-7b1a-9f00-1234567890ab","saleId":7,"itemId":42,"userId":"u","placedAt":1764676800000}`)); errors.Is(err, ErrNewerVersion) || !errors.Is(err, ErrInvalid) {
		t.Errorf("version 1 with a numeric placedAt: %v, want ErrInvalid only", err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	golden, _ := os.ReadFile(filepath.Join("testdata", "order_placed_v1.json"))
	f.Add(golden)
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		// Whatever decodes must validate and re-encode to an equal event.
		out, err := e.Marshal()
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		again, err := Unmarshal(out)
		if err != nil || !again.PlacedAt.Equal(e.PlacedAt) || again.OrderID != e.OrderID || again.UserID != e.UserID {
			t.Fatalf("round trip changed the event: %+v vs %+v (%v)", again, e, err)
		}
	})
}

// FuzzMarshalIsEncodingJSON: Marshal writes every valid event byte for
// byte as encoding/json does, so the wire format is the one
// encoding/json's struct tags define.
func FuzzMarshalIsEncodingJSON(f *testing.F) {
	s := sample()
	f.Add(s.OrderID[:], s.SaleID, s.ItemID, s.UserID, s.PlacedAt.UnixNano(), true, "")
	for _, user := range []string{"a", `quote"`, `back\slash`, "<tag>&", "ünïcode", "\u2028", "\x7f", "user 42"} {
		f.Add(s.OrderID[:], int64(1), int64(1<<62), user, int64(0), true, "")
		f.Add(s.OrderID[:], int64(1), int64(2), "u", int64(0), true, user)
	}
	f.Add(s.OrderID[:], int64(3), int64(4), "bob", int64(1_700_000_000_000_000_000), false, "ticket-9")
	f.Fuzz(func(t *testing.T, id []byte, sale, item int64, user string, nanos int64, utc bool, admission string) {
		if len(id) != 16 {
			return
		}
		at := time.Unix(0, nanos).UTC()
		if !utc {
			at = at.In(time.FixedZone("odd", 3*3600+1800))
		}
		e := OrderPlaced{Version: Version, OrderID: uuid.UUID(id), SaleID: sale, ItemID: item, UserID: user, PlacedAt: at, AdmissionID: admission}
		got, err := e.Marshal()
		if e.Validate() != nil {
			if err == nil {
				t.Fatalf("invalid event %+v marshalled", e)
			}
			return
		}
		want, wantErr := json.Marshal(e)
		if (err == nil) != (wantErr == nil) || string(got) != string(want) {
			t.Fatalf("Marshal %s, %v; encoding/json %s, %v", got, err, want, wantErr)
		}
	})
}

func BenchmarkMarshal(b *testing.B) {
	e := sample()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}
