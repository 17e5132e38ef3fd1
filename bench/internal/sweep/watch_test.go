package sweep

import (
	"strings"
	"testing"
	"time"
)

// TestProgressRate: the progress line shows no rate until the measured
// window is minRateWindow old (a rate over microseconds is absurd), then
// calls per second.
func TestProgressRate(t *testing.T) {
	from := time.Now()
	sp := span{warmup: time.Second, length: 10 * time.Second, from: from}
	var c counters
	c.done.Store(3)
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{
		{-500 * time.Millisecond, "[x] warmup 0.5s/1s"},
		{10 * time.Microsecond, "[x] 0.0s/10s  - req/s  0 errors"},
		{2 * time.Second, "[x] 2.0s/10s  2 req/s  0 errors"},
	} {
		var b strings.Builder
		p := &progressLine{w: &b, label: "[x]"}
		p.show(from.Add(tc.at), sp, &c)
		if got := strings.TrimSpace(strings.TrimPrefix(b.String(), "\r")); got != tc.want {
			t.Errorf("at %v: %q, want %q", tc.at, got, tc.want)
		}
	}
}
