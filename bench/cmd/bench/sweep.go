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
	fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
	var f endpointFlags
	f.register(fs)
	conns := fs.String("conns", "8,64,256", "connection counts, comma-separated")
	duration := fs.Duration("duration", 10*time.Second, "measured time per stage (per side, over all rounds)")
	warmup := fs.Duration("warmup", 2*time.Second, "warmup time per stage, discarded (with -rounds: before each slice)")
	rounds := fs.Int("rounds", 1, "interleave each direct and gateway stage in this many rounds of duration/rounds per side, "+
		"sessions kept open; retention is the median of the per-round ratios (1: direct stage, then gateway stage)")
	methods := fs.String("methods", sweep.MethodCall+","+sweep.MethodList, "methods to sweep, comma-separated (empty: none)")
	federation := fs.String("federation", "1x1,5x20,20x50", "tools/list federation shapes UPSTREAMSxTOOLS (needs -start-embedded or -start-cluster; empty or none: skip)")
	out := fs.String("out", "", "results directory (default results/sweep-<timestamp>)")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	cfg, err := sweepConfig(&f, fs, *conns, *methods, *federation)
	if err != nil || fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench sweep: %v\n", errors.Join(err, extraArgs(fs)))
		return 2
	}
	cfg.Warmup, cfg.Duration, cfg.Rounds = *warmup, *duration, *rounds
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *out == "" {
		*out = filepath.Join("results", "sweep-"+report.Stamp(time.Now()))
	}

	var rt gatewayRuntime
	if f.starts() {
		cfg.Launch = sweepLauncher(&f, &rt, filepath.Join(*out, "logs"))
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
	code := writeSweep(r, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench sweep: %v (the stages measured so far were written)\n", err)
		return 1
	}
	return code
}

// sweepConfig builds the sweep's configuration from the flags.
func sweepConfig(f *endpointFlags, fs *flag.FlagSet, conns, methods, federation string) (sweep.Config, error) {
	callArgs, err := f.check(fs)
	cfg := sweep.Config{
		Env: sweep.Env{
			Direct:  sweep.Endpoint{URL: f.direct, Tool: f.tool},
			Gateway: sweep.Endpoint{URL: f.gateway, Tool: f.gwTool},
		},
		Args: callArgs, Protocol: f.protocol, Mode: f.mode, Progress: os.Stderr,
	}
	var err2, err3 error
	cfg.Conns, err2 = sweep.ParseConns(conns)
	if methods != "" {
		cfg.Methods = strings.Split(methods, ",")
	}
	cfg.Shapes, err3 = sweep.ParseShapes(federation)
	if len(cfg.Shapes) > 0 && !f.starts() {
		fmt.Fprintln(os.Stderr, "bench sweep: -federation needs -start-embedded or -start-cluster; skipping the federation shapes")
		cfg.Shapes = nil
	}
	return cfg, errors.Join(err, err2, err3)
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
