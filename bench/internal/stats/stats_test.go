package stats_test

import (
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// seq returns 1..n microseconds.
func seq(n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Microsecond
	}
	return s
}

func TestStatsPercentile(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample p50", []time.Duration{7 * us}, 50, 7 * us},
		{"one sample p99", []time.Duration{7 * us}, 99, 7 * us},
		{"two samples p50", []time.Duration{1 * us, 9 * us}, 50, 1 * us},
		{"two samples p51", []time.Duration{1 * us, 9 * us}, 51, 9 * us},
		{"100 p50", seq(100), 50, 50 * us},
		{"100 p90", seq(100), 90, 90 * us},
		{"100 p99", seq(100), 99, 99 * us},
		{"100 p100", seq(100), 100, 100 * us},
		{"100 p0 is min", seq(100), 0, 1 * us},
		{"1000 p99.9", seq(1000), 99.9, 999 * us},
		{"2000 p50", seq(2000), 50, 1000 * us},
		{"2000 p99", seq(2000), 99, 1980 * us},
		{"10 p99 rounds up", seq(10), 99, 10 * us},
		{"10 p91", seq(10), 91, 10 * us},
		{"10 p90", seq(10), 90, 9 * us},
		{"above 100 clamps", seq(10), 150, 10 * us},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stats.Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(%d samples, %v) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
			}
		})
	}
}

func TestStatsSummarize(t *testing.T) {
	us := time.Microsecond
	s := []time.Duration{5 * us, 1 * us, 4 * us, 2 * us, 3 * us}
	got := stats.Summarize(s)
	want := stats.Summary{N: 5, Min: us, Mean: 3 * us, P50: 3 * us, P90: 5 * us, P99: 5 * us, P999: 5 * us, Max: 5 * us}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if s[0] != us || s[4] != 5*us {
		t.Errorf("Summarize did not sort in place: %v", s)
	}
	if z := stats.Summarize(nil); z != (stats.Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", z)
	}
}
