// Package latency implements the latency gate: the same tools/call measured
// directly against an upstream and through Switchyard, interleaved call by
// call on one session per side, so that both sides see the same machine
// state and the difference is what the gateway adds.
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
	// Topology is the cluster's shape when the driver started one (set by
	// the caller).
	Topology *report.Topology `json:"topology,omitempty"`
	// GatewayLogs is the directory of the cluster's configuration and
	// logs (set by the caller).
	GatewayLogs string `json:"gateway_logs,omitempty"`
	Direct      Side   `json:"direct"`
	Gateway     Side   `json:"gateway"`
	// AddedP50 and AddedP99 are the gateway's percentile minus the direct
	// one (negative if the gateway side was faster).
	AddedP50 time.Duration `json:"added_p50_ns"`
	AddedP99 time.Duration `json:"added_p99_ns"`
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

// Run measures cfg.Warmup+cfg.N calls per side, alternating which side goes
// first on each iteration. It fails only if a session cannot be opened or
// ctx ends; call errors are counted in the result (see [Result.Check]).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.N <= 0 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("latency: need n > 0 and warmup >= 0, got n=%d warmup=%d", cfg.N, cfg.Warmup)
	}
	direct, err := newRunner(ctx, "direct", cfg.Direct, cfg, false)
	if err != nil {
		return nil, err
	}
	defer direct.close()
	gw, err := newRunner(ctx, "gateway", cfg.Gateway, cfg, cfg.Hops)
	if err != nil {
		return nil, err
	}
	defer gw.close()

	r := &Result{
		Mode: cfg.Mode, Protocol: cfg.Protocol, N: cfg.N, Warmup: cfg.Warmup, Args: cfg.Args,
		Start: time.Now(), Host: report.HostInfo(),
	}
	var cpu cpuSpan
	for i := range cfg.Warmup + cfg.N {
		if i == cfg.Warmup {
			cpu.begin(cfg.GatewayPIDs)
		}
		first, second := direct, gw
		if i%2 == 1 {
			first, second = gw, direct
		}
		measured := i >= cfg.Warmup
		first.call(ctx, measured)
		second.call(ctx, measured)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("latency: interrupted after %d iterations: %w", i, err)
		}
	}
	r.GatewayCPUPerCall = cpu.end(cfg.N)
	r.Elapsed = time.Since(r.Start)
	r.Direct, r.Gateway = direct.side(), gw.side()
	r.AddedP50 = r.Gateway.Summary.P50 - r.Direct.Summary.P50
	r.AddedP99 = r.Gateway.Summary.P99 - r.Direct.Summary.P99
	if gw.hops != nil {
		h := gw.hops.Summary()
		r.Hops = &h
	}
	return r, nil
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
// calls per side, both sides on the same protocol version, and (when
// maxAddedP50 > 0) an added p50 of at most maxAddedP50. Otherwise it
// returns every failure, joined.
func (r *Result) Check(maxAddedP50 time.Duration) error {
	var errs []error
	for _, s := range []struct {
		name string
		side *Side
	}{{"direct", &r.Direct}, {"gateway", &r.Gateway}} {
		if float64(s.side.Errors) > MaxErrorRate*float64(r.N) {
			errs = append(errs, fmt.Errorf("%s: %d of %d calls failed (more than %g%%)", s.name, s.side.Errors, r.N, MaxErrorRate*100))
		}
	}
	if r.Direct.Protocol != r.Gateway.Protocol {
		errs = append(errs, fmt.Errorf("sides negotiated different protocols: direct %q, gateway %q", r.Direct.Protocol, r.Gateway.Protocol))
	}
	if maxAddedP50 > 0 && r.AddedP50 > maxAddedP50 {
		errs = append(errs, fmt.Errorf("added p50 %v exceeds the limit %v", r.AddedP50.Round(time.Microsecond), maxAddedP50))
	}
	return errors.Join(errs...)
}
