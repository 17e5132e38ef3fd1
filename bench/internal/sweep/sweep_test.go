package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/proxy"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

func serveFixture(t *testing.T, o fixture.Options) string {
	t.Helper()
	return serveWrapped(t, o, func(h http.Handler) http.Handler { return h })
}

// serveWrapped serves a fixture behind the middleware wrap.
func serveWrapped(t *testing.T, o fixture.Options, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s := fixture.NewServer(o)
	srv := httptest.NewServer(wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestSweepParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []sweep.Shape
		wantErr bool
	}{
		{"", nil, false},
		{"none", nil, false},
		{"1x1,5x20, 20x50", []sweep.Shape{{1, 1}, {5, 20}, {20, 50}}, false},
		{"3x0", []sweep.Shape{{3, 0}}, false},
		{"0x5", nil, true},
		{"5", nil, true},
		{"ax2", nil, true},
	} {
		got, err := sweep.ParseShapes(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("ParseShapes(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"8,64,256", []int{8, 64, 256}, false},
		{"1", []int{1}, false},
		{"0", nil, true},
		{"8,,64", nil, true},
	} {
		got, err := sweep.ParseConns(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("ParseConns(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if s := (sweep.Shape{Upstreams: 5, Tools: 20}).String(); s != "5x20" {
		t.Errorf("Shape.String = %q", s)
	}
}

// TestSweepRunEndToEnd runs a tiny sweep against in-process fixtures, with
// one federation shape whose launcher serves another fixture, and checks
// that every field of the report is filled (not the timings).
func TestSweepRunEndToEnd(t *testing.T) {
	direct := serveFixture(t, fixture.Options{})
	gateway := serveFixture(t, fixture.Options{ExtraTools: 1})
	launched, stopped := 0, 0
	var progress bytes.Buffer
	cfg := sweep.Config{
		Env: sweep.Env{
			Direct:  sweep.Endpoint{URL: direct, Tool: "echo"},
			Gateway: sweep.Endpoint{URL: gateway, Tool: fixture.ExtraToolName(1)},
			Procs:   sweep.Procs{Gateway: []int{os.Getpid()}, Upstreams: []int{os.Getpid()}},
		},
		Methods: []string{sweep.MethodCall, sweep.MethodList},
		Shapes:  []sweep.Shape{{Upstreams: 2, Tools: 3}},
		Launch: func(ctx context.Context, s sweep.Shape) (sweep.Env, func() error, error) {
			launched++
			u := serveFixture(t, fixture.Options{ExtraTools: s.Tools})
			return sweep.Env{Direct: sweep.Endpoint{URL: u}, Gateway: sweep.Endpoint{URL: u}},
				func() error { stopped++; return nil }, nil
		},
		Conns:  []int{1, 3},
		Warmup: 50 * time.Millisecond,
		// Every stage must complete a request in its window: 200 ms left
		// a tools/list stage empty once on a machine running two test
		// suites at once.
		Duration: time.Second,
		Rounds:   1,
		Args:     json.RawMessage(`{"text":"hi"}`),
		Protocol: session.Protocol2025,
		Mode:     "test",
		Progress: &progress,
	}
	r, err := sweep.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if launched != 1 || stopped != 1 {
		t.Errorf("launcher started %d and stopped %d environments, want 1 and 1", launched, stopped)
	}
	// 3 groups (call, list, federation) x 2 conns x 2 sides.
	if len(r.Stages) != 12 {
		t.Fatalf("%d stages, want 12", len(r.Stages))
	}
	for _, st := range r.Stages {
		checkStage(t, st)
	}
	groups := r.Groups()
	var slugs []string
	for _, g := range groups {
		slugs = append(slugs, g.Slug())
		if len(g.Rows) != 2 || g.Rows[0].Conns != 1 || g.Rows[1].Conns != 3 {
			t.Errorf("group %s rows = %+v", g.Slug(), g.Rows)
		}
		for _, c := range g.Rows {
			if c.Direct == nil || c.Gateway == nil || c.Retention() <= 0 {
				t.Errorf("group %s c=%d: incomplete comparison %+v", g.Slug(), c.Conns, c)
			}
		}
	}
	if want := []string{"tools_call", "tools_list", "federation-2x3"}; !slices.Equal(slugs, want) {
		t.Errorf("groups = %v, want %v", slugs, want)
	}
	if !strings.Contains(progress.String(), "[tools/call direct c=1]") {
		t.Errorf("no progress for the first stage: %q", progress.String())
	}
	r.GOGC, r.GOMAXPROCS = "400", "1"
	md := r.Markdown()
	for _, want := range []string{" Gateway GOGC=400. GOMAXPROCS=1 in every gateway process. CPU columns", "## tools/call\n", "## tools/list\n", "## tools/list, federation 2x3\n", "(tools_call-latency.svg)", "| conns |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	checkPlots(t, r)
}

func checkStage(t *testing.T, st sweep.StageResult) {
	t.Helper()
	name := st.Method + " " + st.Shape + " " + st.Side
	if st.Requests == 0 || st.Errors != 0 || st.FirstError != "" || st.ReqPerSec <= 0 {
		t.Errorf("%s c=%d: requests %d, errors %d (%s), req/s %v", name, st.Conns, st.Requests, st.Errors, st.FirstError, st.ReqPerSec)
	}
	if st.Latency.N != st.Requests || st.Latency.P50 <= 0 || st.Latency.P99 < st.Latency.P50 {
		t.Errorf("%s c=%d: latency %+v", name, st.Conns, st.Latency)
	}
	if st.NegotiatedProtocol != session.Protocol2025 || st.URL == "" {
		t.Errorf("%s: protocol %q url %q", name, st.NegotiatedProtocol, st.URL)
	}
	if (st.Method == sweep.MethodCall) != (st.Tool != "") {
		t.Errorf("%s: tool %q", name, st.Tool)
	}
	if st.Rounds == 0 && (st.RoundRequests != nil || st.RoundRetention != nil || st.Retention != 0) {
		t.Errorf("%s: round fields set without rounds: %v %v %v", name, st.RoundRequests, st.RoundRetention, st.Retention)
	}
	if st.DriverCPUPerCall == nil {
		t.Errorf("%s: no driver CPU", name)
	}
	// This process stands in for the gateway, the proxy and the upstream
	// of the plain sweep; the federation launcher reports no processes.
	wantCPU := st.Shape == ""
	if (st.UpstreamCPUPerCall != nil) != wantCPU || (st.GatewayCPUPerCall != nil) != (wantCPU && st.Side == sweep.SideGateway) ||
		(st.ProxyCPUPerCall != nil) != (wantCPU && st.Side == sweep.SideProxy) {
		t.Errorf("%s: gateway CPU %v, proxy CPU %v, upstream CPU %v", name, st.GatewayCPUPerCall, st.ProxyCPUPerCall, st.UpstreamCPUPerCall)
	}
}

// checkPlots decodes every plot and checks its series.
func checkPlots(t *testing.T, r *sweep.Report) {
	t.Helper()
	plots := r.Plots()
	if len(plots) != 6 {
		t.Fatalf("%d plots, want 6", len(plots))
	}
	for _, p := range plots {
		b, err := p.SVG()
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		var doc struct {
			Groups []struct {
				Class   string     `xml:"class,attr"`
				Name    string     `xml:"data-name,attr"`
				Circles []struct{} `xml:"circle"`
			} `xml:"g"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		var names []string
		for _, g := range doc.Groups {
			if g.Class == "series" {
				names = append(names, g.Name)
				if len(g.Circles) != 2 {
					t.Errorf("%s %s: %d points, want 2", p.Name, g.Name, len(g.Circles))
				}
			}
		}
		want := []string{"direct", "gateway"}
		if strings.HasSuffix(p.Name, "-latency.svg") {
			want = []string{"direct p50", "direct p99", "gateway p50", "gateway p99"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: series %v, want %v", p.Name, names, want)
		}
	}
}

func TestSweepStageCountsErrors(t *testing.T) {
	u := serveFixture(t, fixture.Options{})
	res, err := sweep.RunStage(t.Context(), sweep.Stage{
		Method: sweep.MethodCall, Side: sweep.SideGateway, Conns: 2, URL: u, Tool: "fail",
		Protocol: session.Protocol2025, Duration: 100 * time.Millisecond,
	}, sweep.Procs{}, nil)
	if err != nil {
		t.Fatalf("RunStage: %v", err)
	}
	if res.Requests != 0 || res.Errors == 0 || !strings.Contains(res.FirstError, "requested failure") {
		t.Errorf("requests %d, errors %d, first %q", res.Requests, res.Errors, res.FirstError)
	}
	if res.GatewayCPUPerCall != nil || res.UpstreamCPUPerCall != nil {
		t.Errorf("CPU reported without processes or requests")
	}
}

func TestSweepStageDialError(t *testing.T) {
	_, err := sweep.RunStage(t.Context(), sweep.Stage{
		Method: sweep.MethodList, Side: sweep.SideDirect, Conns: 2, URL: "http://127.0.0.1:1/mcp",
		Protocol: session.Protocol2025, Duration: time.Second,
	}, sweep.Procs{}, nil)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 sessions failed") {
		t.Errorf("RunStage = %v, want a dial error", err)
	}
}

func TestSweepConfigInvalid(t *testing.T) {
	_, err := sweep.Run(t.Context(), sweep.Config{
		Methods: []string{"tools/frobnicate"}, Shapes: []sweep.Shape{{1, 1}}, Conns: []int{0},
	})
	for _, want := range []string{"unknown method", "connection counts", "duration", "launcher"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want it to mention %q", err, want)
		}
	}
}

// TestSweepStageEdgesAndTags spreads connections over two "edges" (fixtures
// tagging their results a and b) and counts the calls and sessions by tag.
func TestSweepStageEdgesAndTags(t *testing.T) {
	a := serveFixture(t, fixture.Options{Tag: "a"})
	b := serveFixture(t, fixture.Options{Tag: "b"})
	st := sweep.Stage{
		Method: sweep.MethodCall, Side: sweep.SideGateway, Conns: 3, URLs: []string{a, b}, Tool: "echo",
		// Long enough for calls on both edges on a loaded machine.
		TagKey: fixture.MetaTag, Protocol: session.Protocol2025, Duration: time.Second,
	}
	if st.ConnURL(0) != a || st.ConnURL(1) != b || st.ConnURL(2) != a {
		t.Errorf("ConnURL spreads as %s %s %s", st.ConnURL(0), st.ConnURL(1), st.ConnURL(2))
	}
	res, err := sweep.RunStage(t.Context(), st, sweep.Procs{}, nil)
	if err != nil {
		t.Fatalf("RunStage: %v", err)
	}
	if res.Requests == 0 || res.Errors != 0 {
		t.Fatalf("requests %d, errors %d (%s)", res.Requests, res.Errors, res.FirstError)
	}
	if res.CallsByTag["a"] == 0 || res.CallsByTag["b"] == 0 || res.CallsByTag["a"]+res.CallsByTag["b"] != res.Requests {
		t.Errorf("calls by tag %v, want both edges and %d in all", res.CallsByTag, res.Requests)
	}
	if res.ConnsByTag["a"] != 2 || res.ConnsByTag["b"] != 1 {
		t.Errorf("conns by tag %v, want a:2 b:1", res.ConnsByTag)
	}
	plain := sweep.Stage{URL: a}
	if plain.ConnURL(5) != a {
		t.Errorf("ConnURL without URLs = %q", plain.ConnURL(5))
	}
}

// callLog records, across the two sides of a comparison, the side of each
// tools/call request in arrival order and the sessions each side opened.
type callLog struct {
	mu    sync.Mutex
	calls []string
	inits map[string]int
}

// wrap returns middleware logging side's requests.
func (l *callLog) wrap(side string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			l.mu.Lock()
			switch {
			case bytes.Contains(body, []byte(`"method":"tools/call"`)):
				l.calls = append(l.calls, side)
			case bytes.Contains(body, []byte(`"method":"initialize"`)):
				l.inits[side]++
			}
			l.mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
}

// runs returns the sides of consecutive runs of calls: "direct gateway
// direct" for d d g d d.
func (l *callLog) runs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.calls {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// TestSweepRunRounds measures one comparison in 3 interleaved rounds and
// checks that the sides alternated over sessions opened once, that each
// side's result covers all its slices and that retention is the median of
// the per-round ratios.
func TestSweepRunRounds(t *testing.T) {
	const rounds, conns = 3, 2
	l := &callLog{inits: map[string]int{}}
	direct := serveWrapped(t, fixture.Options{}, l.wrap(sweep.SideDirect))
	gateway := serveWrapped(t, fixture.Options{}, l.wrap(sweep.SideGateway))
	r, err := sweep.Run(t.Context(), sweep.Config{
		Env: sweep.Env{
			Direct:  sweep.Endpoint{URL: direct, Tool: "echo"},
			Gateway: sweep.Endpoint{URL: gateway, Tool: "echo"},
			Procs:   sweep.Procs{Gateway: []int{os.Getpid()}, Upstreams: []int{os.Getpid()}},
		},
		Methods: []string{sweep.MethodCall}, Conns: []int{conns},
		// Each slice must complete calls, on a loaded machine too.
		Warmup: 20 * time.Millisecond, Duration: rounds * 500 * time.Millisecond, Rounds: rounds,
		Protocol: session.Protocol2025, Mode: "test",
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(r.Stages) != 2 || r.Stages[0].Side != sweep.SideDirect || r.Stages[1].Side != sweep.SideGateway {
		t.Fatalf("stages %+v, want one direct and one gateway", r.Stages)
	}
	if r.Rounds != rounds {
		t.Errorf("report rounds %d, want %d", r.Rounds, rounds)
	}
	d, g := r.Stages[0], r.Stages[1]
	for _, st := range []sweep.StageResult{d, g} {
		checkStage(t, st)
		checkSlices(t, st, rounds)
	}
	want := slices.Repeat([]string{sweep.SideDirect, sweep.SideGateway}, rounds)
	if got := l.runs(); !slices.Equal(got, want) {
		t.Errorf("calls arrived in runs %v, want %v", got, want)
	}
	if l.inits[sweep.SideDirect] != conns || l.inits[sweep.SideGateway] != conns {
		t.Errorf("sessions opened %v, want %d per side", l.inits, conns)
	}
	checkRoundRetention(t, d, g, rounds)
	c := r.Groups()[0].Rows[0]
	if c.Retention() != g.Retention {
		t.Errorf("Comparison.Retention = %v, want the median %v", c.Retention(), g.Retention)
	}
	cell := fmt.Sprintf("| %.2f (%.2f–%.2f) |", g.Retention, g.RetentionMin, g.RetentionMax)
	if md := r.Markdown(); !strings.Contains(md, cell) || !strings.Contains(md, "interleaved in 3 rounds") {
		t.Errorf("Markdown lacks %q or the rounds note:\n%s", cell, md)
	}
}

// checkSlices checks that st has rounds slices with calls in each, and
// that its totals cover all of them.
func checkSlices(t *testing.T, st sweep.StageResult, rounds int) {
	t.Helper()
	if st.Rounds != rounds || len(st.RoundRequests) != rounds {
		t.Fatalf("%s: rounds %d, round requests %v; want %d slices", st.Side, st.Rounds, st.RoundRequests, rounds)
	}
	sum := 0
	for i, n := range st.RoundRequests {
		if n == 0 {
			t.Errorf("%s: no calls in slice %d", st.Side, i)
		}
		sum += n
	}
	if st.Requests != sum || st.Latency.N != sum {
		t.Errorf("%s: requests %d, latency samples %d, want the slices' %d", st.Side, st.Requests, st.Latency.N, sum)
	}
	if want := float64(sum) / st.Duration.Seconds(); st.ReqPerSec != want {
		t.Errorf("%s: req/s %v, want %v", st.Side, st.ReqPerSec, want)
	}
}

// checkRoundRetention checks the gateway's per-round ratios against the
// slices' counts, and their median and range.
func checkRoundRetention(t *testing.T, d, g sweep.StageResult, rounds int) {
	t.Helper()
	if d.RoundRetention != nil || d.Retention != 0 {
		t.Errorf("direct stage has retention %v %v", d.RoundRetention, d.Retention)
	}
	if len(g.RoundRetention) != rounds {
		t.Fatalf("round retention %v, want %d ratios", g.RoundRetention, rounds)
	}
	for i, v := range g.RoundRetention {
		if want := float64(g.RoundRequests[i]) / float64(d.RoundRequests[i]); v != want {
			t.Errorf("round %d retention %v, want %d/%d", i, v, g.RoundRequests[i], d.RoundRequests[i])
		}
	}
	sorted := slices.Sorted(slices.Values(g.RoundRetention))
	if g.Retention != sorted[1] || g.RetentionMin != sorted[0] || g.RetentionMax != sorted[2] {
		t.Errorf("retention %v (%v–%v), want median %v of %v", g.Retention, g.RetentionMin, g.RetentionMax, sorted[1], sorted)
	}
}

func TestSweepConfigRounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rounds   int
		duration time.Duration
		wantErr  string
	}{
		{"zero", 0, time.Second, "need rounds >= 1, got 0"},
		{"negative", -2, time.Second, "need rounds >= 1, got -2"},
		{"slices too short", 11, time.Second, "11 rounds of a 1s duration make 90.90909ms slices; need slices of at least 100ms"},
		{"slices of 100ms", 10, time.Second, ""},
		{"one round has no slice minimum", 1, 50 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No methods and no shapes: Run only validates.
			_, err := sweep.Run(t.Context(), sweep.Config{Conns: []int{1}, Duration: tc.duration, Rounds: tc.rounds})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Run = %v, want error %q", err, tc.wantErr)
			}
		})
	}
}

// serveProxy serves a bare reverse proxy in front of the MCP endpoint
// upstream and returns the proxy's MCP endpoint.
func serveProxy(t *testing.T, upstream string) string {
	t.Helper()
	u, err := proxy.ParseUpstream(upstream)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(proxy.New(u, nil))
	t.Cleanup(srv.Close)
	return proxy.Endpoint(srv.Listener.Addr().String(), u)
}

// TestSweepRunRoundsProxy measures one comparison with a proxy side in 3
// interleaved rounds and checks that the three sides alternated in order
// over sessions opened once, and that the proxy's and the gateway's
// per-round retentions are each against the direct slice of the same
// round.
func TestSweepRunRoundsProxy(t *testing.T) {
	const rounds, conns = 3, 2
	l := &callLog{inits: map[string]int{}}
	direct := serveWrapped(t, fixture.Options{}, l.wrap(sweep.SideDirect))
	// The proxy has an upstream of its own, so that its calls are told
	// apart from the direct side's.
	prox := serveProxy(t, serveWrapped(t, fixture.Options{}, l.wrap(sweep.SideProxy)))
	gateway := serveWrapped(t, fixture.Options{ExtraTools: 1}, l.wrap(sweep.SideGateway))
	pid := []int{os.Getpid()}
	r, err := sweep.Run(t.Context(), sweep.Config{
		Env: sweep.Env{
			Direct:  sweep.Endpoint{URL: direct, Tool: "echo"},
			Proxy:   sweep.Endpoint{URL: prox, Tool: "echo"},
			Gateway: sweep.Endpoint{URL: gateway, Tool: fixture.ExtraToolName(1)},
			Procs:   sweep.Procs{Gateway: pid, Proxy: pid, Upstreams: pid},
		},
		Methods: []string{sweep.MethodCall}, Conns: []int{conns},
		Warmup: 20 * time.Millisecond, Duration: rounds * 500 * time.Millisecond, Rounds: rounds,
		Protocol: session.Protocol2025, Mode: "test",
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var sides []string
	for _, st := range r.Stages {
		sides = append(sides, st.Side)
	}
	if want := []string{sweep.SideDirect, sweep.SideProxy, sweep.SideGateway}; !slices.Equal(sides, want) {
		t.Fatalf("stages of sides %v, want %v", sides, want)
	}
	d, p, g := r.Stages[0], r.Stages[1], r.Stages[2]
	for _, st := range r.Stages {
		checkStage(t, st)
		checkSlices(t, st, rounds)
	}
	if p.Tool != "echo" || p.URL != prox {
		t.Errorf("proxy stage calls %q at %s, want echo at %s", p.Tool, p.URL, prox)
	}
	want := slices.Repeat([]string{sweep.SideDirect, sweep.SideProxy, sweep.SideGateway}, rounds)
	if got := l.runs(); !slices.Equal(got, want) {
		t.Errorf("calls arrived in runs %v, want %v", got, want)
	}
	for _, side := range []string{sweep.SideDirect, sweep.SideProxy, sweep.SideGateway} {
		if l.inits[side] != conns {
			t.Errorf("sessions opened %v, want %d per side", l.inits, conns)
		}
	}
	checkRoundRetention(t, d, g, rounds)
	checkRoundRetention(t, d, p, rounds)
	c := r.Groups()[0].Rows[0]
	if c.Retention() != g.Retention || c.ProxyRetention() != p.Retention {
		t.Errorf("Comparison retentions %v and %v, want the medians %v (gateway) and %v (proxy)", c.Retention(), c.ProxyRetention(), g.Retention, p.Retention)
	}
	md := r.Markdown()
	for _, want := range []string{
		"direct, proxy and gateway interleaved in 3 rounds",
		"### The floor: a bare reverse proxy (`bench proxy`)",
		fmt.Sprintf("| %.2f (%.2f–%.2f) |", p.Retention, p.RetentionMin, p.RetentionMax),
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestSweepRunStartProxy starts the methods' environment with a proxy in
// front of its direct upstream and checks that the proxy is started once,
// in front of that upstream, measured with the direct side's tool and
// stopped before its environment, and that the federation shapes have no
// proxy side even when their launcher names one.
func TestSweepRunStartProxy(t *testing.T) {
	var events []string // the launcher's and the proxy's, in order
	direct := serveFixture(t, fixture.Options{})
	gateway := serveFixture(t, fixture.Options{ExtraTools: 1})
	pid := []int{os.Getpid()}
	var proxyURL string
	cfg := sweep.Config{
		Methods: []string{sweep.MethodCall, sweep.MethodList},
		Shapes:  []sweep.Shape{{Upstreams: 2, Tools: 3}},
		Launch: func(ctx context.Context, s sweep.Shape) (sweep.Env, func() error, error) {
			events = append(events, "launch "+s.String())
			stop := func() error { events = append(events, "stop "+s.String()); return nil }
			if s.Tools > 0 {
				u := serveFixture(t, fixture.Options{ExtraTools: s.Tools})
				// A proxy side the sweep must not measure: nothing listens.
				return sweep.Env{
					Direct: sweep.Endpoint{URL: u}, Gateway: sweep.Endpoint{URL: u},
					Proxy: sweep.Endpoint{URL: "http://127.0.0.1:1/mcp", Tool: "echo"},
				}, stop, nil
			}
			return sweep.Env{
				Direct:  sweep.Endpoint{URL: direct, Tool: "echo"},
				Gateway: sweep.Endpoint{URL: gateway, Tool: fixture.ExtraToolName(1)},
				Procs:   sweep.Procs{Gateway: pid, Upstreams: pid},
			}, stop, nil
		},
		StartProxy: func(ctx context.Context, upstream string) (string, []int, func() error, error) {
			events = append(events, "proxy in front of "+upstream)
			proxyURL = serveProxy(t, upstream)
			return proxyURL, pid, func() error { events = append(events, "stop proxy"); return nil }, nil
		},
		Conns: []int{2}, Warmup: 20 * time.Millisecond, Duration: 500 * time.Millisecond, Rounds: 1,
		Args: json.RawMessage(`{"text":"hi"}`), Protocol: session.Protocol2025, Mode: "test",
	}
	r, err := sweep.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantEvents := []string{"launch 1x0", "proxy in front of " + direct, "stop proxy", "stop 1x0", "launch 2x3", "stop 2x3"}
	if !slices.Equal(events, wantEvents) {
		t.Errorf("events %q, want %q", events, wantEvents)
	}
	var got []string
	for _, st := range r.Stages {
		checkStage(t, st)
		got = append(got, st.Method+" "+st.Shape+" "+st.Side)
		if st.Side == sweep.SideProxy && (st.URL != proxyURL || st.Method == sweep.MethodCall && st.Tool != "echo") {
			t.Errorf("proxy stage %s at %s calls %q, want %s and the direct side's tool echo", st.Method, st.URL, st.Tool, proxyURL)
		}
	}
	want := []string{
		"tools/call  direct", "tools/call  proxy", "tools/call  gateway",
		"tools/list  direct", "tools/list  proxy", "tools/list  gateway",
		"tools/list 2x3 direct", "tools/list 2x3 gateway",
	}
	if !slices.Equal(got, want) {
		t.Errorf("stages %q, want %q", got, want)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(js, []byte(`"side":"proxy"`)); n != 2 {
		t.Errorf("JSON has %d proxy stages, want 2", n)
	}
	if n := bytes.Count(js, []byte(`"proxy_cpu_us_per_call":`)); n != 2 {
		t.Errorf("JSON has %d proxy CPU figures, want 2", n)
	}
}

// TestSweepRunStartProxyFails: when the proxy cannot start, Run measures
// nothing and stops the environment it started.
func TestSweepRunStartProxyFails(t *testing.T) {
	stopped := 0
	u := serveFixture(t, fixture.Options{})
	r, err := sweep.Run(t.Context(), sweep.Config{
		Methods: []string{sweep.MethodCall},
		Launch: func(ctx context.Context, s sweep.Shape) (sweep.Env, func() error, error) {
			return sweep.Env{Direct: sweep.Endpoint{URL: u, Tool: "echo"}, Gateway: sweep.Endpoint{URL: u, Tool: "echo"}},
				func() error { stopped++; return nil }, nil
		},
		StartProxy: func(ctx context.Context, upstream string) (string, []int, func() error, error) {
			return "", nil, nil, errors.New("no such binary")
		},
		Conns: []int{1}, Duration: time.Second, Rounds: 1, Protocol: session.Protocol2025,
	})
	if err == nil || !strings.Contains(err.Error(), "sweep: start proxy: no such binary") {
		t.Errorf("Run = %v, want the proxy's start error", err)
	}
	if r == nil || len(r.Stages) != 0 || stopped != 1 {
		t.Errorf("report %v, environment stopped %d times; want no stages and one stop", r, stopped)
	}
}
