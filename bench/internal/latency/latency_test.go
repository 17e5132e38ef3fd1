package latency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/hops"
	"github.com/switchyard-mcp/switchyard/bench/internal/latency"
	"github.com/switchyard-mcp/switchyard/bench/internal/proxy"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/internal/hop"
)

const us = time.Microsecond

func sample() *latency.Result {
	return &latency.Result{
		Mode: "embedded", Protocol: session.Protocol2025, N: 2000, Warmup: 200,
		Start: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC),
		Direct: latency.Side{
			Target:   latency.Target{URL: "http://d/mcp", Tool: "echo"},
			Protocol: session.Protocol2025,
			Summary:  stats.Summary{N: 2000, Min: 90 * us, Mean: 150 * us, P50: 143*us + 999, P90: 180 * us, P99: 410 * us, P999: 900 * us, Max: 1200 * us},
		},
		Gateway: latency.Side{
			Target:   latency.Target{URL: "http://g/mcp", Tool: "fixture__echo"},
			Protocol: session.Protocol2025,
			Summary:  stats.Summary{N: 1990, Min: 200 * us, Mean: 320 * us, P50: 301 * us, P90: 377 * us, P99: 1650 * us, P999: 4000 * us, Max: 5000 * us},
			Errors:   10,
		},
		AddedP50: 157*us + 1, AddedP99: 1240 * us,
	}
}

func TestLatencyBenchLine(t *testing.T) {
	want := "BENCH_RESULT mode=embedded protocol=2025-11-25 n=2000 direct_p50_us=143 direct_p99_us=410 " +
		"gw_p50_us=301 gw_p90_us=377 gw_p99_us=1650 added_p50_us=157 added_p99_us=1240"
	if got := sample().BenchLine(); got != want {
		t.Errorf("BenchLine() =\n%s\nwant\n%s", got, want)
	}
	r := sample()
	r.AddedP50 = -12 * us
	if got := r.BenchLine(); !strings.Contains(got, " added_p50_us=-12 ") {
		t.Errorf("negative added p50 not kept: %s", got)
	}
}

func TestLatencyMarkdown(t *testing.T) {
	want := "" +
		"| side    | tool          | protocol   | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | mean µs | errors |\n" +
		"| ------- | ------------- | ---------- | -----: | -----: | -----: | -------: | -----: | ------: | -----: |\n" +
		"| direct  | echo          | 2025-11-25 |    143 |    180 |    410 |      900 |   1200 |     150 |      0 |\n" +
		"| gateway | fixture__echo | 2025-11-25 |    301 |    377 |   1650 |     4000 |   5000 |     320 |     10 |\n" +
		"| added   |               |            |    157 |        |   1240 |          |        |         |        |\n"
	got := sample().Markdown()
	if !strings.Contains(got, want) {
		t.Errorf("Markdown() =\n%s\nwant it to contain\n%s", got, want)
	}
	if !strings.HasPrefix(got, "## Latency gate: mode=embedded protocol=2025-11-25\n") {
		t.Errorf("Markdown() heading: %q", strings.SplitN(got, "\n", 2)[0])
	}
}

func TestLatencyCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*latency.Result)
		max     time.Duration
		wantErr []string
	}{
		{name: "pass", max: 5 * time.Millisecond},
		{name: "limit disabled", edit: func(r *latency.Result) { r.AddedP50 = time.Hour }},
		{name: "added p50 too high", max: 100 * us, wantErr: []string{"added p50 157µs exceeds the limit 100µs"}},
		{
			// 1046.6µs is printed as 1046 µs (BENCH_RESULT's added_p50_us):
			// the gate compares that number, so it passes a 1046µs limit
			// and the message never reads "1047µs exceeds the limit".
			name: "compared in the printed whole µs", max: 1046 * us,
			edit: func(r *latency.Result) { r.AddedP50 = 1046*us + 600 },
		},
		{
			name: "over the limit by a whole µs", max: 1045 * us, wantErr: []string{"added p50 1046µs exceeds the limit 1.045ms"},
			edit: func(r *latency.Result) { r.AddedP50 = 1046*us + 600 },
		},
		{name: "errors at 1% pass", edit: func(r *latency.Result) { r.Gateway.Errors = 20 }},
		{name: "errors above 1%", edit: func(r *latency.Result) { r.Direct.Errors = 21 }, wantErr: []string{"direct: 21 of 2000"}},
		{name: "protocol mismatch", edit: func(r *latency.Result) { r.Direct.Protocol = session.Protocol2026 }, wantErr: []string{"different protocols"}},
		{name: "proxy passes", edit: withProxy, max: 5 * time.Millisecond},
		{name: "proxy errors at 1% pass", edit: func(r *latency.Result) { withProxy(r); r.Proxy.Errors = 20 }},
		{name: "proxy errors above 1%", edit: func(r *latency.Result) { withProxy(r); r.Proxy.Errors = 21 }, wantErr: []string{"proxy: 21 of 2000"}},
		{name: "proxy protocol mismatch", edit: func(r *latency.Result) { withProxy(r); r.Proxy.Protocol = session.Protocol2026 }, wantErr: []string{"direct \"2025-11-25\", proxy \"2026-07-28\""}},
		{
			name: "limit on gateway minus direct only", max: 200 * us,
			edit: func(r *latency.Result) { withProxy(r); r.OverProxyP50, r.ProxyAddedP50 = time.Hour, time.Hour },
		},
		{
			name: "several", max: 100 * us,
			edit:    func(r *latency.Result) { r.Gateway.Errors = 2000 },
			wantErr: []string{"gateway: 2000 of 2000", "added p50"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			if tc.edit != nil {
				tc.edit(r)
			}
			err := r.Check(tc.max)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = nil, want errors %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// serveFixture serves a fixture over streamable HTTP for the test.
func serveFixture(t *testing.T, o fixture.Options, stateless bool) string {
	t.Helper()
	s := fixture.NewServer(o)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestLatencyRunEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		protocol  string
		stateless bool
	}{
		{session.Protocol2025, false},
		{session.Protocol2026, true},
	} {
		t.Run("protocol="+tc.protocol, func(t *testing.T) {
			direct := serveFixture(t, fixture.Options{}, tc.stateless)
			// The "gateway" has the tool under another name, as a gateway
			// would: the gateway side must call -gw-tool.
			gateway := serveFixture(t, fixture.Options{ExtraTools: 1}, tc.stateless)
			r, err := latency.Run(t.Context(), latency.Config{
				Direct:   latency.Target{URL: direct, Tool: "echo"},
				Gateway:  latency.Target{URL: gateway, Tool: fixture.ExtraToolName(1)},
				Args:     json.RawMessage(`{"text":"hi"}`),
				Warmup:   5,
				N:        20,
				Protocol: tc.protocol,
				Mode:     "test",
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r.Mode != "test" || r.Protocol != tc.protocol || r.N != 20 || r.Warmup != 5 || r.Start.IsZero() || r.Elapsed <= 0 {
				t.Errorf("run fields not populated: %+v", r)
			}
			checkSide(t, "direct", r.Direct, direct, "echo", tc.protocol)
			checkSide(t, "gateway", r.Gateway, gateway, "tool-0001", tc.protocol)
			if r.AddedP50 != r.Gateway.Summary.P50-r.Direct.Summary.P50 || r.AddedP99 != r.Gateway.Summary.P99-r.Direct.Summary.P99 {
				t.Errorf("added = %v/%v, inconsistent with the summaries", r.AddedP50, r.AddedP99)
			}
			if r.GatewayCPUPerCall != nil {
				t.Errorf("GatewayCPUPerCall = %v without GatewayPIDs", *r.GatewayCPUPerCall)
			}
			if r.Hops != nil {
				t.Errorf("Hops = %+v without Config.Hops", r.Hops)
			}
			if err := r.Check(0); err != nil {
				t.Errorf("Check(0) = %v", err)
			}
			if !strings.HasPrefix(r.BenchLine(), "BENCH_RESULT mode=test protocol="+tc.protocol+" n=20 ") {
				t.Errorf("BenchLine = %q", r.BenchLine())
			}
		})
	}
}

func checkSide(t *testing.T, name string, s latency.Side, url, tool, protocol string) {
	t.Helper()
	if s.URL != url || s.Tool != tool || s.Protocol != protocol {
		t.Errorf("%s: target %q %q protocol %q, want %q %q %q", name, s.URL, s.Tool, s.Protocol, url, tool, protocol)
	}
	if s.Errors != 0 || s.WarmupErrors != 0 {
		t.Errorf("%s: %d errors, %d warmup errors", name, s.Errors, s.WarmupErrors)
	}
	m := s.Summary
	if m.N != 20 || len(s.Samples) != 20 {
		t.Errorf("%s: summary of %d, %d samples, want 20", name, m.N, len(s.Samples))
	}
	if m.Min <= 0 || m.P50 < m.Min || m.P90 < m.P50 || m.P99 < m.P90 || m.Max < m.P99 || m.Mean <= 0 {
		t.Errorf("%s: summary not populated or not ordered: %+v", name, m)
	}
}

func TestLatencyRunCountsErrors(t *testing.T) {
	for _, failing := range []string{"gateway", "proxy"} {
		t.Run("side="+failing, func(t *testing.T) {
			direct := serveFixture(t, fixture.Options{}, false)
			cfg := latency.Config{
				Direct:   latency.Target{URL: direct, Tool: "echo"},
				Gateway:  latency.Target{URL: direct, Tool: "echo"},
				Proxy:    &latency.Target{URL: direct, Tool: "echo"},
				Warmup:   1,
				N:        3,
				Protocol: session.Protocol2025,
			}
			fail := &cfg.Gateway
			if failing == "proxy" {
				fail = cfg.Proxy
			}
			fail.Tool = "fail" // IsError results
			var log bytes.Buffer
			cfg.Log = &log
			r, err := latency.Run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			sides := map[string]*latency.Side{"direct": &r.Direct, "gateway": &r.Gateway, "proxy": r.Proxy}
			for name, sd := range sides {
				want := [3]int{0, 0, 3} // errors, warmup errors, successes
				if name == failing {
					want = [3]int{3, 1, 0}
				}
				if got := [3]int{sd.Errors, sd.WarmupErrors, sd.Summary.N}; got != want {
					t.Errorf("%s: errors, warmup errors, successes = %v, want %v", name, got, want)
				}
			}
			if !strings.Contains(log.String(), failing+": call fail:") {
				t.Errorf("errors not logged: %q", log.String())
			}
			if err := r.Check(0); err == nil || !strings.Contains(err.Error(), failing+": 3 of 3") {
				t.Errorf("Check = %v, want the %s side's error rate", err, failing)
			}
		})
	}
}

// withHops adds a per-hop summary to r, every call through a router:
// every segment 10µs + its index, outside 100µs.
func withHops(r *latency.Result) *latency.Result { return withRouted(r, 1990) }

// withRouted adds a per-hop summary to r like withHops, of which only
// routed of the 1990 complete calls went through a router (the others on a
// route grant), as hops.Collector summarizes them: the router and bus 2
// over the routed calls alone (zero when none was), and out of the sum
// unless every call was routed.
func withRouted(r *latency.Result, routed int) *latency.Result {
	h := &hops.Summary{Calls: 2000, Complete: 1990, Missing: 10, Routed: routed, Granted: 1990 - routed}
	for i, sg := range hops.Segments {
		p, n := time.Duration(10+i)*us, h.Complete
		if sg.Key == hops.OutsideKey {
			p = 100 * us
		}
		if sg.RoutedOnly {
			n = routed
			if n == 0 {
				p = 0
			}
		}
		h.Segments = append(h.Segments, hops.SegmentResult{Segment: sg, N: n, P50: p, P90: 2 * p, P99: 3 * p})
		if n == h.Complete {
			h.SumP50 += p
		}
	}
	h.ObservedP50 = 300 * us
	r.Hops = h
	return r
}

func TestLatencyBenchLineHops(t *testing.T) {
	base := sample().BenchLine()
	got := withHops(sample()).BenchLine()
	want := base + " hops_n=1990 hops_routed_n=1990 hops_edge_p50_us=10 hops_bus1_p50_us=11 hops_router_p50_us=12 hops_bus2_p50_us=13" +
		" hops_worker_before_p50_us=14 hops_upstream_p50_us=15 hops_worker_after_p50_us=16 hops_bus3_p50_us=17" +
		" hops_edge_after_p50_us=18 hops_outside_p50_us=100 hops_sum_p50_us=226"
	if got != want {
		t.Errorf("BenchLine() =\n%s\nwant\n%s", got, want)
	}
	r := sample()
	r.Hops = &hops.Summary{Calls: 5, Missing: 5}
	if got := r.BenchLine(); got != base {
		t.Errorf("BenchLine without complete stamps = %q, want the plain line", got)
	}
}

func TestLatencyMarkdownHops(t *testing.T) {
	r := withHops(sample())
	r.GOGC, r.GOMAXPROCS = "400", "1"
	md := r.Markdown()
	for _, want := range []string{
		" Gateway GOGC=400. GOMAXPROCS=1 in every gateway process.",
		"### Per-hop attribution (gateway side)",
		"| edge                             | edge_in → edge_pub               |  1990 |   10.0 |   20.0 |   30.0 |",
		"| router                           | router_in → router_out           |  1990 |   12.0 |   24.0 |   36.0 |",
		"| outside the stamps               | observed − (edge_out − edge_in)  |  1990 |  100.0 |  200.0 |  300.0 |",
		"| sum of the medians               |                                  |  1990 |  226.0 |        |        |",
		"| median of the sums               | gateway p50 of these calls       |  1990 |  300.0 |        |        |",
		"| direct call                      | the upstream without the gateway |  2000 |  144.0 |  180.0 |  410.0 |",
		"1990 measured calls", "(10 did not", "Of those, 1990 through a router, 0 on a route grant.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"hops: medians over the 1990 gateway calls with every stamp (10 without): 1990 through a router, 0 on a route grant\n",
		"    router                                  12.0 µs\n",
		"upstream (incl. worker's client)", "226.0 µs  (median of the sums", "direct call (for comparison)",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestLatencyHopsRouteGrants covers the per-hop report when calls went on
// route grants: a granted call has no router stamps, and a router median
// of 0.0 µs read as if the router were free.
func TestLatencyHopsRouteGrants(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		routed                   int
		benchKeys                string // hops_n up to bus 2
		text, markdown, notInAny []string
	}{
		{
			name: "no call routed", routed: 0,
			benchKeys: " hops_n=1990 hops_routed_n=0 hops_edge_p50_us=10 hops_bus1_p50_us=11 hops_router_p50_us=0 hops_bus2_p50_us=0 ",
			text: []string{
				"(10 without): 0 through a router, 1990 on a route grant\n",
				"    router                             n/a (no call routed)\n",
				"    bus 2 (router→worker)              n/a (no call routed)\n",
				"    sum of the medians                     201.0 µs  (without router and bus 2; median of the sums",
			},
			markdown: []string{
				"Of those, 0 through a router, 1990 on a route grant.",
				"| router                           | router_in → router_out                        |     0 | n/a (no call routed) |        |        |",
				"| bus 2 (router→worker)            | router_out → worker_in                        |     0 | n/a (no call routed) |        |        |",
				"| sum of the medians               | without router and bus 2                      |  1990 |                201.0 |        |        |",
				"it leaves out the router and bus 2",
			},
			notInAny: []string{"router                                   0.0", "|                  0.0 |"},
		},
		{
			name: "some calls routed", routed: 3,
			benchKeys: " hops_n=1990 hops_routed_n=3 hops_edge_p50_us=10 hops_bus1_p50_us=11 hops_router_p50_us=12 hops_bus2_p50_us=13 ",
			text: []string{
				"(10 without): 3 through a router, 1987 on a route grant\n",
				"    router                                  12.0 µs  (over the 3 routed calls)\n",
				"    bus 2 (router→worker)                   13.0 µs  (over the 3 routed calls)\n",
				"    sum of the medians                     201.0 µs  (without router and bus 2; median of the sums",
			},
			markdown: []string{
				"Of those, 3 through a router, 1987 on a route grant.",
				"| bus 1 (edge→router/worker)       | edge_pub → router_in, or worker_in on a grant |  1990 |   11.0 |   22.0 |   33.0 |",
				"| router                           | router_in → router_out                        |     3 |   12.0 |   24.0 |   36.0 |",
				"| sum of the medians               | without router and bus 2                      |  1990 |  201.0 |        |        |",
			},
			notInAny: []string{"n/a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := withRouted(sample(), tc.routed)
			line := r.BenchLine()
			if !strings.Contains(line, tc.benchKeys) || !strings.HasSuffix(line, " hops_sum_p50_us=201") {
				t.Errorf("BenchLine() =\n%s\nwant it to contain\n%s\nand end in hops_sum_p50_us=201", line, tc.benchKeys)
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			md := r.Markdown()
			for _, want := range tc.text {
				if !strings.Contains(text.String(), want) {
					t.Errorf("text lacks %q:\n%s", want, text.String())
				}
			}
			for _, want := range tc.markdown {
				if !strings.Contains(md, want) {
					t.Errorf("Markdown lacks %q:\n%s", want, md)
				}
			}
			for _, bad := range tc.notInAny {
				if strings.Contains(text.String(), bad) || strings.Contains(md, bad) {
					t.Errorf("output has %q:\n%s\n%s", bad, text.String(), md)
				}
			}
		})
	}
}

// stampingGateway serves a fixture-like server whose echo returns per-hop
// stamps when the call asks for them, as the gateway does; every third
// call's stamps lack up_sent. It counts the calls it got in *calls.
func stampingGateway(t *testing.T, calls *atomic.Int64) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "gw", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: "fixture__echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := calls.Add(1)
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}
			if req.Params.Meta[hops.MetaKey] != true {
				return res, nil
			}
			st := map[string]int64{}
			for i, name := range hop.Order {
				st[name] = int64(i) * 1000
			}
			if n%3 == 0 {
				delete(st, hop.UpSent)
			}
			res.Meta = mcp.Meta{hops.MetaKey: st}
			return res, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestLatencyRunHopsAndEdges(t *testing.T) {
	direct := serveFixture(t, fixture.Options{}, false)
	var callsA, callsB atomic.Int64
	edges := []string{stampingGateway(t, &callsA), stampingGateway(t, &callsB)}
	r, err := latency.Run(t.Context(), latency.Config{
		Direct:      latency.Target{URL: direct, Tool: "echo"},
		Gateway:     latency.Target{URLs: edges, Tool: "fixture__echo"},
		Warmup:      2,
		N:           30,
		Protocol:    session.Protocol2025,
		Hops:        true,
		GatewayPIDs: []int{os.Getpid()},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if a, b := callsA.Load(), callsB.Load(); a != 16 || b != 16 {
		t.Errorf("calls per edge %d and %d, want 16 and 16 (round robin)", a, b)
	}
	h := r.Hops
	if h == nil || h.Calls != 30 || h.Complete+h.Missing != 30 || h.Missing < 9 || h.Missing > 11 {
		t.Fatalf("hops = %+v, want 30 calls, about a third missing", h)
	}
	if h.Routed != h.Complete || h.Granted != 0 {
		t.Errorf("routed %d, granted %d of %d complete calls with router stamps", h.Routed, h.Granted, h.Complete)
	}
	if p, ok := h.P50("bus1"); !ok || p != time.Microsecond {
		t.Errorf("bus 1 p50 = %v, %v; want 1µs", p, ok)
	}
	// The fake stamps span 9µs, so every call's outside segment is its
	// observed latency minus 9µs, and so are the medians.
	if p, _ := h.P50(hops.OutsideKey); p != h.ObservedP50-9*time.Microsecond {
		t.Errorf("outside p50 %v, observed p50 %v; want 9µs apart", p, h.ObservedP50)
	}
	if r.GatewayCPUPerCall == nil {
		t.Error("no gateway CPU with GatewayPIDs")
	}
	if !strings.Contains(r.BenchLine(), " hops_n=") {
		t.Errorf("BenchLine lacks the hop keys: %s", r.BenchLine())
	}
	if r.Direct.Errors != 0 || r.Gateway.Errors != 0 {
		t.Errorf("errors %d/%d", r.Direct.Errors, r.Gateway.Errors)
	}
}

func TestLatencyIdleRSS(t *testing.T) {
	base := sample().BenchLine()
	r := sample()
	r.IdleRSS = &report.IdleRSS{After: 2 * time.Second, Processes: []report.ProcessRSS{
		// The largest anon part (nats) is not the largest total's.
		{Process: "nats", PID: 10, KiB: 20480, AnonKiB: 4500, FileKiB: 15000},
		{Process: "edge-1", PID: 11, KiB: 30001, AnonKiB: 3292, FileKiB: 23175},
	}}
	rssKeys := " idle_rss_max_kib=30001 idle_rss_anon_max_kib=4500"
	if got, want := r.BenchLine(), base+rssKeys; got != want {
		t.Errorf("BenchLine() =\n%s\nwant\n%s", got, want)
	}
	if got, want := withHops(r).BenchLine(), withHops(sample()).BenchLine()+rssKeys; got != want {
		t.Errorf("BenchLine() with hops =\n%s\nwant\n%s", got, want)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  idle RSS after 2s (KiB): nats 20480 (anon 4500, file 15000), edge-1 30001 (anon 3292, file 23175); max 30001, max anon 4500\n") {
		t.Errorf("WriteText lacks the idle RSS:\n%s", b.String())
	}
	md := r.Markdown()
	for _, want := range []string{
		"### Idle RSS per gateway process",
		"anon is RssAnon, the process's own memory",
		"| process | pid | idle RSS KiB |  MiB | anon KiB | file KiB |",
		"| edge-1  |  11 |        30001 | 29.3 |     3292 |    23175 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(sample().Markdown(), "Idle RSS") {
		t.Error("Markdown without IdleRSS mentions it")
	}

	// A kernel without RssAnon/RssFile (before 4.5): the total only, and
	// no anon key rather than a made-up number.
	// (withHops above added hops to r; start again from the sample.)
	idle := r.IdleRSS
	idle.Processes[0].AnonKiB, idle.Processes[0].FileKiB = report.UnknownKiB, report.UnknownKiB
	r = sample()
	r.IdleRSS = idle
	if got, want := r.BenchLine(), base+" idle_rss_max_kib=30001"; got != want {
		t.Errorf("BenchLine() with an unknown anon part =\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "nats 20480 (anon ?, file ?), edge-1 30001 (anon 3292, file 23175); max 30001, max anon ?\n") {
		t.Errorf("WriteText with an unknown anon part:\n%s", b.String())
	}
	if md := r.Markdown(); !strings.Contains(md, "| nats    |  10 |        20480 | 20.0 |        ? |        ? |") {
		t.Errorf("Markdown with an unknown anon part:\n%s", md)
	}
}

// withProxy adds a proxy side to r: p50 170µs, so 26µs over direct and
// 131µs under the gateway.
func withProxy(r *latency.Result) {
	r.Proxy = &latency.Side{
		Target:   latency.Target{URL: "http://p/mcp", Tool: "echo"},
		Protocol: session.Protocol2025,
		Summary:  stats.Summary{N: 2000, Min: 100 * us, Mean: 175 * us, P50: 170 * us, P90: 200 * us, P99: 450 * us, P999: 950 * us, Max: 1300 * us},
	}
	r.ProxyAddedP50 = r.Proxy.Summary.P50 - r.Direct.Summary.P50
	r.OverProxyP50 = r.Gateway.Summary.P50 - r.Proxy.Summary.P50
}

func TestLatencyProxyOutput(t *testing.T) {
	r := sample()
	withProxy(r)
	base := sample().BenchLine()
	if got, want := r.BenchLine(), base+" proxy_p50_us=170 proxy_added_p50_us=26 added_over_proxy_p50_us=131"; got != want {
		t.Errorf("BenchLine() =\n%s\nwant\n%s", got, want)
	}
	if got, want := withHops(r).BenchLine(), want3(base, " proxy_p50_us=170 proxy_added_p50_us=26 added_over_proxy_p50_us=131", withHops(sample()).BenchLine()); got != want {
		t.Errorf("BenchLine() with hops =\n%s\nwant\n%s", got, want)
	}
	for _, key := range []string{"proxy_p50_us", "proxy_added_p50_us", "added_over_proxy_p50_us"} {
		if strings.Contains(base, key) {
			t.Errorf("BenchLine without a proxy has %s: %s", key, base)
		}
	}
	md := r.Markdown()
	for _, want := range []string{
		"| direct               | echo          | 2025-11-25 |    143 |",
		"| proxy                | echo          | 2025-11-25 |    170 |    200 |    450 |      950 |   1300 |     175 |      0 |\n" +
			"| gateway              | fixture__echo |",
		"| added by the proxy   |               |            |     26 |",
		"| added over the proxy |               |            |    131 |",
		"minimal reverse proxy",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	const started = "started it with the gateway's GOGC and GOMAXPROCS"
	if strings.Contains(md, started) {
		t.Errorf("Markdown of a proxy the driver did not start says %q", started)
	}
	r.GOGC, r.GOMAXPROCS = "400", "1"
	if md := r.Markdown(); !strings.Contains(md, started) {
		t.Errorf("Markdown lacks %q:\n%s", started, md)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  proxy    p50     170µs  p90     200µs  p99     450µs  max    1300µs  errors 0  (echo, 2025-11-25)\n  gateway ",
		"  added over the proxy p50     131µs  (the proxy itself adds p50 26µs)\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var plain bytes.Buffer
	if err := sample().WriteText(&plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "proxy") || strings.Contains(sample().Markdown(), "proxy") {
		t.Errorf("output without a proxy side mentions it:\n%s", plain.String())
	}
}

// want3 returns the hops line with the proxy keys inserted after the
// base keys.
func want3(base, proxyKeys, withHops string) string {
	return base + proxyKeys + strings.TrimPrefix(withHops, base)
}

// callLog records which side each call reached, in order.
type callLog struct {
	mu    sync.Mutex
	sides []string
}

func (l *callLog) add(side string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sides = append(l.sides, side)
}

// recordingServer serves tool, recording each call under side in log.
func recordingServer(t *testing.T, side, tool string, log *callLog) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: side, Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: tool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			log.add(side)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestLatencyRunRotatesSides(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proxy bool
		first []string // the side called first on iterations 0, 1, 2, ...
	}{
		{"sides=2", false, []string{"direct", "gateway"}},
		{"sides=3", true, []string{"direct", "proxy", "gateway"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log callLog
			cfg := latency.Config{
				Direct:   latency.Target{URL: recordingServer(t, "direct", "echo", &log), Tool: "echo"},
				Gateway:  latency.Target{URL: recordingServer(t, "gateway", "fixture__echo", &log), Tool: "fixture__echo"},
				Warmup:   1,
				N:        6,
				Protocol: session.Protocol2025,
			}
			if tc.proxy {
				cfg.Proxy = &latency.Target{URL: recordingServer(t, "proxy", "echo", &log), Tool: "echo"}
			}
			if _, err := latency.Run(t.Context(), cfg); err != nil {
				t.Fatalf("Run: %v", err)
			}
			n := len(tc.first)
			var want []string
			for i := range 7 {
				for j := range n {
					want = append(want, tc.first[(i+j)%n])
				}
			}
			if got := strings.Join(log.sides, " "); got != strings.Join(want, " ") {
				t.Errorf("call order\n%s\nwant\n%s", got, strings.Join(want, " "))
			}
		})
	}
}

func TestLatencyRunThroughProxy(t *testing.T) {
	direct := serveFixture(t, fixture.Options{}, false)
	u, err := proxy.ParseUpstream(direct)
	if err != nil {
		t.Fatal(err)
	}
	p := proxy.New(u, nil)
	psrv := httptest.NewServer(p)
	t.Cleanup(psrv.Close)
	t.Cleanup(p.Transport.(*http.Transport).CloseIdleConnections)
	proxied := proxy.Endpoint(psrv.Listener.Addr().String(), u)
	gateway := serveFixture(t, fixture.Options{ExtraTools: 1}, false)
	r, err := latency.Run(t.Context(), latency.Config{
		Direct:   latency.Target{URL: direct, Tool: "echo"},
		Gateway:  latency.Target{URL: gateway, Tool: fixture.ExtraToolName(1)},
		Proxy:    &latency.Target{URL: proxied, Tool: "echo"},
		Args:     json.RawMessage(`{"text":"hi"}`),
		Warmup:   5,
		N:        20,
		Protocol: session.Protocol2025,
		Mode:     "test",
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Proxy == nil {
		t.Fatal("Result.Proxy is nil with Config.Proxy set")
	}
	checkSide(t, "direct", r.Direct, direct, "echo", session.Protocol2025)
	checkSide(t, "proxy", *r.Proxy, proxied, "echo", session.Protocol2025)
	checkSide(t, "gateway", r.Gateway, gateway, "tool-0001", session.Protocol2025)
	if r.ProxyAddedP50 != r.Proxy.Summary.P50-r.Direct.Summary.P50 || r.OverProxyP50 != r.Gateway.Summary.P50-r.Proxy.Summary.P50 {
		t.Errorf("proxy added %v, over proxy %v: inconsistent with the summaries", r.ProxyAddedP50, r.OverProxyP50)
	}
	if r.AddedP50 != r.Gateway.Summary.P50-r.Direct.Summary.P50 {
		t.Errorf("added p50 %v is not gateway minus direct", r.AddedP50)
	}
	if err := r.Check(0); err != nil {
		t.Errorf("Check(0) = %v", err)
	}
	if line := r.BenchLine(); !strings.Contains(line, " proxy_p50_us=") || !strings.Contains(line, " added_over_proxy_p50_us=") {
		t.Errorf("BenchLine lacks the proxy keys: %s", line)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"proxy":{`, `"proxy_added_p50_ns":`, `"added_over_proxy_p50_ns":`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}
