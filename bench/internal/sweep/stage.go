package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// Methods the sweep can measure.
const (
	MethodCall = "tools/call"
	MethodList = "tools/list"
)

// Sides of a comparison. The proxy side is optional: the direct upstream
// through a bare reverse proxy process, the floor any gateway pays.
const (
	SideDirect  = "direct"
	SideProxy   = "proxy"
	SideGateway = "gateway"
)

const (
	// stopGrace is how long calls still running at the end of a stage may
	// take before they are cancelled (and counted as errors).
	stopGrace = 30 * time.Second
	// dialParallel bounds the sessions opened or closed at once.
	dialParallel = 16
	// rateBudget sizes the per-connection latency slices: they hold twice
	// the samples of a stage running at this many requests per second in
	// total; past that they grow.
	rateBudget = 50_000
)

// Stage is one measurement: Conns sessions to URL (or spread round robin
// over URLs) running Method for Warmup (discarded) and then Duration.
type Stage struct {
	Method string `json:"method"`
	Side   string `json:"side"`
	// Shape is the federation shape ("5x20"); empty in the plain sweep.
	Shape string `json:"shape,omitempty"`
	Conns int    `json:"conns"`
	URL   string `json:"url"`
	// URLs, when not empty, are several endpoints of the same side (the
	// edges of a cluster): connection i goes to URLs[i mod len(URLs)] and
	// URL is ignored.
	URLs []string `json:"urls,omitempty"`
	Tool string   `json:"tool,omitempty"`
	// TagKey, when not empty, makes a tools/call stage count its
	// successful measured calls by the string value of this key in the
	// result's _meta (see StageResult.CallsByTag).
	TagKey   string          `json:"tag_key,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Protocol string          `json:"protocol"`
	Warmup   time.Duration   `json:"warmup_ns"`
	Duration time.Duration   `json:"duration_ns"`
}

// ConnURL returns the endpoint of connection i.
func (st *Stage) ConnURL(i int) string {
	if len(st.URLs) > 0 {
		return session.Spread(st.URLs, i)
	}
	return st.URL
}

// Procs are the process ids whose CPU time a stage reports, each group
// summed; empty means unknown. Gateway is read on gateway stages only,
// Proxy on proxy stages only, Upstreams on every stage.
type Procs struct {
	// Gateway is every gateway process (all of a cluster's, NATS
	// included).
	Gateway []int
	// Proxy is the bare reverse proxy's process.
	Proxy     []int
	Upstreams []int
}

// StageResult is the outcome of one stage. CPU figures are microseconds
// of CPU time per successful measured request, nil when unknown.
type StageResult struct {
	Stage
	// NegotiatedProtocol is what the first session negotiated.
	NegotiatedProtocol string `json:"negotiated_protocol"`
	// Requests counts the successful requests that completed in the
	// measured window, Errors the failed ones; FirstError is the first
	// failure's text.
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// CallsByTag counts the successful measured calls by the value of
	// Stage.TagKey in their result's _meta ("" when absent); nil without
	// a TagKey.
	CallsByTag map[string]int `json:"calls_by_tag,omitempty"`
	// ConnsByTag counts the connections by the tag of their last
	// successful call ("" when none): where the sessions were placed.
	ConnsByTag map[string]int `json:"conns_by_tag,omitempty"`
	// ReqPerSec is Requests divided by the window's length.
	ReqPerSec float64       `json:"req_per_sec"`
	Latency   stats.Summary `json:"latency"`

	// GatewayCPUPerCall is the gateway processes' CPU, set on gateway
	// stages only; ProxyCPUPerCall the proxy process's, on proxy stages
	// only.
	GatewayCPUPerCall  *float64 `json:"gw_cpu_us_per_call,omitempty"`
	ProxyCPUPerCall    *float64 `json:"proxy_cpu_us_per_call,omitempty"`
	UpstreamCPUPerCall *float64 `json:"upstream_cpu_us_per_call,omitempty"`
	DriverCPUPerCall   *float64 `json:"driver_cpu_us_per_call,omitempty"`

	// Rounds, when above 1, is the number of slices this side's measured
	// time was cut into, alternating with the other sides' (absent means
	// one stage after the other); RoundRequests are the successful
	// requests of each slice, in order. The fields above cover all slices.
	Rounds        int   `json:"rounds,omitempty"`
	RoundRequests []int `json:"round_requests,omitempty"`
	// On a gateway or proxy stage of interleaved rounds: RoundRetention[i]
	// is its slice i's req/s over that of the direct slice of the same
	// round, Retention their median, RetentionMin and RetentionMax the
	// extremes.
	RoundRetention []float64 `json:"round_retention,omitempty"`
	Retention      float64   `json:"retention,omitempty"`
	RetentionMin   float64   `json:"retention_min,omitempty"`
	RetentionMax   float64   `json:"retention_max,omitempty"`
}

// RunStage runs st, reporting progress to progress (nil for none). It
// fails if a session cannot be opened or ctx ends; request errors are
// counted in the result.
func RunStage(ctx context.Context, st Stage, procs Procs, progress io.Writer) (StageResult, error) {
	res := StageResult{Stage: st}
	if st.Conns < 1 || st.Duration <= 0 {
		return res, fmt.Errorf("sweep: need conns >= 1 and duration > 0, got %d and %v", st.Conns, st.Duration)
	}
	r, err := openRunner(ctx, st)
	if err != nil {
		return res, err
	}
	defer r.close()
	w, err := r.window(ctx, st.Warmup, st.Duration, stageLabel(st, ""), procs, progress)
	if err != nil {
		return res, err
	}
	return r.result([]window{w}), nil
}

// runner is a stage's open sessions and their workers, which may measure
// several windows (the slices of interleaved rounds) over the same
// sessions, accumulating their records.
type runner struct {
	st       Stage
	sessions []*session.Session
	workers  []*worker
}

func openRunner(ctx context.Context, st Stage) (*runner, error) {
	sessions, err := dialAll(ctx, st)
	if err != nil {
		return nil, err
	}
	return &runner{st: st, sessions: sessions, workers: makeWorkers(st, sessions)}, nil
}

func (r *runner) close() { closeAll(r.sessions) }

// window is what one measured window counted: its successful and failed
// requests, and the CPU read around it.
type window struct {
	requests, errors int
	cpu              *cpuWindow
}

// window runs the workers for warmup (discarded) and then length,
// labelling the progress line with label. Calls still running stopGrace
// after the end are cancelled; every call has ended when it returns.
func (r *runner) window(ctx context.Context, warmup, length time.Duration, label string, procs Procs, progress io.Writer) (window, error) {
	sp := span{label: label, warmup: warmup, length: length, from: time.Now().Add(warmup)}
	sp.until = sp.from.Add(length)
	winCtx, cancel := context.WithDeadline(ctx, sp.until.Add(stopGrace))
	defer cancel()
	var c counters
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { w.run(winCtx, sp.from, sp.until, &c) })
	}
	cpu := watch(winCtx, r.st.Side, procs, sp, &c, progress)
	wg.Wait()
	<-cpu.done
	if err := ctx.Err(); err != nil {
		return window{}, fmt.Errorf("sweep: %s %s conns=%d: %w", r.st.Method, r.st.Side, r.st.Conns, err)
	}
	return window{requests: int(c.done.Load()), errors: int(c.failed.Load()), cpu: cpu}, nil
}

// result folds the workers' records, gathered over windows ws, into the
// stage's result; its rate is over r.st.Duration, the windows' total.
func (r *runner) result(ws []window) StageResult {
	res := StageResult{Stage: r.st, NegotiatedProtocol: r.sessions[0].Protocol()}
	merge(&res, r.workers)
	cpus := make([]*cpuWindow, len(ws))
	for i, w := range ws {
		cpus[i] = w.cpu
	}
	applyCPU(&res, cpus)
	return res
}

// counters are what the progress line shows.
type counters struct{ done, failed atomic.Int64 }

// worker drives one session.
type worker struct {
	op       session.Op
	lat      []time.Duration
	errs     int
	firstErr error
	// With a tag key: the last successful result's tag, and the counts.
	tag  string
	tags map[string]int
}

func makeWorkers(st Stage, sessions []*session.Session) []*worker {
	per := int(2 * rateBudget * st.Duration.Seconds() / float64(st.Conns))
	per = min(max(per, 1024), 1<<20)
	ws := make([]*worker, len(sessions))
	for i, s := range sessions {
		w := &worker{lat: make([]time.Duration, 0, per)}
		w.op = session.ListTools(s.ClientSession)
		if st.Method == MethodCall {
			var o session.CallOptions
			if key := st.TagKey; key != "" {
				w.tags = map[string]int{}
				o.Result = func(res *mcp.CallToolResult) { w.tag, _ = res.Meta[key].(string) }
			}
			w.op = session.CallToolWith(s.ClientSession, st.Tool, st.Args, o)
		}
		ws[i] = w
	}
	return ws
}

// run makes requests back to back, starting none at or after until. A
// request is recorded if it completed inside [from, until): counting
// completions keeps the rate right even when a request takes longer than
// the warmup or the window.
func (w *worker) run(ctx context.Context, from, until time.Time, c *counters) {
	for ctx.Err() == nil {
		start := time.Now()
		if !start.Before(until) {
			return
		}
		err := w.op(ctx)
		end := time.Now()
		switch {
		case end.Before(from) || !end.Before(until):
		case err != nil:
			w.errs++
			if w.firstErr == nil {
				w.firstErr = err
			}
			c.failed.Add(1)
		default:
			w.lat = append(w.lat, end.Sub(start))
			if w.tags != nil {
				w.tags[w.tag]++
			}
			c.done.Add(1)
		}
	}
}

// merge folds the workers' records into res.
func merge(res *StageResult, workers []*worker) {
	n := 0
	for _, w := range workers {
		n += len(w.lat)
	}
	all := make([]time.Duration, 0, n)
	for _, w := range workers {
		all = append(all, w.lat...)
		if w.tags != nil {
			if res.CallsByTag == nil {
				res.CallsByTag, res.ConnsByTag = map[string]int{}, map[string]int{}
			}
			for t, n := range w.tags {
				res.CallsByTag[t] += n
			}
			res.ConnsByTag[w.tag]++
		}
		res.Errors += w.errs
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	res.Requests = n
	res.ReqPerSec = float64(n) / res.Duration.Seconds()
	res.Latency = stats.Summarize(all)
}

// dialAll opens st.Conns sessions, a few at a time.
func dialAll(ctx context.Context, st Stage) ([]*session.Session, error) {
	sessions := make([]*session.Session, st.Conns)
	errs := make([]error, st.Conns)
	sem := make(chan struct{}, dialParallel)
	var wg sync.WaitGroup
	for i := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sessions[i], errs[i] = session.Dial(ctx, st.ConnURL(i), st.Protocol)
		})
	}
	wg.Wait()
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed > 0 {
		closeAll(sessions)
		return nil, fmt.Errorf("sweep: %s %s: %d of %d sessions failed to open, first: %w", st.Method, st.Side, failed, st.Conns, first)
	}
	return sessions, nil
}

// closeAll closes the non-nil sessions, a few at a time.
func closeAll(sessions []*session.Session) {
	sem := make(chan struct{}, dialParallel)
	var wg sync.WaitGroup
	for _, s := range sessions {
		if s == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = s.Close()
		})
	}
	wg.Wait()
}
