package store

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

func TestUUIDArrayKeepsIDsInOrder(t *testing.T) {
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	got := uuidArray(ids)
	if len(got) != len(ids) {
		t.Fatalf("%d ids, want %d", len(got), len(ids))
	}
	for i := range ids {
		if !got[i].Valid || uuid.UUID(got[i].Bytes) != ids[i] {
			t.Errorf("id %d: %v, want %v", i, got[i], ids[i])
		}
	}
}

// BenchmarkUUIDArray encodes a batch's 500 order ids as a uuid[] parameter,
// as pgx does for a query: the ids as they are and through uuidArray.
func BenchmarkUUIDArray(b *testing.B) {
	ids := make([]uuid.UUID, 500)
	for i := range ids {
		ids[i] = uuid.New()
	}
	m := pgtype.NewMap()
	for _, c := range []struct {
		name string
		arg  func() any
	}{
		{"[]uuid.UUID", func() any { return ids }},
		{"uuidArray", func() any { return uuidArray(ids) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, c.arg(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
