package sweep

import (
	"math"
	"slices"
	"testing"
)

func TestSweepFmtMicros(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0.5, "0.5µs"},
		{143, "143µs"},
		{999.4, "999µs"},
		{1000, "1ms"},
		{1234, "1.23ms"},
		{15000, "15ms"},
		{500000, "500ms"},
		{1e6, "1s"},
		{2.5e6, "2.5s"},
		{1.5e9, "1500s"},
	} {
		if got := fmtMicros(tc.v); got != tc.want {
			t.Errorf("fmtMicros(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestSweepMedian(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{
		{[]float64{0.7}, 0.7},
		{[]float64{0.7, 0.5, 0.6}, 0.6},
		{[]float64{0.5, 0.9, 0.6, 0.7}, 0.65},
		{[]float64{0.66, 0.54, 0.62, 0.70, 0.61}, 0.62},
	} {
		in := slices.Clone(tc.vs)
		if got := median(tc.vs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("median(%v) = %v, want %v", tc.vs, got, tc.want)
		}
		if !slices.Equal(in, tc.vs) {
			t.Errorf("median changed its input to %v", tc.vs)
		}
	}
}
