package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

// runSweep implements "bench sweep" and returns the exit code.
func runSweep(args []string) int {
	fs, o := sweepFlags()
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	cfg, err := o.config(fs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench sweep: %v\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	out := o.out
	if out == "" {
		out = filepath.Join("results", "sweep-"+report.Stamp(time.Now()))
	}

	f := &o.endpoint
	var rt gatewayRuntime
	if f.starts() {
		cfg.Launch = sweepLauncher(f, &rt, filepath.Join(out, "logs"))
		if o.proxy {
			cfg.StartProxy = sweepProxyStarter(f.switchyard)
		}
	}
	r, err := sweep.Run(ctx, cfg)
	if r == nil {
		fmt.Fprintf(os.Stderr, "bench sweep: %v\n", err)
		return 1
	}
	r.GOGC, r.GOMAXPROCS = rt.gogc, rt.gomaxprocs
	if f.startCluster {
		topo := f.topo
		r.Topology = &topo
	}
	code := writeSweep(r, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench sweep: %v (the stages measured so far were written)\n", err)
		return 1
	}
	return code
}

// sweepOpts are the flags of "bench sweep".
type sweepOpts struct {
	endpoint                   endpointFlags
	conns, methods, federation string
	duration, warmup           time.Duration
	rounds                     int
	out                        string
	// proxy (-proxy) starts a proxy in front of the methods' fixture;
	// proxyURL (-proxy-url) is one already running, in url mode.
	proxy    bool
	proxyURL string
}

// sweepFlags returns the flag set of "bench sweep" and where it puts the
// values.
func sweepFlags() (*flag.FlagSet, *sweepOpts) {
	fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
	o := &sweepOpts{}
	o.endpoint.register(fs)
	fs.StringVar(&o.conns, "conns", "8,64,256", "connection counts, comma-separated")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per stage (per side, over all rounds)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warmup time per stage, discarded (with -rounds: before each slice)")
	fs.IntVar(&o.rounds, "rounds", 1, "interleave each direct, proxy (with -proxy or -proxy-url) and gateway stage in this many rounds of duration/rounds per side, "+
		"sessions kept open; retention is the median of the per-round ratios (1: direct stage, then proxy stage, then gateway stage)")
	fs.StringVar(&o.methods, "methods", sweep.MethodCall+","+sweep.MethodList, "methods to sweep, comma-separated (empty: none)")
	fs.StringVar(&o.federation, "federation", "1x1,5x20,20x50", "tools/list federation shapes UPSTREAMSxTOOLS (needs -start-embedded or -start-cluster; empty or none: skip)")
	fs.StringVar(&o.out, "out", "", "results directory (default results/sweep-<timestamp>)")
	fs.BoolVar(&o.proxy, "proxy", false, "with -start-embedded or -start-cluster: also measure the methods' fixture through a bare reverse proxy process ('bench proxy'), the floor any gateway pays (not the federation shapes)")
	fs.StringVar(&o.proxyURL, "proxy-url", "", "with -gateway and -direct: also measure the same upstream through this already running proxy's MCP endpoint (see 'bench proxy'), calling -tool")
	return fs, o
}

// config validates the parsed flags and builds the sweep's configuration
// from them; runSweep adds the launcher (and the proxy's) when the driver
// starts the gateway.
func (o *sweepOpts) config(fs *flag.FlagSet) (sweep.Config, error) {
	f := &o.endpoint
	callArgs, err := f.check(fs)
	cfg := sweep.Config{
		Env: sweep.Env{
			Direct:  sweep.Endpoint{URL: f.direct, Tool: f.tool},
			Gateway: sweep.Endpoint{URL: f.gateway, Tool: f.gwTool},
		},
		Warmup: o.warmup, Duration: o.duration, Rounds: o.rounds,
		Args: callArgs, Protocol: f.protocol, Mode: f.mode, Progress: os.Stderr,
	}
	if o.proxyURL != "" {
		cfg.Env.Proxy = sweep.Endpoint{URL: o.proxyURL, Tool: f.tool} // the proxy passes names through
	}
	var err2, err3 error
	cfg.Conns, err2 = sweep.ParseConns(o.conns)
	if o.methods != "" {
		cfg.Methods = strings.Split(o.methods, ",")
	}
	cfg.Shapes, err3 = sweep.ParseShapes(o.federation)
	if len(cfg.Shapes) > 0 && !f.starts() {
		fmt.Fprintln(os.Stderr, "bench sweep: -federation needs -start-embedded or -start-cluster; skipping the federation shapes")
		cfg.Shapes = nil
	}
	return cfg, errors.Join(err, err2, err3, o.checkProxy(), extraArgs(fs))
}

// checkProxy checks that -proxy comes with -start-* and -proxy-url
// without, and either with methods to measure.
func (o *sweepOpts) checkProxy() error {
	if err := checkProxyFlags(o.endpoint.starts(), o.proxy, o.proxyURL); err != nil {
		return err
	}
	if (o.proxy || o.proxyURL != "") && o.methods == "" {
		return errors.New("-proxy and -proxy-url measure the methods' stages, not the federation shapes; -methods is empty")
	}
	return nil
}

// sweepProxyStarter starts "bench proxy" (this binary) in front of the
// methods' fixture, with the gateway's runtime settings; sy is
// -switchyard, checked as for the gateway.
func sweepProxyStarter(sy string) sweep.ProxyStarter {
	return func(ctx context.Context, upstream string) (string, []int, func() error, error) {
		p, url, err := startProxy(ctx, sy, upstream)
		if err != nil {
			return "", nil, nil, err
		}
		return url, []int{p.PID()}, p.Stop, nil
	}
}

// gatewayRuntime is the Go runtime settings in the environment of the
// gateway processes the driver started.
type gatewayRuntime struct{ gogc, gomaxprocs string }

// sweepLauncher starts each shape's fixtures and gateway, recording the
// gateway's runtime settings in rt; a cluster logs into logDir/<shape>.
func sweepLauncher(f *endpointFlags, rt *gatewayRuntime, logDir string) sweep.Launcher {
	return func(ctx context.Context, s sweep.Shape) (sweep.Env, func() error, error) {
		e, err := f.launch(ctx, s.Upstreams, s.Tools, filepath.Join(logDir, s.String()), 0)
		if err != nil {
			return sweep.Env{}, nil, err
		}
		*rt = gatewayRuntime{e.GOGC(), e.GOMAXPROCS()}
		env := sweep.Env{
			Direct:  sweep.Endpoint{URL: e.FixtureURLs[0], Tool: f.tool},
			Gateway: sweep.Endpoint{URL: e.URLs()[0], Tool: f.gwTool},
			Procs:   sweep.Procs{Gateway: e.GatewayPIDs(), Upstreams: e.FixturePIDs()},
		}
		if urls := e.URLs(); len(urls) > 1 {
			env.Gateway.URLs = urls
		}
		return env, func() error { return stop(e) }, nil
	}
}

// writeSweep prints the report's tables and writes its files into out.
func writeSweep(r *sweep.Report, out string) int {
	md := r.Markdown()
	fmt.Print(md)
	var errs []error
	_, err := report.WriteJSON(out, "sweep.json", r)
	errs = append(errs, err)
	_, err = report.WriteFile(out, "sweep.md", []byte(md))
	errs = append(errs, err)
	for _, p := range r.Plots() {
		b, err := p.SVG()
		if err == nil {
			_, err = report.WriteFile(out, p.Name, b)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench sweep: write results: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "wrote %s/{sweep.json,sweep.md,*.svg}\n", out)
	return 0
}
