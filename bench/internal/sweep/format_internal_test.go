package sweep

import "testing"

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
