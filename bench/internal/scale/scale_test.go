package scale_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/scale"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

func TestScaleShares(t *testing.T) {
	got := scale.Shares([]string{"worker-1", "worker-2", "worker-3"},
		map[string]int{"worker-1": 30, "worker-2": 60, "": 5, "stray": 5},
		map[string]int{"worker-1": 20, "worker-2": 44})
	want := []scale.Share{
		{Worker: "worker-1", Sessions: 20, Calls: 30, Fraction: 0.3},
		{Worker: "worker-2", Sessions: 44, Calls: 60, Fraction: 0.6},
		{Worker: "worker-3", Sessions: 0, Calls: 0, Fraction: 0},
		{Worker: "untagged", Sessions: 0, Calls: 10, Fraction: 0.1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Shares =\n%+v\nwant\n%+v", got, want)
	}
	if got := scale.Shares([]string{"w"}, nil, nil); !slices.Equal(got, []scale.Share{{Worker: "w"}}) {
		t.Errorf("Shares of nothing = %+v", got)
	}
}

// point returns a point measured at rps requests per second.
func point(workers int, rps float64) scale.Point {
	return scale.Point{Workers: workers, Stage: sweep.StageResult{
		ReqPerSec: rps, Requests: int(rps), Latency: stats.Summary{P50: 30 * time.Millisecond, P99: 60 * time.Millisecond},
	}}
}

// fakeLauncher serves one in-process fixture per "worker" behind each
// "edge" URL, tagging results with the worker's id; the gateway PID is
// this process.
func fakeLauncher(t *testing.T, launched *[]int) scale.Launcher {
	return func(_ context.Context, n int) (scale.Env, func() error, error) {
		*launched = append(*launched, n)
		env := scale.Env{GatewayPIDs: []int{os.Getpid()}, GOGC: "400", GOMAXPROCS: "1"}
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("worker-%d", i)
			s := fixture.NewServer(fixture.Options{Tag: id})
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
			t.Cleanup(srv.Close)
			env.URLs = append(env.URLs, srv.URL+"/mcp")
			env.Workers = append(env.Workers, id)
		}
		return env, func() error { return nil }, nil
	}
}

func TestScaleRun(t *testing.T) {
	var launched []int
	r, err := scale.Run(t.Context(), scale.Config{
		// Each point must complete calls, on a loaded machine too.
		Workers: []int{1, 2}, Conns: 4, Warmup: 20 * time.Millisecond, Duration: time.Second,
		Tool: "echo", Args: json.RawMessage(`{"text":"hi"}`), TagKey: fixture.MetaTag,
		Protocol: session.Protocol2025, Target: 1.5, TargetWorkers: 2, Edges: 1, Routers: 1, Upstream: "test fixture",
		Launch: fakeLauncher(t, &launched),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(launched, []int{1, 2}) || len(r.Points) != 2 {
		t.Fatalf("launched %v, %d points", launched, len(r.Points))
	}
	if r.BaselineWorkers != 1 || r.Points[0].Ratio != 1 || r.Points[1].Ratio <= 0 {
		t.Errorf("baseline %d, ratios %v %v", r.BaselineWorkers, r.Points[0].Ratio, r.Points[1].Ratio)
	}
	if r.Verdict != scale.Pass && r.Verdict != scale.Miss {
		t.Errorf("verdict %q", r.Verdict)
	}
	for _, p := range r.Points {
		st := p.Stage
		if st.Requests == 0 || st.Errors != 0 || st.GatewayCPUPerCall == nil || st.Conns != 4 || p.GOGC != "400" || p.GOMAXPROCS != "1" {
			t.Errorf("workers=%d: %+v", p.Workers, st)
		}
		if len(p.Shares) != p.Workers {
			t.Errorf("workers=%d: shares %+v", p.Workers, p.Shares)
		}
		calls, sessions := 0, 0
		for _, s := range p.Shares {
			calls += s.Calls
			sessions += s.Sessions
			if s.Calls == 0 || !strings.HasPrefix(s.Worker, "worker-") {
				t.Errorf("workers=%d: share %+v", p.Workers, s)
			}
		}
		if calls != st.Requests || sessions != 4 {
			t.Errorf("workers=%d: shares add up to %d calls and %d sessions, want %d and 4", p.Workers, calls, sessions, st.Requests)
		}
		if !strings.Contains(p.Line(), fmt.Sprintf("workers=%d ", p.Workers)) {
			t.Errorf("Line = %q", p.Line())
		}
	}
	if _, err := r.SVG(); err != nil {
		t.Errorf("SVG: %v", err)
	}
}

func TestScaleVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		points    []scale.Point
		want      string
		wantRatio []float64
		wantLine  string
	}{
		{"pass", []scale.Point{point(1, 500), point(2, 990), point(4, 1900)}, scale.Pass, []float64{1, 1.98, 3.8}, "PASS: 3.80× at 4 workers vs 1 (target ≥ 3.60×)"},
		{"miss", []scale.Point{point(1, 500), point(2, 900), point(4, 1200)}, scale.Miss, []float64{1, 1.8, 2.4}, "MISS: 2.40× at 4 workers vs 1"},
		{"exactly the target", []scale.Point{point(1, 500), point(4, 1800)}, scale.Pass, []float64{1, 3.6}, "PASS"},
		{"no 4 workers", []scale.Point{point(1, 500), point(2, 990)}, scale.NA, []float64{1, 1.98}, "n/a"},
		{"no 1 worker", []scale.Point{point(2, 1000), point(4, 1900)}, scale.NA, []float64{1, 1.9}, "n/a"},
		{"baseline measured nothing", []scale.Point{point(1, 0), point(4, 1900)}, scale.NA, []float64{0, 0}, "n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := verdictOf(t, tc.points)
			if r.Verdict != tc.want {
				t.Errorf("verdict %q, want %q", r.Verdict, tc.want)
			}
			for i, p := range r.Points {
				if d := p.Ratio - tc.wantRatio[i]; d > 1e-9 || d < -1e-9 {
					t.Errorf("ratio at %d workers = %v, want %v", p.Workers, p.Ratio, tc.wantRatio[i])
				}
			}
			if !strings.Contains(r.VerdictLine(), tc.wantLine) {
				t.Errorf("VerdictLine = %q, want it to contain %q", r.VerdictLine(), tc.wantLine)
			}
		})
	}
}

// verdictOf returns a report of points against the 3.6× at 4 workers
// target, finished.
func verdictOf(t *testing.T, points []scale.Point) *scale.Report {
	t.Helper()
	r := &scale.Report{Target: 3.6, TargetWorkers: 4, Points: points}
	r.Finish()
	return r
}

func TestScaleMarkdownAndChart(t *testing.T) {
	r := &scale.Report{
		Protocol: session.Protocol2025, Conns: 64, Warmup: 2 * time.Second, Duration: 10 * time.Second,
		Tool: "fixture__echo", Edges: 1, Routers: 1, Upstream: "stdio fixture", Target: 3.6, TargetWorkers: 4,
		Points: []scale.Point{point(1, 480), point(2, 950), point(4, 1500)},
	}
	r.Points[2].Shares = []scale.Share{{Worker: "worker-1", Sessions: 20, Calls: 300, Fraction: 0.25}, {Worker: "worker-2", Sessions: 12, Calls: 300, Fraction: 0.25}}
	r.Points[2].Stage.FirstError = "boom"
	r.Points[1].GOGC, r.Points[1].GOMAXPROCS = "400", "1"
	r.Points[2].Stage.Errors = 1
	r.Points[1].IdleRSS = &report.IdleRSS{After: 2 * time.Second, Processes: []report.ProcessRSS{
		{Process: "nats", PID: 10, KiB: 20480, AnonKiB: 3000, FileKiB: 17000},
		{Process: "worker-2", PID: 11, KiB: 15000, AnonKiB: 4000, FileKiB: 11000},
	}}
	r.Finish()
	md := r.Markdown()
	if strings.Count(md, "## Idle RSS per gateway process") != 1 || strings.Contains(md, "1 worker (max") {
		t.Errorf("Markdown: want one idle RSS section, for 2 workers only:\n%s", md)
	}
	for _, want := range []string{
		"2 workers (max 20480 KiB, max anon 4000 KiB):",
		"| nats     |  10 |        20480 | 20.0 |     3000 |    17000 |",
		"| worker-2 |  11 |        15000 | 14.6 |     4000 |    11000 |",
		"file is RssFile, mostly the switchyard binary",
		"# Switchyard horizontal scaling",
		"**MISS: 3.12× at 4 workers vs 1 (target ≥ 3.60×)**",
		"| workers | req/s | ratio to 1 |",
		"|       4 |  1500 |       3.12 |  30000 |  60000 |      1 |                          - / - / - | worker-1 20s 25%, worker-2 12s 25%   |            |",
		"Gateway: 1 edge, 1 router, N upstream-workers",
		"Gateway processes (and their stdio upstreams): GOGC=400, GOMAXPROCS=1. CPU columns",
		"- workers=4: 1 errors, first: `boom`",
		"(scale-throughput.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	b, err := r.SVG()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Class   string     `xml:"class,attr"`
			Name    string     `xml:"data-name,attr"`
			Circles []struct{} `xml:"circle"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	var series []string
	for _, g := range doc.Groups {
		if g.Class == "series" {
			series = append(series, fmt.Sprintf("%s:%d", g.Name, len(g.Circles)))
		}
	}
	if want := []string{"measured:3", "linear scaling:3", "target 3.6× at 4:1"}; !slices.Equal(series, want) {
		t.Errorf("series %v, want %v", series, want)
	}
}

func TestScaleConfigInvalid(t *testing.T) {
	_, err := scale.Run(t.Context(), scale.Config{Workers: []int{0}, Conns: 0})
	for _, want := range []string{"worker counts", "conns", "launcher"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want it to mention %q", err, want)
		}
	}
}
