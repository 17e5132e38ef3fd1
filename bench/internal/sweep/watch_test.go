package sweep

import (
	"context"
	"slices"
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

// TestSweepCPUGroups checks which processes each side's CPU window reads
// as its middle group (the gateway's, the proxy's, none for direct), and
// which field of the result that group's CPU lands in.
func TestSweepCPUGroups(t *testing.T) {
	procs := Procs{Gateway: []int{11, 12}, Proxy: []int{21}, Upstreams: []int{31}}
	for _, tc := range []struct {
		side             string
		wantMiddle       []int
		wantGW, wantProx bool
	}{
		{SideDirect, nil, false, false},
		{SideProxy, []int{21}, false, true},
		{SideGateway, []int{11, 12}, true, false},
	} {
		t.Run(tc.side, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // the window never opens: the pids are not read
			from := time.Now().Add(time.Hour)
			w := watch(ctx, tc.side, procs, span{from: from, until: from.Add(time.Second)}, &counters{}, nil)
			<-w.done
			if !slices.Equal(w.pids[procMiddle], tc.wantMiddle) || !slices.Equal(w.pids[procUpstreams], procs.Upstreams) {
				t.Errorf("middle pids %v, upstream pids %v; want %v and %v", w.pids[procMiddle], w.pids[procUpstreams], tc.wantMiddle, procs.Upstreams)
			}

			// 1ms of middle CPU over 10 requests: 100µs per request.
			w.closed = true
			w.end[procMiddle], w.end[procUpstreams], w.end[procDriver] = time.Millisecond, time.Millisecond, time.Millisecond
			w.pids[procDriver] = []int{0}
			res := StageResult{Stage: Stage{Side: tc.side}, Requests: 10}
			applyCPU(&res, []*cpuWindow{w})
			if (res.GatewayCPUPerCall != nil) != tc.wantGW || (res.ProxyCPUPerCall != nil) != tc.wantProx {
				t.Fatalf("gateway CPU %v, proxy CPU %v; want set: %v, %v", res.GatewayCPUPerCall, res.ProxyCPUPerCall, tc.wantGW, tc.wantProx)
			}
			for _, v := range []*float64{res.GatewayCPUPerCall, res.ProxyCPUPerCall, res.UpstreamCPUPerCall} {
				if v != nil && *v != 100 {
					t.Errorf("CPU per request %v µs, want 100", *v)
				}
			}
		})
	}
}
