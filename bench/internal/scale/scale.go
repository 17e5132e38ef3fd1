// Package scale measures horizontal scaling: the same tools/call load
// through gateways with more and more upstream-workers in front of a
// single-threaded upstream, reporting throughput per worker count and its
// ratio to one worker.
//
// Each worker count gets a fresh gateway (started by a [Launcher]), so that
// client sessions are placed on the final set of workers. A stage is a
// sweep stage ([sweep.RunStage]): Conns go-sdk sessions making sequential
// calls for Warmup and then Duration. When the upstream tags its results
// with the worker that ran them (the fixture's _meta "bench_tag"), each
// worker's share of the calls is reported too: 2025-era sessions are
// placed by rendezvous hashing of the session id, so shares are uneven.
package scale

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

// Env is a running gateway with some number of workers.
type Env struct {
	// URLs are the gateway's MCP endpoints (its edges); connections are
	// spread round robin over them.
	URLs []string
	// GatewayPIDs are every gateway process, NATS included: their summed
	// CPU time per call is reported.
	GatewayPIDs []int
	// UpstreamPIDs, if known, are the upstream processes (the workers'
	// stdio children): their CPU time per call is reported too.
	UpstreamPIDs []int
	// Workers are the workers' ids, which the upstream puts in its results'
	// TagKey.
	Workers []string
	// GOGC and GOMAXPROCS are the gateway processes' settings; LogDir is
	// where their logs are.
	GOGC, GOMAXPROCS, LogDir string
	// IdleRSS, if measured, is every gateway process's RSS before the
	// load.
	IdleRSS *report.IdleRSS
}

// Launcher starts a gateway with workers workers and returns it with a
// function that stops it.
type Launcher func(ctx context.Context, workers int) (Env, func() error, error)

// Config configures [Run].
type Config struct {
	// Workers are the worker counts to measure, in order.
	Workers []int
	// Conns is the number of client sessions of every stage.
	Conns int
	// Warmup and Duration are per stage.
	Warmup, Duration time.Duration
	// Tool is the federated tool called, with Args (a JSON object; nil
	// means {}).
	Tool string
	Args json.RawMessage
	// TagKey is the _meta key of the results that names the worker, or
	// "" to not count calls per worker.
	TagKey string
	// Protocol is the protocol version the sessions ask for.
	Protocol string
	// Target is the ratio to 1 worker that TargetWorkers workers should
	// reach; it decides the report's verdict, never an error.
	Target        float64
	TargetWorkers int
	// Edges and Routers describe the launched gateways; Upstream the
	// upstream behind them. For the report only.
	Edges, Routers int
	Upstream       string
	Launch         Launcher
	// Progress receives the progress line and one line per stage; nil for
	// none.
	Progress io.Writer
}

// Share is one worker's part of a stage's sessions and successful calls.
type Share struct {
	Worker string `json:"worker"`
	// Sessions is the number of client sessions whose last call the
	// worker ran: where placement put them.
	Sessions int `json:"sessions"`
	// Calls is the number of successful measured calls the worker ran,
	// Fraction their part of all of them.
	Calls    int     `json:"calls"`
	Fraction float64 `json:"fraction"`
}

// Point is the measurement at one worker count.
type Point struct {
	Workers int `json:"workers"`
	// Ratio is ReqPerSec divided by the baseline's (the point with the
	// fewest workers, normally 1); 0 when the baseline measured nothing.
	Ratio float64 `json:"ratio"`
	// Shares are the workers' parts of the sessions and calls, in worker
	// order, with a last entry "untagged" for results without a known tag
	// (omitted when there are none); nil without Config.TagKey.
	Shares []Share `json:"worker_shares,omitempty"`
	// LoadAvg is the machine's load average right after the stage.
	LoadAvg    string `json:"loadavg_after,omitempty"`
	GOGC       string `json:"gateway_gogc,omitempty"`
	GOMAXPROCS string `json:"gateway_gomaxprocs,omitempty"`
	LogDir     string `json:"gateway_logs,omitempty"`
	// IdleRSS is every gateway process's RSS before the load, if measured.
	IdleRSS *report.IdleRSS   `json:"idle_rss,omitempty"`
	Stage   sweep.StageResult `json:"stage"`
}

// Verdicts of a report.
const (
	Pass = "PASS"
	Miss = "MISS"
	NA   = "n/a" // the target's worker count or the 1-worker baseline was not measured
)

// Report is the outcome of [Run].
type Report struct {
	Start         time.Time       `json:"start"`
	Host          report.Host     `json:"host"`
	Protocol      string          `json:"protocol"`
	Conns         int             `json:"conns"`
	Warmup        time.Duration   `json:"warmup_ns"`
	Duration      time.Duration   `json:"duration_ns"`
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args,omitempty"`
	Edges         int             `json:"edges"`
	Routers       int             `json:"routers"`
	Upstream      string          `json:"upstream"`
	Target        float64         `json:"target_ratio"`
	TargetWorkers int             `json:"target_workers"`
	// BaselineWorkers is the worker count the ratios are relative to.
	BaselineWorkers int     `json:"baseline_workers"`
	Points          []Point `json:"points"`
	// Verdict is PASS when the ratio at TargetWorkers is at least Target,
	// MISS when it is not, NA when it cannot be told.
	Verdict string `json:"verdict"`
}

// Run measures every worker count in turn, starting and stopping a gateway
// for each. On error it returns the points measured so far with the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Report{
		Start: time.Now(), Host: report.HostInfo(), Protocol: cfg.Protocol, Conns: cfg.Conns,
		Warmup: cfg.Warmup, Duration: cfg.Duration, Tool: cfg.Tool, Args: cfg.Args,
		Edges: cfg.Edges, Routers: cfg.Routers, Upstream: cfg.Upstream,
		Target: cfg.Target, TargetWorkers: cfg.TargetWorkers,
	}
	for _, n := range cfg.Workers {
		p, err := cfg.point(ctx, n)
		if err != nil {
			r.Finish()
			return r, err
		}
		r.Points = append(r.Points, p)
		r.Finish()
		if cfg.Progress != nil {
			fmt.Fprintln(cfg.Progress, r.Points[len(r.Points)-1].Line())
		}
	}
	return r, nil
}

func (cfg *Config) validate() error {
	var errs []error
	if len(cfg.Workers) == 0 || slices.ContainsFunc(cfg.Workers, func(n int) bool { return n < 1 }) {
		errs = append(errs, fmt.Errorf("scale: need worker counts >= 1, got %v", cfg.Workers))
	}
	if cfg.Conns < 1 || cfg.Duration <= 0 || cfg.Warmup < 0 {
		errs = append(errs, fmt.Errorf("scale: need conns >= 1, duration > 0 and warmup >= 0, got %d, %v, %v", cfg.Conns, cfg.Duration, cfg.Warmup))
	}
	if cfg.Launch == nil {
		errs = append(errs, errors.New("scale: need a launcher"))
	}
	return errors.Join(errs...)
}

// point starts a gateway with n workers, measures it and stops it.
func (cfg *Config) point(ctx context.Context, n int) (p Point, err error) {
	env, stop, err := cfg.Launch(ctx, n)
	if err != nil {
		return p, fmt.Errorf("scale: start %d workers: %w", n, err)
	}
	defer func() { err = errors.Join(err, stop()) }()
	st := sweep.Stage{
		Method: sweep.MethodCall, Side: sweep.SideGateway, Shape: fmt.Sprintf("workers=%d", n),
		Conns: cfg.Conns, URL: env.URLs[0], Tool: cfg.Tool, Args: cfg.Args, TagKey: cfg.TagKey,
		Protocol: cfg.Protocol, Warmup: cfg.Warmup, Duration: cfg.Duration,
	}
	if len(env.URLs) > 1 {
		st.URLs = env.URLs
	}
	res, err := sweep.RunStage(ctx, st, sweep.Procs{Gateway: env.GatewayPIDs, Upstreams: env.UpstreamPIDs}, cfg.Progress)
	if err != nil {
		return p, err
	}
	p = Point{Workers: n, Stage: res, LoadAvg: report.LoadAvg(), GOGC: env.GOGC, GOMAXPROCS: env.GOMAXPROCS, LogDir: env.LogDir, IdleRSS: env.IdleRSS}
	if cfg.TagKey != "" {
		p.Shares = Shares(env.Workers, res.CallsByTag, res.ConnsByTag)
	}
	return p, nil
}

// Shares returns each worker's part of the calls and sessions counted by
// tag, in the order of workers, then an "untagged" entry for the calls and
// sessions whose tag is not a worker's, if any.
func Shares(workers []string, calls, sessions map[string]int) []Share {
	total := 0
	for _, c := range calls {
		total += c
	}
	frac := func(c int) float64 {
		if total == 0 {
			return 0
		}
		return float64(c) / float64(total)
	}
	out := make([]Share, 0, len(workers)+1)
	known := map[string]bool{}
	for _, w := range workers {
		known[w] = true
		out = append(out, Share{Worker: w, Sessions: sessions[w], Calls: calls[w], Fraction: frac(calls[w])})
	}
	other := Share{Worker: "untagged"}
	for t, c := range calls {
		if !known[t] {
			other.Calls += c
		}
	}
	for t, c := range sessions {
		if !known[t] {
			other.Sessions += c
		}
	}
	if other.Calls > 0 || other.Sessions > 0 {
		other.Fraction = frac(other.Calls)
		out = append(out, other)
	}
	return out
}

// Finish recomputes the ratios, BaselineWorkers and the verdict from the
// points; Run calls it after every point.
func (r *Report) Finish() {
	r.Verdict = NA
	if len(r.Points) == 0 {
		return
	}
	base := slices.MinFunc(r.Points, func(a, b Point) int { return cmp.Compare(a.Workers, b.Workers) })
	r.BaselineWorkers = base.Workers
	for i := range r.Points {
		p := &r.Points[i]
		p.Ratio = 0
		if base.Stage.ReqPerSec > 0 {
			p.Ratio = p.Stage.ReqPerSec / base.Stage.ReqPerSec
		}
	}
	if base.Workers != 1 || base.Stage.ReqPerSec == 0 {
		return
	}
	for _, p := range r.Points {
		if p.Workers == r.TargetWorkers {
			r.Verdict = Miss
			if p.Ratio >= r.Target {
				r.Verdict = Pass
			}
		}
	}
}

// Line returns a one-line summary of the point for the console.
func (p *Point) Line() string {
	s := fmt.Sprintf("workers=%d  %8.0f req/s  ratio %.2f  p50 %v  p99 %v  errors %d",
		p.Workers, p.Stage.ReqPerSec, p.Ratio, p.Stage.Latency.P50.Round(time.Microsecond), p.Stage.Latency.P99.Round(time.Microsecond), p.Stage.Errors)
	s += "  CPU µs/call gw/upstream/driver " + cpus(&p.Stage)
	if len(p.Shares) > 0 {
		s += "  shares " + sharesText(p.Shares)
	}
	if p.LoadAvg != "" {
		s += "  load " + p.LoadAvg
	}
	if p.Stage.FirstError != "" {
		s += "  first error: " + p.Stage.FirstError
	}
	return s
}
