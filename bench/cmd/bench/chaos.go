package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/chaos"
	"github.com/switchyard-mcp/switchyard/bench/internal/lb"
)

// runChaos implements "bench chaos": the fault harness of
// docs/reliability.md. It needs root (network namespaces).
func runChaos(args []string) int {
	fs := flag.NewFlagSet("bench chaos", flag.ContinueOnError)
	sessions := fs.Int("sessions", 64, "official-SDK client sessions calling through the balancer")
	short := fs.Bool("short", false, "the CI run: shorter holds and settles (use with fewer -sessions)")
	sleepMS := fs.Int("service-ms", 100, "how long each call takes at the upstream, in milliseconds")
	only := fs.String("scenarios", "", "comma-separated substrings: run only the scenarios whose name contains one")
	out := fs.String("out", "", "directory for logs and results.md (default results/chaos-<time>)")
	sy := fs.String("switchyard", "", "switchyard binary (default: switchyard next to this binary)")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	if err := extraArgs(fs); err != nil {
		fmt.Fprintf(os.Stderr, "bench chaos: %v\n", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench chaos: needs root (it creates network namespaces)")
		return 2
	}
	_, bin, err := binaries(*sy)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench chaos: %v\n", err)
		return 2
	}
	ro := chaos.RunOptions{Hold: 5 * time.Second, Partition: 10 * time.Second, Settle: 3 * time.Second, Ready: 90 * time.Second}
	if *short {
		ro.Hold, ro.Settle = 2*time.Second, 2*time.Second
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join("results", "chaos-"+time.Now().UTC().Format("20060102-150405"))
	}
	if dir, err = filepath.Abs(dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench chaos: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rs, err := chaosRun(ctx, bin, dir, *sessions, *sleepMS, *only, ro)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench chaos: %v\n", err)
		return 1
	}
	table := chaos.Table(rs)
	fmt.Print(table)
	cmdline := "bench chaos " + strings.Join(args, " ")
	report := fmt.Sprintf("# bench chaos, %s\n\n`%s`: %d sessions, calls of %d ms, holds %v, partition %v.\n\n%s",
		time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(cmdline), *sessions, *sleepMS, ro.Hold, ro.Partition, table)
	_ = os.WriteFile(filepath.Join(dir, "results.md"), []byte(report), 0o644)
	fmt.Fprintf(os.Stderr, "bench chaos: results and logs in %s\n", dir)
	for _, r := range rs {
		if !r.OK() {
			return 1
		}
	}
	return 0
}

func chaosRun(ctx context.Context, bin, dir string, sessions, sleepMS int, only string, ro chaos.RunOptions) (rs []chaos.Result, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n, err := chaos.NewNet(ctx, []string{"n1", "n2", "n3", "a1", "a2"})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	// The upstream runs here, in the driver's namespace, on the bridge:
	// no fault reaches it.
	ln, err := net.Listen("tcp", net.JoinHostPort(n.BridgeIP, "0"))
	if err != nil {
		return nil, err
	}
	srv := fixture.NewServer(fixture.Options{})
	runs := chaos.NewRunCounter()
	up := &http.Server{Handler: runs.Wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = up.Serve(ln) }()
	defer up.Close()
	fmt.Fprintf(os.Stderr, "bench chaos: starting the deployment (logs in %s/logs)\n", dir)
	// The edges drain for 1 s when stopped: four of the balancer's
	// health checks (lb.CheckInterval), as docs/reliability.md advises.
	d, err := chaos.Deploy(ctx, n, chaos.DeployOptions{Bin: bin, Dir: dir, Upstream: "http://" + ln.Addr().String() + "/mcp",
		ExtraConfig: "edge:\n  drain_delay: 1s\n"})
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	bal := lb.New(d.Edges, log.New(io.Discard, "", 0))
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	go bal.Run(lctx)
	lln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lsrv := &http.Server{Handler: bal, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = lsrv.Serve(lln) }()
	defer lsrv.Close()
	dr := chaos.NewDriver("http://"+lln.Addr().String()+"/mcp", "fx__echo", sleepMS, 20*time.Second)
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	dr.Start(dctx, sessions)
	defer dr.Stop()
	defer func() {
		// Every echo's text is unique: one the upstream received twice
		// ran twice.
		total, twice := runs.Counts()
		fmt.Fprintf(os.Stderr, "bench chaos: the upstream ran %d calls, %d of them more than once\n", total, len(twice))
		if len(twice) > 0 {
			var b strings.Builder
			for _, t := range twice {
				fmt.Fprintf(&b, "%s: %s\n", t, strings.Join(runs.Arrivals(t), "; "))
			}
			_ = os.WriteFile(filepath.Join(dir, "ran-twice.txt"), []byte(b.String()), 0o644)
			rs = append(rs, chaos.Result{Scenario: chaos.Scenario{Name: "calls that ran more than once (whole run)"}, Err: fmt.Errorf("%d calls ran more than once (ran-twice.txt)", len(twice))})
		}
	}()
	for _, s := range chaos.Scenarios() {
		if !selected(s.Name, only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench chaos: %s\n", s.Name)
		r := chaos.Run(ctx, d, dr, s, ro)
		fmt.Fprint(os.Stderr, chaos.Table([]chaos.Result{r}))
		fmt.Fprintf(os.Stderr, "  slowest call %v\n", r.Window.Slowest)
		for k, m := range r.Window.Examples {
			fmt.Fprintf(os.Stderr, "  e.g. %s: %s\n", k, m)
		}
		rs = append(rs, r)
		if len(r.Window.Failed) > 0 {
			name := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(s.Name)
			_ = os.WriteFile(filepath.Join(dir, "failed-"+name+".txt"), []byte(strings.Join(r.Window.Failed, "\n")+"\n"), 0o644)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return rs, nil
}

func selected(name, only string) bool {
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}
