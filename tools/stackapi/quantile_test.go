package stackapi

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestHistogramQuantile(t *testing.T) {
	const page = `# TYPE x_seconds histogram
x_seconds_bucket{le="0.001"} 0
x_seconds_bucket{le="0.002"} 50
x_seconds_bucket{le="0.005"} 90
x_seconds_bucket{le="0.01"} 100
x_seconds_bucket{le="+Inf"} 100
x_seconds_sum 0.3
x_seconds_count 100
# TYPE empty_seconds histogram
empty_seconds_bucket{le="0.001"} 0
empty_seconds_bucket{le="+Inf"} 0
empty_seconds_sum 0
empty_seconds_count 0
# TYPE slow_seconds histogram
slow_seconds_bucket{le="0.001"} 1
slow_seconds_bucket{le="+Inf"} 10
slow_seconds_sum 50
slow_seconds_count 10
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		family string
		q      float64
		want   float64
		wantOK bool
	}{
		// rank 50 is the top of the (0.001, 0.002] bucket
		{"median", "x_seconds", 0.5, 0.002, true},
		// rank 25: halfway through the 50 samples of (0.001, 0.002]
		{"first quartile interpolated", "x_seconds", 0.25, 0.0015, true},
		// rank 99: 9 of the 10 samples of (0.005, 0.01]
		{"p99", "x_seconds", 0.99, 0.0095, true},
		{"empty histogram", "empty_seconds", 0.5, 0, false},
		// rank 5 lies above every finite bound: only a lower bound is known
		{"beyond the last finite bucket", "slow_seconds", 0.5, 0.001, false},
		{"no such family", "missing", 0.5, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := HistogramQuantile(fams[tt.family], tt.q)
			if ok != tt.wantOK || (got-tt.want) > 1e-9 || (tt.want-got) > 1e-9 {
				t.Errorf("HistogramQuantile(%s, %v) = %v, %v; want %v, %v", tt.family, tt.q, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
