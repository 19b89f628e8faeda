package adminapi

import (
	"encoding/json"
	"testing"
)

func TestRuleUnmarshal(t *testing.T) {
	tests := []struct {
		in   string
		want Rule
		ok   bool
	}{
		{`{"rate":1.5,"burst":3}`, Rule{1.5, 3}, true},
		{`{"rate":0,"burst":0}`, Rule{}, true}, // rate 0: the limit off, said explicitly
		{`{"burst":3}`, Rule{}, false},         // a missing rate must not turn the limit off
		{`{"rate":1}`, Rule{}, false},
		{`{}`, Rule{}, false},
		{`{"rate":"1","burst":3}`, Rule{}, false},
		{`{"rate":1,"burst":3,"brust":4}`, Rule{}, false}, // a misspelt key is no silent change
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got Rule
			err := json.Unmarshal([]byte(tt.in), &got)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v, ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestPriceUnmarshal(t *testing.T) {
	tests := []struct {
		in   string
		want Price
		ok   bool
	}{
		{`"19.99"`, "19.99", true},
		{`19.99`, "19.99", true}, // a number keeps its text: no float rounding
		{`true`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got Price
			err := json.Unmarshal([]byte(tt.in), &got)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("got %q, %v; want %q, ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}
