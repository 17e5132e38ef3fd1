package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/proccpu"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/scale"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

// runScale implements "bench scale" and returns the exit code: 0 when the
// run completes (whether or not the target is met), 1 when it fails, 2 on
// bad usage.
func runScale(args []string) int {
	fs := flag.NewFlagSet("bench scale", flag.ContinueOnError)
	sy := fs.String("switchyard", "", "switchyard binary (default: switchyard next to this binary)")
	workers := fs.String("workers", "1,2,4", "upstream-worker counts, comma-separated")
	edges := fs.Int("edges", 1, "edges of every gateway")
	routers := fs.Int("routers", 1, "routers of every gateway")
	conns := fs.Int("conns", 64, "client sessions, each making sequential tools/call")
	duration := fs.Duration("duration", 10*time.Second, "measured time per worker count")
	warmup := fs.Duration("warmup", 2*time.Second, "warmup time per worker count, discarded")
	service := fs.Duration("service-time", 2*time.Millisecond, "the stdio fixture's service time (it serves one call at a time)")
	protocol := fs.String("protocol", session.Protocol2025, "protocol version the sessions ask for: "+session.Protocol2025+" or "+session.Protocol2026)
	callArgs := fs.String("args", `{"text":"hi"}`, "tool arguments, a JSON object")
	target := fs.Float64("target", 3.6, "throughput ratio to 1 worker expected at -target-workers (PASS/MISS is printed, never an error)")
	targetWorkers := fs.Int("target-workers", 4, "worker count the -target applies to")
	out := fs.String("out", "", "results directory (default results/scale-<timestamp>)")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	counts, err := sweep.ParseConns(*workers)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("-workers: %w", err))
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(*callArgs), &obj); err != nil || obj == nil {
		errs = append(errs, fmt.Errorf("-args must be a JSON object: %q", *callArgs))
	}
	if *protocol != session.Protocol2025 && *protocol != session.Protocol2026 {
		errs = append(errs, fmt.Errorf("-protocol must be %s or %s, got %q", session.Protocol2025, session.Protocol2026, *protocol))
	}
	if *edges < 1 || *routers < 1 || *edges > maxPerRole || *routers > maxPerRole || *service < 0 {
		errs = append(errs, errors.New("need 1 to 64 -edges and -routers and -service-time >= 0"))
	}
	self, syBin, err := binaries(*sy)
	errs = append(errs, err, extraArgs(fs))
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench scale: %v\n", err)
		return 2
	}
	if *out == "" {
		*out = filepath.Join("results", "scale-"+report.Stamp(time.Now()))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	up := launch.Upstream{
		Name:      "fixture",
		Command:   []string{self, "fixture", "-serial", "-service-time", service.String()},
		Processes: 1,
	}
	cfg := scale.Config{
		Workers: counts, Conns: *conns, Warmup: *warmup, Duration: *duration,
		Tool: up.Name + "__echo", Args: json.RawMessage(*callArgs), TagKey: fixture.MetaTag,
		Protocol: *protocol, Target: *target, TargetWorkers: *targetWorkers,
		Edges: *edges, Routers: *routers,
		Upstream: fmt.Sprintf("stdio `%s`, processes: 1 per worker (one call at a time, %v each)", strings.Join(up.Command, " "), *service),
		Progress: os.Stderr,
		Launch:   scaleLauncher(syBin, up, *edges, *routers, *protocol, filepath.Join(*out, "logs")),
	}
	r, err := scale.Run(ctx, cfg)
	if r == nil {
		fmt.Fprintf(os.Stderr, "bench scale: %v\n", err)
		return 1
	}
	code := writeScale(r, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench scale: %v (the worker counts measured so far were written)\n", err)
		return 1
	}
	return code
}

// scaleLauncher starts a cluster with the given workers in front of up,
// each worker tagging its fixture's results with its id.
func scaleLauncher(sy string, up launch.Upstream, edges, routers int, protocol, logDir string) scale.Launcher {
	return func(ctx context.Context, n int) (scale.Env, func() error, error) {
		dir := filepath.Join(logDir, fmt.Sprintf("workers-%d", n))
		c, err := launch.StartCluster(ctx, launch.ClusterOptions{
			SwitchyardBin: sy,
			Topology:      report.Topology{Edges: edges, Routers: routers, Workers: n},
			Upstreams:     []launch.Upstream{up},
			LogDir:        dir, Protocol: protocol, WantTools: launch.FixtureTools(0),
			WorkerEnv:    func(i int) []string { return []string{fmt.Sprintf("%s=%s", fixture.TagEnv, launch.WorkerID(i))} },
			IdleRSSAfter: idleRSSAfter,
		})
		if err != nil {
			return scale.Env{}, nil, err
		}
		fmt.Fprintf(os.Stderr, "started %s\n", c)
		if len(c.NotUp) > 0 {
			fmt.Fprintf(os.Stderr, "warning: %v logged no upstream up within %v; measuring anyway\n", c.NotUp, launch.WorkerUpTimeout)
		}
		if c.IdleRSS != nil {
			fmt.Fprintln(os.Stderr, c.IdleRSS.Text())
		}
		env := scale.Env{URLs: c.EdgeURLs, GatewayPIDs: c.PIDs(), GOGC: c.GOGC, GOMAXPROCS: c.GOMAXPROCS, LogDir: dir, IdleRSS: c.IdleRSS}
		for i := 1; i <= n; i++ {
			env.Workers = append(env.Workers, launch.WorkerID(i))
		}
		for _, w := range c.Workers {
			env.UpstreamPIDs = append(env.UpstreamPIDs, proccpu.Children(w.PID())...)
		}
		return env, func() error {
			err := c.Stop()
			if err != nil {
				fmt.Fprintln(os.Stderr, "stopping:", err)
			}
			return err
		}, nil
	}
}

// writeScale prints the report and writes its files into out.
func writeScale(r *scale.Report, out string) int {
	md := r.Markdown()
	fmt.Print(md)
	fmt.Println(r.VerdictLine())
	var errs []error
	_, err := report.WriteJSON(out, "scale.json", r)
	errs = append(errs, err)
	_, err = report.WriteFile(out, "scale.md", []byte(md))
	errs = append(errs, err)
	b, err := r.SVG()
	if err == nil {
		_, err = report.WriteFile(out, scale.PlotName, b)
	}
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench scale: write results: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "wrote %s/{scale.json,scale.md,%s} (gateway logs in %s/logs)\n", out, scale.PlotName, out)
	return 0
}
