package scrape_test

import (
	"strings"
	"testing"

	"flashsale/tools/scrape"
)

func TestValueAndSum(t *testing.T) {
	fams, err := scrape.Parse(strings.NewReader(`# TYPE a_total counter
a_total{route="purchase",key="ip"} 2
a_total{route="purchase",key="user"} 3
a_total{route="queue",key="ip"} 5
# TYPE g gauge
g 7
# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+Inf"} 4
h_sum 2
h_count 4
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want float64
	}{
		{"labelled series", v(fams.Value("a_total", "route", "purchase", "key", "user")), 3},
		{"absent series", v(fams.Value("a_total", "route", "nowhere")), 0},
		{"unlabelled gauge", v(fams.Value("g")), 7},
		{"histogram count", v(fams.Value("h")), 4},
		{"sum over a label", fams.Sum("a_total", "route", "purchase"), 5},
		{"sum of every series", fams.Sum("a_total"), 10},
		{"sum of an absent family", fams.Sum("nope"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if _, ok := fams.Value("a_total", "route", "nowhere"); ok {
		t.Error("a series that does not exist was found")
	}
}

func v(f float64, _ bool) float64 { return f }
