package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/latency"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// runLatency implements "bench latency" and returns the exit code: 0 when
// the gate passes, 1 when it fails or the run fails, 2 on bad usage.
func runLatency(args []string) int {
	fs, o := latencyFlags()
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	callArgs, err := o.check(fs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench latency: %v\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, o.timeout)
	defer cancelTimeout()

	cfg := o.config(callArgs)
	var st *started
	if o.endpoint.starts() {
		if st, err = o.start(ctx, &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench latency: %v\n", err)
			return 1
		}
		defer st.stop()
	}
	r, err := latency.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench latency: %v\n", err)
		return 1
	}
	if st != nil {
		e := st.stack
		r.GOGC, r.GOMAXPROCS, r.Topology, r.GatewayLogs, r.IdleRSS = e.GOGC(), e.GOMAXPROCS(), e.Topology(), st.logDir, e.IdleRSS()
	}
	return latencyReport(os.Stdout, os.Stderr, r, o.out, o.maxAdded)
}

// config returns the run's configuration from the flags; with -start-*,
// [latencyOpts.start] fills in the URLs.
func (o *latencyOpts) config(callArgs json.RawMessage) latency.Config {
	f := &o.endpoint
	cfg := latency.Config{
		Direct:  latency.Target{URL: f.direct, Tool: f.tool},
		Gateway: latency.Target{URL: f.gateway, Tool: f.gwTool},
		Args:    callArgs, Warmup: o.warmup, N: o.n, Protocol: f.protocol, Mode: f.mode, Log: os.Stderr,
		Hops: o.hops,
	}
	if o.proxyURL != "" {
		cfg.Proxy = &latency.Target{URL: o.proxyURL, Tool: f.tool}
	}
	return cfg
}

// started is what the driver started for a run: the stack and, with
// -proxy, the proxy in front of its first fixture (else nil).
type started struct {
	stack  *launch.Stack
	proxy  *launch.Process
	logDir string // the cluster's logs; empty for embedded
}

// stop stops the proxy, then the stack, reporting failures on stderr.
func (s *started) stop() {
	if s.proxy != nil {
		if err := s.proxy.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping:", err)
		}
	}
	_ = stop(s.stack)
}

// start starts the stack (and with -proxy the proxy) and points cfg's
// targets at them. On error nothing is left running.
func (o *latencyOpts) start(ctx context.Context, cfg *latency.Config) (*started, error) {
	f := &o.endpoint
	st := &started{}
	if f.startCluster {
		st.logDir = filepath.Join(o.out, fmt.Sprintf("latency-%s-%s-%s-logs", f.mode, f.protocol, report.Stamp(time.Now())))
	}
	e, err := f.launch(ctx, 1, 0, st.logDir, idleRSSAfter)
	if err != nil {
		return nil, err
	}
	st.stack = e
	cfg.Direct.URL, cfg.Gateway.URL, cfg.GatewayPIDs = e.FixtureURLs[0], e.URLs()[0], e.GatewayPIDs()
	if urls := e.URLs(); len(urls) > 1 {
		cfg.Gateway.URLs = urls // one session per edge, calls rotating over them
	}
	if o.proxy {
		url, err := st.startProxy(ctx, f.switchyard, e.FixtureURLs[0])
		if err != nil {
			st.stop()
			return nil, err
		}
		cfg.Proxy = &latency.Target{URL: url, Tool: f.tool}
	}
	return st, nil
}

// startProxy starts "bench proxy" (this binary) in front of upstream and
// returns its MCP endpoint.
func (s *started) startProxy(ctx context.Context, sy, upstream string) (string, error) {
	p, url, err := startProxy(ctx, sy, upstream)
	if err != nil {
		return "", err
	}
	s.proxy = p
	return url, nil
}

// latencyOpts are the flags of "bench latency".
type latencyOpts struct {
	endpoint          endpointFlags
	warmup, n         int
	maxAdded, timeout time.Duration
	out               string
	hops              bool
	// proxy (-proxy) starts a proxy in front of the started fixture;
	// proxyURL (-proxy-url) is one already running, in url mode.
	proxy    bool
	proxyURL string
}

// latencyFlags returns the flag set of "bench latency" and where it puts
// the values.
func latencyFlags() (*flag.FlagSet, *latencyOpts) {
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	o := &latencyOpts{}
	o.endpoint.register(fs)
	fs.IntVar(&o.warmup, "warmup", 200, "warmup calls per side, discarded")
	fs.IntVar(&o.n, "n", 2000, "measured calls per side")
	fs.DurationVar(&o.maxAdded, "max-added-p50", 5*time.Millisecond, "fail if gateway p50 - direct p50 exceeds this (0 disables)")
	fs.StringVar(&o.out, "out", "results", "directory for the JSON and Markdown results")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up on the whole run after this long")
	fs.BoolVar(&o.hops, "hops", true, "ask the gateway for per-hop timing stamps on every call and report the median of each hop")
	fs.BoolVar(&o.proxy, "proxy", false, "with -start-embedded or -start-cluster: also measure the fixture through a minimal reverse proxy process ('bench proxy'), the floor any gateway adds")
	fs.StringVar(&o.proxyURL, "proxy-url", "", "with -gateway and -direct: also measure the same upstream through this already running proxy's MCP endpoint (see 'bench proxy')")
	return fs, o
}

// check validates the parsed flags and returns the tool arguments.
func (o *latencyOpts) check(fs *flag.FlagSet) (json.RawMessage, error) {
	callArgs, err := o.endpoint.check(fs)
	if err == nil && (o.n < 1 || o.warmup < 0) {
		err = errors.New("need -n >= 1 and -warmup >= 0")
	}
	return callArgs, errors.Join(err, o.checkProxy(), extraArgs(fs))
}

// checkProxy checks that -proxy comes with -start-* and -proxy-url
// without.
func (o *latencyOpts) checkProxy() error {
	return checkProxyFlags(o.endpoint.starts(), o.proxy, o.proxyURL)
}

// latencyReport prints r on stdout, writes its files into the directory
// out, applies the gate with the limit maxAdded (0 or less: none, the
// report only) and says so on stderr. It returns the exit code: 1 when the
// gate fails or a file could not be written, else 0.
func latencyReport(stdout, stderr io.Writer, r *latency.Result, out string, maxAdded time.Duration) int {
	code := 0
	if err := r.WriteText(stdout); err != nil {
		code = 1
	}
	fmt.Fprintln(stdout, r.BenchLine())
	base := fmt.Sprintf("latency-%s-%s-%s", r.Mode, r.Protocol, report.Stamp(r.Start))
	if p, err := report.WriteJSON(out, base+".json", r); err != nil {
		fmt.Fprintf(stderr, "bench latency: write results: %v\n", err)
		code = 1
	} else {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if p, err := report.WriteFile(out, base+".md", []byte(r.Markdown())); err != nil {
		fmt.Fprintf(stderr, "bench latency: write results: %v\n", err)
		code = 1
	} else {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if err := r.Check(maxAdded); err != nil {
		fmt.Fprintf(stderr, "bench latency: FAIL: %v\n", err)
		return 1
	}
	// The added p50 in the µs of BENCH_RESULT's added_p50_us, not a
	// Duration's own rounding (1046 µs there read 1.047ms here).
	if maxAdded <= 0 {
		// -max-added-p50 0: nothing to pass; the error rate and protocol
		// checks above still apply.
		fmt.Fprintf(stderr, "bench latency: report only (added p50 %dµs; no limit)\n", r.AddedP50Micros())
	} else {
		fmt.Fprintf(stderr, "bench latency: PASS (added p50 %dµs, limit %v)\n", r.AddedP50Micros(), maxAdded)
	}
	return code
}

// usageExit maps a flag parsing error to an exit code: 0 for -h, else 2.
func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func extraArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
