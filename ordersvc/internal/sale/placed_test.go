package sale

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestPlacedRecently(t *testing.T) {
	now := time.Now()
	fresh, _ := uuid.NewV7()
	tests := []struct {
		name string
		id   uuid.UUID
		at   time.Time
		want bool
	}{
		{"just minted v7", fresh, now, true},
		{"v7 older than the window", fresh, now.Add(InFlightWindow + time.Second), false},
		{"v4 carries no time", uuid.New(), now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := placedRecently(tt.id, tt.at, InFlightWindow); got != tt.want {
				t.Errorf("placedRecently = %v, want %v", got, tt.want)
			}
		})
	}
}
