package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// Endpoint is one side of a comparison.
type Endpoint struct {
	// URL is the streamable HTTP MCP endpoint.
	URL string `json:"url"`
	// URLs, when not empty, are several endpoints of the same side (the
	// edges of a cluster) over which connections are spread round robin;
	// URL is then ignored.
	URLs []string `json:"urls,omitempty"`
	// Tool is the tool tools/call stages call there.
	Tool string `json:"tool"`
}

// set reports whether e names an endpoint.
func (e Endpoint) set() bool { return e.URL != "" || len(e.URLs) > 0 }

// Env is the endpoints to compare and the processes behind them: Direct
// and Gateway, and optionally Proxy, the direct upstream through a bare
// reverse proxy (unset: no proxy side).
type Env struct {
	Direct, Proxy, Gateway Endpoint
	Procs                  Procs
}

// Shape is a federation shape: Upstreams fixture upstreams with Tools extra
// tools each.
type Shape struct {
	Upstreams int `json:"upstreams"`
	Tools     int `json:"tools"`
}

// String formats s as "UxT".
func (s Shape) String() string { return fmt.Sprintf("%dx%d", s.Upstreams, s.Tools) }

// ParseShapes parses a comma-separated list of "UxT" shapes; "" and "none"
// give none.
func ParseShapes(s string) ([]Shape, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []Shape
	for _, f := range strings.Split(s, ",") {
		u, t, ok := strings.Cut(strings.TrimSpace(f), "x")
		nu, err1 := strconv.Atoi(u)
		nt, err2 := strconv.Atoi(t)
		if !ok || err1 != nil || err2 != nil || nu < 1 || nt < 0 {
			return nil, fmt.Errorf("bad federation shape %q: want UPSTREAMSxTOOLS, e.g. 5x20", f)
		}
		out = append(out, Shape{Upstreams: nu, Tools: nt})
	}
	return out, nil
}

// ParseConns parses a comma-separated list of positive connection counts.
func ParseConns(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad connection count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Launcher starts the environment of one federation shape and returns it
// with a function that stops it.
type Launcher func(ctx context.Context, s Shape) (Env, func() error, error)

// ProxyStarter starts a bare reverse proxy in front of the MCP endpoint
// upstream and returns the proxy's MCP endpoint, its process ids (for its
// CPU; nil if unknown) and a function that stops it. On error nothing is
// left running.
type ProxyStarter func(ctx context.Context, upstream string) (url string, pids []int, stop func() error, err error)

// Config configures [Run].
type Config struct {
	// Env is measured with every method in Methods. If its gateway URL is
	// empty, Run starts it with Launch(Shape{1, 0}) and stops it before
	// the federation shapes. Its proxy side, if any, is measured with
	// Methods only: a federation shape's gateway lists other tools than
	// its direct upstream, and so would a proxy in front of it.
	Env Env
	// StartProxy, when not nil and Env has no proxy side, starts a proxy
	// in front of Env's direct upstream (the one Launch started) for the
	// methods' stages, and Run stops it after them.
	StartProxy ProxyStarter
	// Methods are MethodCall and/or MethodList.
	Methods []string
	// Shapes are federation shapes, each measured with tools/list in an
	// environment started by Launch.
	Shapes []Shape
	Launch Launcher
	// Conns are the connection counts of the stages.
	Conns []int
	// Warmup and Duration are per stage.
	Warmup, Duration time.Duration
	// Rounds is 1 to measure each direct stage, then its proxy stage (if
	// any), then its gateway stage; above 1, the stages of a connection
	// count are measured in Rounds interleaved rounds (see
	// [StageResult.Rounds]) of Duration/Rounds per side, each slice
	// preceded by the warmup, and retention is the median of the
	// per-round ratios. Slices shorter than 100ms are refused.
	Rounds int
	// Args are tools/call's arguments, a JSON object; nil means {}.
	Args json.RawMessage
	// Protocol is the protocol version the sessions ask for.
	Protocol string
	// Mode labels the report.
	Mode string
	// Progress receives the progress line and one summary line per stage;
	// nil for none.
	Progress io.Writer
}

// Report is the outcome of [Run].
type Report struct {
	Mode     string        `json:"mode"`
	Protocol string        `json:"protocol"`
	Start    time.Time     `json:"start"`
	Host     report.Host   `json:"host"`
	Conns    []int         `json:"conns"`
	Warmup   time.Duration `json:"warmup_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Rounds is Config.Rounds when above 1.
	Rounds int             `json:"rounds,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	// GOGC is the gateway's GOGC when the driver started it.
	GOGC string `json:"gateway_gogc,omitempty"`
	// GOMAXPROCS is every gateway process's GOMAXPROCS when the driver
	// started them.
	GOMAXPROCS string `json:"gateway_gomaxprocs,omitempty"`
	// Topology is the cluster's shape when the driver started one.
	Topology *report.Topology `json:"topology,omitempty"`
	Stages   []StageResult    `json:"stages"`
}

// Run measures every method, then every federation shape, at each
// connection count: a direct stage, then a proxy stage when there is a
// proxy side, then a gateway stage (or these in interleaved rounds). On
// error it returns the stages measured so far with the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Report{
		Mode: cfg.Mode, Protocol: cfg.Protocol, Start: time.Now(), Host: report.HostInfo(),
		Conns: cfg.Conns, Warmup: cfg.Warmup, Duration: cfg.Duration, Args: cfg.Args,
	}
	if cfg.Rounds > 1 {
		r.Rounds = cfg.Rounds
	}
	if err := cfg.methods(ctx, r); err != nil {
		return r, err
	}
	for _, s := range cfg.Shapes {
		if err := cfg.federation(ctx, r, s); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (cfg *Config) validate() error {
	var errs []error
	for _, m := range cfg.Methods {
		if m != MethodCall && m != MethodList {
			errs = append(errs, fmt.Errorf("unknown method %q (want %s or %s)", m, MethodCall, MethodList))
		}
	}
	if len(cfg.Conns) == 0 || slices.ContainsFunc(cfg.Conns, func(n int) bool { return n < 1 }) {
		errs = append(errs, fmt.Errorf("need connection counts >= 1, got %v", cfg.Conns))
	}
	if cfg.Duration <= 0 || cfg.Warmup < 0 {
		errs = append(errs, fmt.Errorf("need duration > 0 and warmup >= 0, got %v and %v", cfg.Duration, cfg.Warmup))
	}
	if err := cfg.validateRounds(); err != nil {
		errs = append(errs, err)
	}
	if cfg.Launch == nil && (len(cfg.Shapes) > 0 || len(cfg.Methods) > 0 && !cfg.Env.Gateway.set()) {
		errs = append(errs, errors.New("federation shapes, and methods without an environment, need a launcher"))
	}
	return errors.Join(errs...)
}

// validateRounds refuses fewer than one round, and so many that a slice
// would be shorter than minSlice.
func (cfg *Config) validateRounds() error {
	if cfg.Rounds < 1 {
		return fmt.Errorf("need rounds >= 1, got %d", cfg.Rounds)
	}
	if slice := cfg.Duration / time.Duration(cfg.Rounds); cfg.Rounds > 1 && slice < minSlice {
		return fmt.Errorf("%d rounds of a %v duration make %v slices; need slices of at least %v (fewer rounds or a longer duration)",
			cfg.Rounds, cfg.Duration, slice, minSlice)
	}
	return nil
}

// methods measures every method in Env, starting it (and the proxy)
// first if needed.
func (cfg *Config) methods(ctx context.Context, r *Report) (err error) {
	if len(cfg.Methods) == 0 {
		return nil
	}
	env := cfg.Env
	if !env.Gateway.set() {
		var stop func() error
		if env, stop, err = cfg.Launch(ctx, Shape{Upstreams: 1}); err != nil {
			return fmt.Errorf("sweep: start: %w", err)
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	if cfg.StartProxy != nil && !env.Proxy.set() {
		stop, perr := cfg.startProxy(ctx, &env)
		if perr != nil {
			return perr
		}
		// Deferred after the environment's stop, so run before it: the
		// proxy stops first, while its upstream is still up.
		defer func() { err = errors.Join(err, stop()) }()
	}
	for _, m := range cfg.Methods {
		if err := cfg.compare(ctx, r, env, m, ""); err != nil {
			return err
		}
	}
	return nil
}

// startProxy starts the proxy in front of env's direct upstream, adds it
// to env as its proxy side and returns the function that stops it.
func (cfg *Config) startProxy(ctx context.Context, env *Env) (func() error, error) {
	url, pids, stop, err := cfg.StartProxy(ctx, env.Direct.URL)
	if err != nil {
		return nil, fmt.Errorf("sweep: start proxy: %w", err)
	}
	env.Proxy = Endpoint{URL: url, Tool: env.Direct.Tool} // the proxy passes names through
	env.Procs.Proxy = pids
	return stop, nil
}

// federation starts shape s, measures tools/list in it and stops it.
func (cfg *Config) federation(ctx context.Context, r *Report, s Shape) (err error) {
	env, stop, err := cfg.Launch(ctx, s)
	if err != nil {
		return fmt.Errorf("sweep: start federation %s: %w", s, err)
	}
	defer func() { err = errors.Join(err, stop()) }()
	env.Proxy, env.Procs.Proxy = Endpoint{}, nil // see Config.Env
	return cfg.compare(ctx, r, env, MethodList, s.String())
}

// compare measures a direct, a proxy (when env has one) and a gateway
// stage of method at each connection count, one after the other or in
// interleaved rounds, appending the results to r.
func (cfg *Config) compare(ctx context.Context, r *Report, env Env, method, shape string) error {
	for _, n := range cfg.Conns {
		sts := []Stage{cfg.stage(env.Direct, SideDirect, method, shape, n)}
		if env.Proxy.set() {
			sts = append(sts, cfg.stage(env.Proxy, SideProxy, method, shape, n))
		}
		sts = append(sts, cfg.stage(env.Gateway, SideGateway, method, shape, n))
		run := cfg.sequential
		if cfg.Rounds > 1 {
			run = cfg.interleaved
		}
		if err := run(ctx, r, sts, env.Procs); err != nil {
			return err
		}
	}
	return nil
}

// stage describes the stage of method on side's endpoint ep.
func (cfg *Config) stage(ep Endpoint, side, method, shape string, conns int) Stage {
	st := Stage{
		Method: method, Side: side, Shape: shape, Conns: conns, URL: ep.URL, URLs: ep.URLs, Protocol: cfg.Protocol,
		Warmup: cfg.Warmup, Duration: cfg.Duration,
	}
	if method == MethodCall {
		st.Tool, st.Args = ep.Tool, cfg.Args
	}
	return st
}

// sequential runs stages sts one after the other, each with its own
// sessions, appending each result to r (and printing its summary) as it
// ends.
func (cfg *Config) sequential(ctx context.Context, r *Report, sts []Stage, procs Procs) error {
	for _, st := range sts {
		res, err := RunStage(ctx, st, procs, cfg.Progress)
		if err != nil {
			return err
		}
		cfg.add(r, res)
	}
	return nil
}

// interleaved runs stages sts (direct first) in cfg.Rounds interleaved
// rounds, appending every result to r once all rounds have run.
func (cfg *Config) interleaved(ctx context.Context, r *Report, sts []Stage, procs Procs) error {
	res, err := interleave(ctx, sts, cfg.Rounds, procs, cfg.Progress)
	if err != nil {
		return err
	}
	for _, s := range res {
		cfg.add(r, s)
	}
	return nil
}

// add appends res to r and prints its summary.
func (cfg *Config) add(r *Report, res StageResult) {
	r.Stages = append(r.Stages, res)
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress, res.Line())
	}
}

// Line returns a one-line summary of the stage for the console.
func (res *StageResult) Line() string {
	s := fmt.Sprintf("%s %8.0f req/s  p50 %s  p99 %s  errors %d", stageLabel(res.Stage, ""), res.ReqPerSec,
		fmtMicros(float64(res.Latency.P50.Microseconds())), fmtMicros(float64(res.Latency.P99.Microseconds())), res.Errors)
	if v := res.GatewayCPUPerCall; v != nil {
		s += fmt.Sprintf("  gw CPU %.0fµs/req", *v)
	}
	if v := res.ProxyCPUPerCall; v != nil {
		s += fmt.Sprintf("  proxy CPU %.0fµs/req", *v)
	}
	if v := res.UpstreamCPUPerCall; v != nil {
		s += fmt.Sprintf("  upstream CPU %.0fµs/req", *v)
	}
	if len(res.RoundRetention) > 0 {
		s += "  retention " + fmtRetention(res.Retention, res.RetentionMin, res.RetentionMax)
	}
	if res.FirstError != "" {
		s += "  first error: " + res.FirstError
	}
	return s
}
