package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/latency"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// gateResult returns a passing result whose added p50 is 1046.6µs:
// added_p50_us=1046 on BENCH_RESULT, 1.047ms as a rounded Duration.
func gateResult() *latency.Result {
	side := func(tool string, p50 time.Duration) latency.Side {
		return latency.Side{
			Target: latency.Target{URL: "http://x/mcp", Tool: tool}, Protocol: session.Protocol2025,
			Summary: stats.Summary{N: 10, P50: p50, P99: p50},
		}
	}
	r := &latency.Result{
		Mode: "test", Protocol: session.Protocol2025, N: 10,
		Start:  time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC),
		Direct: side("echo", 200*time.Microsecond), Gateway: side("fixture__echo", 1246*time.Microsecond+600),
	}
	r.AddedP50 = r.Gateway.Summary.P50 - r.Direct.Summary.P50
	return r
}

func TestLatencyReportGateLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxAdded time.Duration
		want     string
		code     int
	}{
		{name: "no limit", maxAdded: 0, want: "bench latency: report only (added p50 1046µs; no limit)\n"},
		{name: "within the limit", maxAdded: 5 * time.Millisecond, want: "bench latency: PASS (added p50 1046µs, limit 5ms)\n"},
		// The gate compares the printed whole µs: 1046.6µs passes 1046µs.
		{name: "at the limit", maxAdded: 1046 * time.Microsecond, want: "bench latency: PASS (added p50 1046µs, limit 1.046ms)\n"},
		{name: "over the limit", maxAdded: time.Millisecond, want: "bench latency: FAIL: added p50 1046µs exceeds the limit 1ms\n", code: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := latencyReport(&stdout, &stderr, gateResult(), t.TempDir(), tc.maxAdded)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.HasSuffix(stderr.String(), tc.want) {
				t.Errorf("stderr =\n%s\nwant it to end in\n%s", stderr.String(), tc.want)
			}
			if !strings.Contains(stdout.String(), " added_p50_us=1046 ") {
				t.Errorf("BENCH_RESULT lacks added_p50_us=1046 (the number the gate line prints):\n%s", stdout.String())
			}
		})
	}
}

// TestLatencyIdleRSSPrintedOnce checks what "bench latency -start-cluster"
// prints on both streams: the announcement of the started cluster, then
// the report. The idle RSS line appeared in both.
func TestLatencyIdleRSSPrintedOnce(t *testing.T) {
	idle := &report.IdleRSS{After: idleRSSAfter, Processes: []report.ProcessRSS{{Process: "edge-1", PID: 11, KiB: 30001, AnonKiB: 3292, FileKiB: 23175}}}
	e := &launch.Stack{
		Cluster: &launch.Cluster{
			Topology: report.Topology{Edges: 1, Routers: 1, Workers: 1}, EdgeURLs: []string{"http://e/mcp"},
			IdleRSS: idle,
		},
		Fixtures: []*launch.Process{{Name: "fixture"}}, FixtureURLs: []string{"http://f/mcp"}, Names: []string{"fixture"},
	}
	var stdout, stderr bytes.Buffer
	announce(&stderr, e, 0)
	r := gateResult()
	r.IdleRSS = e.IdleRSS()
	if code := latencyReport(&stdout, &stderr, r, t.TempDir(), 0); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(stderr.String(), "started 1 fixture upstream(s)") {
		t.Errorf("stderr does not start with the announcement:\n%s", stderr.String())
	}
	all := stderr.String() + stdout.String()
	if n := strings.Count(all, "idle RSS after 2s"); n != 1 {
		t.Errorf("the idle RSS line is printed %d times, want once:\nstderr:\n%s\nstdout:\n%s", n, stderr.String(), stdout.String())
	}
}
