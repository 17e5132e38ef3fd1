// Package latency implements the latency gate: the same tools/call measured
// directly against an upstream and through Switchyard, interleaved call by
// call on one session per side, so that both sides see the same machine
// state and the difference is what the gateway adds.
//
// With [Config.Proxy], a third side calls the same upstream through a
// minimal reverse proxy (a separate process, see package proxy): its
// added latency is the floor any gateway process adds on the machine, and
// the gateway's latency over the proxy's is what Switchyard adds above
// that floor.
//
// With [Config.Hops], the gateway side asks for per-hop timing stamps on
// every call and the result attributes the gateway's latency to the hops
// of the path (see package hops).
package latency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/hops"
	"github.com/switchyard-mcp/switchyard/bench/internal/proccpu"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// MaxErrorRate is the fraction of failed measured calls, per side, above
// which a run fails.
const MaxErrorRate = 0.01

// maxPrintedErrors bounds the call errors written to Config.Log per side.
const maxPrintedErrors = 20

// Target is one side of the comparison.
type Target struct {
	// URL is the streamable HTTP MCP endpoint.
	URL string `json:"url"`
	// URLs, when not empty, are several endpoints of the same target (the
	// edges of a cluster): one session is opened to each and the calls
	// rotate over them. URL is then ignored.
	URLs []string `json:"urls,omitempty"`
	// Tool is the tool called there.
	Tool string `json:"tool"`
}

// endpoints returns the URLs the target's sessions connect to.
func (t Target) endpoints() []string {
	if len(t.URLs) > 0 {
		return t.URLs
	}
	return []string{t.URL}
}

// Config configures [Run].
type Config struct {
	// Direct is the upstream itself, Gateway the same upstream through
	// Switchyard (Tool is then its federated name).
	Direct, Gateway Target
	// Proxy, when not nil, is the same upstream through a minimal reverse
	// proxy (Tool is the direct tool name): a third side, measured like
	// the other two. Nil means two sides.
	Proxy *Target
	// Args is the JSON object passed as the tool's arguments; nil means {}.
	Args json.RawMessage
	// Warmup calls per side are made first and discarded; N calls per side
	// are measured. N must be positive.
	Warmup, N int
	// Protocol is the protocol version both sessions ask for.
	Protocol string
	// Mode labels the result (how the gateway was deployed).
	Mode string
	// GatewayPIDs, when not empty, are the gateway's process ids: their
	// summed CPU time over the measured calls is reported.
	GatewayPIDs []int
	// Hops makes every gateway call ask for per-hop timing stamps
	// (_meta {"dev.switchyard/timing": true}); the result then attributes
	// the gateway's latency to the hops of the path.
	Hops bool
	// Log receives call errors as they happen; nil discards them.
	Log io.Writer
}

// Side holds the measurements of one side.
type Side struct {
	Target
	// Protocol is the version the session negotiated.
	Protocol string `json:"negotiated_protocol"`
	// Summary summarizes the successful measured calls.
	Summary stats.Summary `json:"summary"`
	// Errors counts failed measured calls; WarmupErrors failed warmup calls.
	Errors       int `json:"errors"`
	WarmupErrors int `json:"warmup_errors"`
	// Samples are the successful measured call latencies in call order.
	Samples []time.Duration `json:"samples_ns"`
}

// Result is the outcome of one [Run]. Durations are nanoseconds in JSON.
type Result struct {
	Mode     string          `json:"mode"`
	Protocol string          `json:"protocol"`
	N        int             `json:"n"`
	Warmup   int             `json:"warmup"`
	Args     json.RawMessage `json:"args"`
	Start    time.Time       `json:"start"`
	Elapsed  time.Duration   `json:"elapsed_ns"`
	Host     report.Host     `json:"host"`
	// GOGC is the gateway's GOGC when the driver started it (set by the
	// caller).
	GOGC string `json:"gateway_gogc,omitempty"`
	// GOMAXPROCS is every gateway process's GOMAXPROCS (and the bare
	// proxy's) when the driver started them (set by the caller).
	GOMAXPROCS string `json:"gateway_gomaxprocs,omitempty"`
	// Topology is the cluster's shape when the driver started one (set by
	// the caller).
	Topology *report.Topology `json:"topology,omitempty"`
	// GatewayLogs is the directory of the cluster's configuration and
	// logs (set by the caller).
	GatewayLogs string `json:"gateway_logs,omitempty"`
	Direct      Side   `json:"direct"`
	Gateway     Side   `json:"gateway"`
	// Proxy is the side through the minimal reverse proxy; nil unless
	// Config.Proxy was set.
	Proxy *Side `json:"proxy,omitempty"`
	// AddedP50 and AddedP99 are the gateway's percentile minus the direct
	// one (negative if the gateway side was faster).
	AddedP50 time.Duration `json:"added_p50_ns"`
	AddedP99 time.Duration `json:"added_p99_ns"`
	// ProxyAddedP50 is the proxy's p50 minus the direct one (the floor a
	// gateway process adds), OverProxyP50 the gateway's p50 minus the
	// proxy's (what Switchyard adds above that floor); both zero when
	// Proxy is nil.
	ProxyAddedP50 time.Duration `json:"proxy_added_p50_ns,omitempty"`
	OverProxyP50  time.Duration `json:"added_over_proxy_p50_ns,omitempty"`
	// GatewayCPUPerCall is the gateway processes' CPU time per measured
	// call in microseconds; nil when Config.GatewayPIDs was empty or
	// unreadable.
	GatewayCPUPerCall *float64 `json:"gw_cpu_us_per_call,omitempty"`
	// Hops is the per-hop attribution of the gateway's successful measured
	// calls; nil unless Config.Hops.
	Hops *hops.Summary `json:"hops,omitempty"`
	// IdleRSS is every gateway process's resident set size while idle,
	// before the calls, when the driver started a cluster (set by the
	// caller).
	IdleRSS *report.IdleRSS `json:"idle_rss,omitempty"`
}

// Run measures cfg.Warmup+cfg.N calls per side, rotating which side goes
// first on each iteration (i mod the number of sides), so that no side is
// always first. It fails only if a session cannot be opened or ctx ends;
// call errors are counted in the result (see [Result.Check]).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.N <= 0 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("latency: need n > 0 and warmup >= 0, got n=%d warmup=%d", cfg.N, cfg.Warmup)
	}
	sides, err := openSides(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer sides.close()

	r := &Result{
		Mode: cfg.Mode, Protocol: cfg.Protocol, N: cfg.N, Warmup: cfg.Warmup, Args: cfg.Args,
		Start: time.Now(), Host: report.HostInfo(),
	}
	var cpu cpuSpan
	order := sides.order()
	for i := range cfg.Warmup + cfg.N {
		if i == cfg.Warmup {
			cpu.begin(cfg.GatewayPIDs)
		}
		measured := i >= cfg.Warmup
		for j := range order {
			order[(i+j)%len(order)].call(ctx, measured)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("latency: interrupted after %d iterations: %w", i, err)
		}
	}
	r.GatewayCPUPerCall = cpu.end(cfg.N)
	r.Elapsed = time.Since(r.Start)
	sides.fill(r)
	return r, nil
}

// sides are the runners of one run; proxy is nil without Config.Proxy.
type sides struct {
	direct, gateway, proxy *runner
}

// openSides opens the sessions of every side cfg names. On error none is
// left open.
func openSides(ctx context.Context, cfg Config) (_ *sides, err error) {
	s := &sides{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.direct, err = newRunner(ctx, "direct", cfg.Direct, cfg, false); err != nil {
		return nil, err
	}
	if s.gateway, err = newRunner(ctx, "gateway", cfg.Gateway, cfg, cfg.Hops); err != nil {
		return nil, err
	}
	if cfg.Proxy != nil {
		if s.proxy, err = newRunner(ctx, "proxy", *cfg.Proxy, cfg, false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// order returns the runners in their order on the first iteration:
// direct, then the proxy if any, then the gateway.
func (s *sides) order() []*runner {
	if s.proxy == nil {
		return []*runner{s.direct, s.gateway}
	}
	return []*runner{s.direct, s.proxy, s.gateway}
}

// fill sets r's sides and the differences between them.
func (s *sides) fill(r *Result) {
	r.Direct, r.Gateway = s.direct.side(), s.gateway.side()
	r.AddedP50 = r.Gateway.Summary.P50 - r.Direct.Summary.P50
	r.AddedP99 = r.Gateway.Summary.P99 - r.Direct.Summary.P99
	if s.proxy != nil {
		p := s.proxy.side()
		r.Proxy = &p
		r.ProxyAddedP50 = p.Summary.P50 - r.Direct.Summary.P50
		r.OverProxyP50 = r.Gateway.Summary.P50 - p.Summary.P50
	}
	if s.gateway.hops != nil {
		h := s.gateway.hops.Summary()
		r.Hops = &h
	}
}

// close closes every opened side's sessions.
func (s *sides) close() {
	for _, r := range []*runner{s.direct, s.gateway, s.proxy} {
		if r != nil {
			r.close()
		}
	}
}

// runner measures one side.
type runner struct {
	name     string
	target   Target
	sessions []*session.Session
	ops      []session.Op // one per session; calls rotate over them
	next     int
	samples  []time.Duration
	errs     int
	warmErr  int
	printed  int
	log      io.Writer
	hops     *hops.Collector     // nil unless traced
	last     *mcp.CallToolResult // the last call's result, if it succeeded
}

// newRunner opens a session to each of t's endpoints. With traced, every
// call asks for per-hop stamps and the measured ones are collected.
func newRunner(ctx context.Context, name string, t Target, cfg Config, traced bool) (*runner, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	r := &runner{name: name, target: t, log: log, samples: make([]time.Duration, 0, cfg.N)}
	var o session.CallOptions
	if traced {
		r.hops = hops.NewCollector(cfg.N)
		o.Meta = hops.RequestMeta()
		o.Result = func(res *mcp.CallToolResult) { r.last = res }
	}
	for _, url := range t.endpoints() {
		s, err := session.Dial(ctx, url, cfg.Protocol)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("latency: %s: %w", name, err)
		}
		r.sessions = append(r.sessions, s)
		r.ops = append(r.ops, session.CallToolWith(s.ClientSession, t.Tool, cfg.Args, o))
	}
	return r, nil
}

// call makes one timed call on the next session, recording it if
// measured.
func (r *runner) call(ctx context.Context, measured bool) {
	op := r.ops[r.next%len(r.ops)]
	r.next++
	r.last = nil
	start := time.Now()
	err := op(ctx)
	d := time.Since(start)
	switch {
	case err != nil && measured:
		r.errs++
		r.report(err)
	case err != nil:
		r.warmErr++
		r.report(err)
	case measured:
		r.samples = append(r.samples, d)
		if r.hops != nil {
			var meta mcp.Meta
			if r.last != nil {
				meta = r.last.Meta
			}
			r.hops.Add(meta, d)
		}
	}
}

func (r *runner) report(err error) {
	r.printed++
	switch {
	case r.printed <= maxPrintedErrors:
		fmt.Fprintf(r.log, "%s: call %s: %v\n", r.name, r.target.Tool, err)
	case r.printed == maxPrintedErrors+1:
		fmt.Fprintf(r.log, "%s: further errors are counted, not printed\n", r.name)
	}
}

func (r *runner) side() Side {
	return Side{
		Target: r.target, Protocol: r.sessions[0].Protocol(),
		Summary: stats.Summarize(slices.Clone(r.samples)),
		Errors:  r.errs, WarmupErrors: r.warmErr, Samples: r.samples,
	}
}

func (r *runner) close() {
	for _, s := range r.sessions {
		_ = s.Close()
	}
}

// cpuSpan measures the summed CPU time of processes between begin and end.
type cpuSpan struct {
	pids  []int
	start time.Duration
	ok    bool
}

func (c *cpuSpan) begin(pids []int) {
	if len(pids) == 0 {
		return
	}
	c.pids = pids
	c.start, c.ok = readAll(pids)
}

// end returns the CPU time per call in microseconds, or nil if unknown.
func (c *cpuSpan) end(calls int) *float64 {
	if !c.ok || calls == 0 {
		return nil
	}
	now, ok := readAll(c.pids)
	if !ok {
		return nil
	}
	v := float64(now-c.start) / float64(time.Microsecond) / float64(calls)
	return &v
}

// readAll returns the summed CPU time of pids, and whether every read
// succeeded.
func readAll(pids []int) (time.Duration, bool) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := proccpu.Read(pid)
		if err != nil {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// Check returns nil if r passes the gate: at most [MaxErrorRate] failed
// calls per side (the proxy's too, when it ran), every side on the same
// protocol version, and (when maxAddedP50 > 0) an added p50 (gateway
// minus direct; the proxy plays no part in it) of at most maxAddedP50.
// The added p50 is compared in whole microseconds, truncated as
// [Result.BenchLine] prints it ([Result.AddedP50Micros]), so that the
// verdict agrees with the printed number. Otherwise it returns every
// failure, joined.
func (r *Result) Check(maxAddedP50 time.Duration) error {
	var errs []error
	for _, s := range r.namedSides() {
		if float64(s.side.Errors) > MaxErrorRate*float64(r.N) {
			errs = append(errs, fmt.Errorf("%s: %d of %d calls failed (more than %g%%)", s.name, s.side.Errors, r.N, MaxErrorRate*100))
		}
	}
	if r.Direct.Protocol != r.Gateway.Protocol {
		errs = append(errs, fmt.Errorf("sides negotiated different protocols: direct %q, gateway %q", r.Direct.Protocol, r.Gateway.Protocol))
	}
	if r.Proxy != nil && r.Proxy.Protocol != r.Direct.Protocol {
		errs = append(errs, fmt.Errorf("sides negotiated different protocols: direct %q, proxy %q", r.Direct.Protocol, r.Proxy.Protocol))
	}
	if maxAddedP50 > 0 && time.Duration(r.AddedP50Micros())*time.Microsecond > maxAddedP50 {
		errs = append(errs, fmt.Errorf("added p50 %dµs exceeds the limit %v", r.AddedP50Micros(), maxAddedP50))
	}
	return errors.Join(errs...)
}

// AddedP50Micros returns the added p50 in whole microseconds, truncated
// toward zero: the added_p50_us of [Result.BenchLine], which the gate's
// messages print too.
func (r *Result) AddedP50Micros() int64 { return r.AddedP50.Microseconds() }

// namedSide is a side of a result with its name.
type namedSide struct {
	name string
	side *Side
}

// namedSides returns r's sides in report order: direct, the proxy if it
// ran, gateway.
func (r *Result) namedSides() []namedSide {
	s := []namedSide{{"direct", &r.Direct}}
	if r.Proxy != nil {
		s = append(s, namedSide{"proxy", r.Proxy})
	}
	return append(s, namedSide{"gateway", &r.Gateway})
}
