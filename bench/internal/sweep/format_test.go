package sweep_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func f64(v float64) *float64 { return &v }

// measured returns a stage result with the given numbers: req/s over a
// 10s window, latencies in µs, CPU figures in µs per request (nil:
// unknown); mid is the gateway's CPU, or on the proxy side the proxy's.
func measured(method, shape, side string, conns int, rps float64, p50, p99 int, mid, up, drv *float64) sweep.StageResult {
	const window = 10 * time.Second
	n := int(rps * window.Seconds())
	res := sweep.StageResult{
		Stage: sweep.Stage{
			Method: method, Side: side, Shape: shape, Conns: conns, URL: "http://127.0.0.1:9000/mcp",
			Protocol: session.Protocol2025, Warmup: 2 * time.Second, Duration: window,
		},
		NegotiatedProtocol: session.Protocol2025, Requests: n, ReqPerSec: rps,
		Latency: stats.Summary{
			N: n, P50: time.Duration(p50) * time.Microsecond, P99: time.Duration(p99) * time.Microsecond,
		},
		GatewayCPUPerCall: mid, UpstreamCPUPerCall: up, DriverCPUPerCall: drv,
	}
	if side == sweep.SideProxy {
		res.GatewayCPUPerCall, res.ProxyCPUPerCall = nil, mid
	}
	return res
}

// inRounds marks res as measured in len(reqs) rounds with reqs requests
// per slice; ret, for a non-direct side, is the per-round retention.
func inRounds(res sweep.StageResult, reqs []int, ret ...float64) sweep.StageResult {
	res.Rounds, res.RoundRequests = len(reqs), reqs
	if len(ret) > 0 {
		res.RoundRetention = ret
		res.Retention, res.RetentionMin, res.RetentionMax = ret[len(ret)/2], ret[0], ret[0]
		for _, v := range ret {
			res.RetentionMin, res.RetentionMax = min(res.RetentionMin, v), max(res.RetentionMax, v)
		}
	}
	return res
}

// baseReport returns a report with fixed metadata and the stages sts.
func baseReport(rounds int, sts ...sweep.StageResult) *sweep.Report {
	return &sweep.Report{
		Mode: "embedded", Protocol: session.Protocol2025, Start: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC),
		Host:  report.Host{GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "amd64", NumCPU: 8, CPUModel: "Test CPU", LoadAvg: "0.10 0.20 0.30"},
		Conns: []int{8, 64}, Warmup: 2 * time.Second, Duration: 10 * time.Second, Rounds: rounds,
		Args: json.RawMessage(`{"text":"hi"}`), GOGC: "400", GOMAXPROCS: "2", Stages: sts,
	}
}

// withProxy returns sts with stage p inserted after each direct stage
// that p(direct) returns true for (the proxy side of that stage).
func withProxy(sts []sweep.StageResult, p func(d sweep.StageResult) (sweep.StageResult, bool)) []sweep.StageResult {
	var out []sweep.StageResult
	for _, st := range sts {
		out = append(out, st)
		if st.Side != sweep.SideDirect {
			continue
		}
		if ps, ok := p(st); ok {
			out = append(out, ps)
		}
	}
	return out
}

// sequentialReport is a sweep of one stage after the other: tools/call at
// 8 and 64 connections (the gateway with errors at 64), tools/list at 8
// and a federation shape at 8; with proxy, tools/call and tools/list have
// a proxy side (with errors at 64, and no CPU figure for tools/list).
func sequentialReport(proxy bool) *sweep.Report {
	call, list := sweep.MethodCall, sweep.MethodList
	d, g := sweep.SideDirect, sweep.SideGateway
	gwErr := measured(call, "", g, 64, 9000, 6500, 21000, f64(260), f64(48), f64(60))
	gwErr.Errors, gwErr.FirstError = 3, "calling \"tools/call\": overloaded"
	sts := []sweep.StageResult{
		measured(call, "", d, 8, 20000, 380, 1200, nil, f64(50), f64(55)),
		measured(call, "", g, 8, 12000, 640, 2100, f64(250), f64(49), f64(58)),
		measured(call, "", d, 64, 24000, 2500, 9000, nil, f64(47), f64(52)),
		gwErr,
		measured(list, "", d, 8, 18000, 420, 1500, nil, f64(52), f64(50)),
		measured(list, "", g, 8, 11000, 700, 2400, f64(270), f64(51), f64(57)),
		measured(list, "5x20", d, 8, 15000, 500, 1700, nil, nil, f64(61)),
		measured(list, "5x20", g, 8, 3000, 2600, 8000, nil, nil, f64(90)),
	}
	if proxy {
		sts = withProxy(sts, func(dst sweep.StageResult) (sweep.StageResult, bool) {
			p := sweep.SideProxy
			switch {
			case dst.Shape != "":
				return sweep.StageResult{}, false
			case dst.Method == list:
				return measured(list, "", p, 8, 14000, 520, 1800, nil, f64(51), f64(53)), true
			case dst.Conns == 8:
				return measured(call, "", p, 8, 15000, 500, 1600, f64(120), f64(50), f64(56)), true
			}
			pe := measured(call, "", p, 64, 17000, 3500, 11000, f64(130), f64(47), f64(54))
			pe.Errors, pe.FirstError = 1, "calling \"tools/call\": EOF"
			return pe, true
		})
	}
	return baseReport(1, sts...)
}

// roundsReport is tools/call at 8 and 64 connections in 3 interleaved
// rounds, in a cluster; with proxy, with a proxy side.
func roundsReport(proxy bool) *sweep.Report {
	call, d, g := sweep.MethodCall, sweep.SideDirect, sweep.SideGateway
	sts := []sweep.StageResult{
		inRounds(measured(call, "", d, 8, 20000, 380, 1200, nil, f64(50), f64(55)), []int{66000, 67000, 67000}),
		inRounds(measured(call, "", g, 8, 12000, 640, 2100, f64(250), f64(49), f64(58)), []int{39000, 40000, 41000}, 0.59, 0.60, 0.61),
		inRounds(measured(call, "", d, 64, 24000, 2500, 9000, nil, f64(47), f64(52)), []int{80000, 80000, 80000}),
		inRounds(measured(call, "", g, 64, 9000, 6500, 21000, f64(260), f64(48), f64(60)), []int{29000, 30000, 31000}, 0.36, 0.38, 0.39),
	}
	if proxy {
		sts = withProxy(sts, func(dst sweep.StageResult) (sweep.StageResult, bool) {
			p := sweep.SideProxy
			if dst.Conns == 8 {
				return inRounds(measured(call, "", p, 8, 15000, 500, 1600, f64(120), f64(50), f64(56)), []int{49000, 50000, 51000}, 0.74, 0.75, 0.77), true
			}
			return inRounds(measured(call, "", p, 64, 17000, 3500, 11000, f64(130), f64(47), f64(54)), []int{56000, 57000, 57000}, 0.70, 0.71, 0.72), true
		})
	}
	r := baseReport(3, sts...)
	r.Mode, r.Topology = "cluster", &report.Topology{Edges: 2, Routers: 1, Workers: 1}
	return r
}

// checkGolden compares got with testdata/name, rewriting it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update to rewrite it);\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// renderPlots returns every plot of r, each after a line naming it.
func renderPlots(t *testing.T, r *sweep.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, p := range r.Plots() {
		svg, err := p.SVG()
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		fmt.Fprintf(&b, "== %s ==\n%s\n", p.Name, svg)
	}
	return b.Bytes()
}

// TestSweepReportGolden renders hand-made reports as Markdown, JSON, SVG
// plots and console lines and compares them with the golden files in
// testdata/. The golden files of the reports without a proxy side were
// written before the proxy side existed: their output must not change.
func TestSweepReportGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report *sweep.Report
	}{
		{"sequential", sequentialReport(false)},
		{"rounds", roundsReport(false)},
		{"sequential-proxy", sequentialReport(true)},
		{"rounds-proxy", roundsReport(true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGolden(t, tc.name+".md", []byte(tc.report.Markdown()))
			js, err := json.MarshalIndent(tc.report, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name+".json", append(js, '\n'))
			checkGolden(t, tc.name+"-plots.svg.txt", renderPlots(t, tc.report))
			var lines bytes.Buffer
			for _, st := range tc.report.Stages {
				fmt.Fprintln(&lines, st.Line())
			}
			checkGolden(t, tc.name+"-lines.txt", lines.Bytes())
		})
	}
}

// TestSweepGroups checks how Groups gathers the stages into comparisons,
// with and without a proxy side, and each comparison's retentions.
func TestSweepGroups(t *testing.T) {
	type row struct {
		conns                  int
		direct, proxy, gateway string // the stage's rounded req/s, "" for none
		retention, proxyRet    string
	}
	type group struct {
		slug     string
		hasProxy bool
		rows     []row
	}
	for _, tc := range []struct {
		name   string
		report *sweep.Report
		want   []group
	}{
		{"sequential", sequentialReport(false), []group{
			{"tools_call", false, []row{{8, "20000", "", "12000", "0.60", "0.00"}, {64, "24000", "", "9000", "0.38", "0.00"}}},
			{"tools_list", false, []row{{8, "18000", "", "11000", "0.61", "0.00"}}},
			{"federation-5x20", false, []row{{8, "15000", "", "3000", "0.20", "0.00"}}},
		}},
		{"sequential with a proxy", sequentialReport(true), []group{
			// Without rounds, the ratios of the whole stages' rates.
			{"tools_call", true, []row{{8, "20000", "15000", "12000", "0.60", "0.75"}, {64, "24000", "17000", "9000", "0.38", "0.71"}}},
			{"tools_list", true, []row{{8, "18000", "14000", "11000", "0.61", "0.78"}}},
			{"federation-5x20", false, []row{{8, "15000", "", "3000", "0.20", "0.00"}}},
		}},
		{"rounds with a proxy", roundsReport(true), []group{
			{"tools_call", true, []row{{8, "20000", "15000", "12000", "0.60", "0.75"}, {64, "24000", "17000", "9000", "0.38", "0.71"}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate := func(s *sweep.StageResult, side string) string {
				switch {
				case s == nil:
					return ""
				case s.Side != side:
					return "wrong side " + s.Side
				}
				return fmt.Sprintf("%.0f", s.ReqPerSec)
			}
			var got []group
			for _, g := range tc.report.Groups() {
				gg := group{slug: g.Slug(), hasProxy: g.HasProxy()}
				for _, c := range g.Rows {
					gg.rows = append(gg.rows, row{
						c.Conns, rate(c.Direct, sweep.SideDirect), rate(c.Proxy, sweep.SideProxy), rate(c.Gateway, sweep.SideGateway),
						fmt.Sprintf("%.2f", c.Retention()), fmt.Sprintf("%.2f", c.ProxyRetention()),
					})
				}
				got = append(got, gg)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("groups\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

// TestSweepRoundsRetentionIsMedian checks that in rounds, both
// retentions are the stages' stored medians of the per-round ratios, not
// the ratios of the whole stages' rates.
func TestSweepRoundsRetentionIsMedian(t *testing.T) {
	r := roundsReport(true)
	for i := range r.Stages {
		switch r.Stages[i].Side {
		case sweep.SideGateway:
			r.Stages[i].Retention = 0.5 // the rates give 0.60
		case sweep.SideProxy:
			r.Stages[i].Retention = 0.7 // the rates give 0.75
		}
	}
	c := r.Groups()[0].Rows[0]
	if c.Retention() != 0.5 || c.ProxyRetention() != 0.7 {
		t.Errorf("retention %v, proxy retention %v; want the stored medians 0.5 and 0.7", c.Retention(), c.ProxyRetention())
	}
}

// TestSweepPlotsSeries checks the plots' series and their colours with and
// without a proxy side; a federation group never has a proxy series.
func TestSweepPlotsSeries(t *testing.T) {
	const blue, green, orange = "#1f77b4", "#2ca02c", "#ff7f0e"
	noProxyLat := []string{"direct p50 " + blue, "direct p99 " + blue, "gateway p50 " + orange, "gateway p99 " + orange}
	noProxyThr := []string{"direct " + blue, "gateway " + orange}
	proxyLat := []string{"direct p50 " + blue, "direct p99 " + blue, "proxy p50 " + green, "proxy p99 " + green, "gateway p50 " + orange, "gateway p99 " + orange}
	proxyThr := []string{"direct " + blue, "proxy " + green, "gateway " + orange}
	for _, tc := range []struct {
		name   string
		report *sweep.Report
		want   map[string][]string // by plot name
	}{
		{"without a proxy", sequentialReport(false), map[string][]string{
			"tools_call-latency.svg": noProxyLat, "tools_call-throughput.svg": noProxyThr,
			"tools_list-latency.svg": noProxyLat, "tools_list-throughput.svg": noProxyThr,
			"federation-5x20-latency.svg": noProxyLat, "federation-5x20-throughput.svg": noProxyThr,
		}},
		{"with a proxy", sequentialReport(true), map[string][]string{
			"tools_call-latency.svg": proxyLat, "tools_call-throughput.svg": proxyThr,
			"tools_list-latency.svg": proxyLat, "tools_list-throughput.svg": proxyThr,
			"federation-5x20-latency.svg": noProxyLat, "federation-5x20-throughput.svg": noProxyThr,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plots := tc.report.Plots()
			if len(plots) != len(tc.want) {
				t.Errorf("%d plots, want %d", len(plots), len(tc.want))
			}
			for _, p := range plots {
				var got []string
				for _, s := range p.Chart.Series {
					got = append(got, s.Name+" "+s.Color)
					if s.Dashed != strings.HasSuffix(s.Name, " p99") {
						t.Errorf("%s %s: dashed %v", p.Name, s.Name, s.Dashed)
					}
				}
				if !slices.Equal(got, tc.want[p.Name]) {
					t.Errorf("%s: series %v, want %v", p.Name, got, tc.want[p.Name])
				}
			}
		})
	}
}
