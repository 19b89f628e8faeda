package app

import (
	"slices"
	"testing"

	"flashsale/gateway/internal/ratelimit"
)

// The reload rule: the file's limit is applied only when its value in the
// file changed since the last load; a limit set through the admin API
// otherwise survives a reload.
func TestReloadLimits(t *testing.T) {
	fileA, fileB, api := ratelimit.Rule{Rate: 1, Burst: 3}, ratelimit.Rule{Rate: 5, Burst: 10}, ratelimit.Rule{Rate: 0.5, Burst: 1}
	tests := []struct {
		name        string
		live        ratelimit.Rule // the rule in force before the reload
		prev, next  ratelimit.Rule // the file's value at the last load and now
		want        ratelimit.Rule
		wantApplied bool
		wantKept    bool
	}{
		{name: "unchanged file keeps the API's limit", live: api, prev: fileA, next: fileA, want: api, wantKept: true},
		{name: "changed file wins over the API's limit", live: api, prev: fileA, next: fileB, want: fileB, wantApplied: true},
		{name: "changed file applied", live: fileA, prev: fileA, next: fileB, want: fileB, wantApplied: true},
		{name: "unchanged file, nothing set live", live: fileA, prev: fileA, next: fileA, want: fileA},
		{name: "file turns the limit off", live: api, prev: fileA, next: ratelimit.Rule{}, want: ratelimit.Rule{}, wantApplied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The second limiter is the one under test; the others see an
			// unchanged file and nothing set live.
			var ls [5]*ratelimit.Limiter
			for i := range ls {
				ls[i] = ratelimit.New(fileA, 64)
			}
			ls[1].SetRule(tt.live)
			prev, next := limitSettings{fileA, tt.prev, fileA, fileA, fileA}, limitSettings{fileA, tt.next, fileA, fileA, fileA}
			applied, kept := reloadLimits(ls, prev, next)
			if got := ls[1].Rule(); got != tt.want {
				t.Errorf("rule after reload: got %+v, want %+v", got, tt.want)
			}
			for i, l := range ls {
				if i != 1 && l.Rule() != fileA {
					t.Errorf("limiter %d: got %+v, want %+v untouched", i, l.Rule(), fileA)
				}
			}
			if got := slices.Contains(applied, limitNames[1]); got != tt.wantApplied || len(applied) > 1 {
				t.Errorf("applied: got %v, want %s there: %v", applied, limitNames[1], tt.wantApplied)
			}
			if got := slices.Contains(kept, limitNames[1]); got != tt.wantKept || len(kept) > 1 {
				t.Errorf("kept: got %v, want %s there: %v", kept, limitNames[1], tt.wantKept)
			}
		})
	}
}
