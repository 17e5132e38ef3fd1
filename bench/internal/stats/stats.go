// Package stats summarizes latency samples: nearest-rank percentiles over a
// sorted slice of durations.
package stats

import (
	"slices"
	"time"
)

// Summary describes a set of latency samples. Every duration field is in
// nanoseconds on the wire (JSON keys end in _ns); all are zero when N is 0.
type Summary struct {
	// N is the number of samples.
	N    int           `json:"n"`
	Min  time.Duration `json:"min_ns"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be in ascending order: the smallest sample such that
// at least p percent of the samples are less than or equal to it. It
// returns 0 for an empty slice; p <= 0 gives the minimum, p >= 100 the
// maximum.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// rank = ceil(p/100 * n), computed in integers of 1/1000 percent so
	// that, e.g., p=99 with n=100 gives exactly rank 99.
	milli := int64(p*1000 + 0.5)
	rank := int((milli*int64(n) + 100_000 - 1) / 100_000)
	return sorted[min(max(rank, 1), n)-1]
}

// Summarize sorts samples in place and returns their summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	slices.Sort(samples)
	var total time.Duration
	for _, d := range samples {
		total += d
	}
	return Summary{
		N:    len(samples),
		Min:  samples[0],
		Mean: total / time.Duration(len(samples)),
		P50:  Percentile(samples, 50),
		P90:  Percentile(samples, 90),
		P99:  Percentile(samples, 99),
		P999: Percentile(samples, 99.9),
		Max:  samples[len(samples)-1],
	}
}
