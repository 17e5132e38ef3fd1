package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

// Mode labels, from how the gateway is reached.
const (
	modeEmbedded = "embedded" // -start-embedded: "switchyard dev"
	modeCluster  = "cluster"  // -start-cluster: one process per role instance
	modeURL      = "url"      // -gateway: a deployment the driver did not start
)

// endpointFlags are the flags "latency" and "sweep" share: what to measure,
// or how to start it.
type endpointFlags struct {
	gateway, direct string
	tool, gwTool    string
	args            string
	protocol        string
	mode            string
	startEmbedded   bool
	startCluster    bool
	switchyard      string
	nats            string // -nats-security: launch.NATSTLS, NATSCreds or NATSNone
	topo            report.Topology
	// set holds the names of the flags given on the command line.
	set map[string]bool
}

func (f *endpointFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.gateway, "gateway", "", "MCP endpoint through an already running Switchyard, e.g. http://127.0.0.1:8080/mcp (mode url)")
	fs.StringVar(&f.gateway, "gateway-url", "", "same as -gateway")
	fs.StringVar(&f.direct, "direct", "", "the same upstream's MCP endpoint, directly")
	fs.StringVar(&f.tool, "tool", "echo", "tool called on the direct side")
	fs.StringVar(&f.gwTool, "gw-tool", "fixture__echo", "tool called through the gateway (its federated name)")
	fs.StringVar(&f.args, "args", `{"text":"hi"}`, "tool arguments, a JSON object")
	fs.StringVar(&f.protocol, "protocol", session.Protocol2025, "protocol version the sessions ask for: "+session.Protocol2025+" or "+session.Protocol2026)
	fs.StringVar(&f.mode, "mode", "", "label for the gateway's deployment, put in the results (default: "+modeEmbedded+", "+modeCluster+" or "+modeURL+", from the flags)")
	fs.BoolVar(&f.startEmbedded, "start-embedded", false, "start a fixture upstream and 'switchyard dev' in front of it, measure them, stop them")
	fs.BoolVar(&f.startCluster, "start-cluster", false, "like -start-embedded, but run the gateway as separate processes: switchyard nats, tenancy-svc, and -routers routers, -workers upstream-workers, -edges edges")
	fs.IntVar(&f.topo.Edges, "edges", 1, "with -start-cluster: number of edges (default from $EDGES, else 1)")
	fs.IntVar(&f.topo.Routers, "routers", 1, "with -start-cluster: number of routers (default from $ROUTERS, else 1)")
	fs.IntVar(&f.topo.Workers, "workers", 1, "with -start-cluster: number of upstream-workers (default from $WORKERS, else 1)")
	fs.StringVar(&f.switchyard, "switchyard", "", "switchyard binary for -start-embedded and -start-cluster (default: switchyard next to this binary)")
	fs.StringVar(&f.nats, "nats-security", launch.NATSTLS, "with -start-cluster: the bus's security: tls (each role's creds from switchyard nats init, over TLS: the secure deployment), creds (the same without TLS, to measure TLS) or none (no authentication)")
}

// check validates the flags (after fs.Parse), fills in the defaults that
// depend on other flags and on the environment, and returns the tool
// arguments.
func (f *endpointFlags) check(fs *flag.FlagSet) (json.RawMessage, error) {
	f.set = visited(fs)
	var errs []error
	var obj map[string]any
	if err := json.Unmarshal([]byte(f.args), &obj); err != nil || obj == nil {
		errs = append(errs, fmt.Errorf("-args must be a JSON object: %q", f.args))
	}
	if f.protocol != session.Protocol2025 && f.protocol != session.Protocol2026 {
		errs = append(errs, fmt.Errorf("-protocol must be %s or %s, got %q", session.Protocol2025, session.Protocol2026, f.protocol))
	}
	urls := f.gateway != "" || f.direct != ""
	switch {
	case f.startEmbedded && f.startCluster:
		errs = append(errs, errors.New("use either -start-embedded or -start-cluster"))
	case (f.startEmbedded || f.startCluster) && urls:
		errs = append(errs, errors.New("use either -start-embedded/-start-cluster or -gateway/-direct"))
	case !f.startEmbedded && !f.startCluster && (f.gateway == "" || f.direct == ""):
		errs = append(errs, errors.New("need -gateway and -direct, or -start-embedded, or -start-cluster"))
	}
	if f.startCluster {
		errs = append(errs, topologyFromEnv(&f.topo, f.set, os.Getenv))
	} else if f.set["edges"] || f.set["routers"] || f.set["workers"] || f.set["nats-security"] {
		errs = append(errs, errors.New("-edges, -routers, -workers and -nats-security need -start-cluster"))
	}
	switch f.nats {
	case launch.NATSTLS, launch.NATSCreds, launch.NATSNone:
	default:
		errs = append(errs, fmt.Errorf("-nats-security must be %s, %s or %s, got %q", launch.NATSTLS, launch.NATSCreds, launch.NATSNone, f.nats))
	}
	if !f.set["mode"] {
		f.mode = f.defaultMode()
	}
	return json.RawMessage(f.args), errors.Join(errs...)
}

// defaultMode returns the mode label the flags imply.
func (f *endpointFlags) defaultMode() string {
	switch {
	case f.startCluster:
		return modeCluster
	case f.startEmbedded:
		return modeEmbedded
	}
	return modeURL
}

// starts reports whether the driver starts the gateway itself.
func (f *endpointFlags) starts() bool { return f.startEmbedded || f.startCluster }

// visited returns the names of the flags given on fs's command line.
func visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

// topologyFromEnv fills the counts of t whose flags (-edges, -routers,
// -workers) were not given from EDGES, ROUTERS and WORKERS when those are
// set, then checks that every count is at least 1.
func topologyFromEnv(t *report.Topology, set map[string]bool, getenv func(string) string) error {
	var errs []error
	for _, c := range []struct {
		flag, env string
		n         *int
	}{{"edges", "EDGES", &t.Edges}, {"routers", "ROUTERS", &t.Routers}, {"workers", "WORKERS", &t.Workers}} {
		if v := getenv(c.env); v != "" && !set[c.flag] {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("$%s: %q is not a number", c.env, v))
				continue
			}
			*c.n = n
		}
		if *c.n < 1 || *c.n > maxPerRole {
			errs = append(errs, fmt.Errorf("need 1 to %d %s, got %d", maxPerRole, c.flag, *c.n))
		}
	}
	return errors.Join(errs...)
}

// maxPerRole bounds the processes of one role the driver starts.
const maxPerRole = 64

// binaries returns the bench binary (this one) and the switchyard binary:
// sy, or switchyard next to this binary.
func binaries(sy string) (self, switchyard string, err error) {
	self, err = os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	if sy == "" {
		sy = filepath.Join(filepath.Dir(self), "switchyard")
	}
	if _, err := os.Stat(sy); err != nil {
		return "", "", fmt.Errorf("switchyard binary: %w (build it with 'make build' or pass -switchyard)", err)
	}
	return self, sy, nil
}

// startProxy starts "bench proxy" (this binary, found as [binaries] does)
// in front of upstream with the gateway's runtime settings, says so on
// stderr and returns the process and its MCP endpoint. On error nothing is
// left running.
func startProxy(ctx context.Context, sy, upstream string) (*launch.Process, string, error) {
	self, _, err := binaries(sy)
	if err != nil {
		return nil, "", err
	}
	p, url, err := launch.StartProxy(ctx, "proxy", self, upstream)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(os.Stderr, "started proxy %s (pid %d) in front of %s\n", url, p.PID(), upstream)
	return p, url, nil
}

// checkProxyFlags checks the proxy flags "latency" and "sweep" share:
// proxy (-proxy) needs the driver to start the gateway (starts), proxyURL
// (-proxy-url) needs it not to.
func checkProxyFlags(starts, proxy bool, proxyURL string) error {
	switch {
	case proxy && !starts:
		return errors.New("-proxy needs -start-embedded or -start-cluster (with -gateway and -direct, pass a running proxy's -proxy-url)")
	case proxyURL != "" && starts:
		return errors.New("-proxy-url needs -gateway and -direct (with -start-embedded or -start-cluster, use -proxy)")
	}
	return nil
}

// launchOptions returns the options to start u fixtures with t extra tools
// each behind a gateway, embedded or (with -start-cluster) a cluster
// logging into logDir.
func (f *endpointFlags) launchOptions(u, t int, logDir string, idleRSS time.Duration) (launch.Options, error) {
	self, sy, err := binaries(f.switchyard)
	if err != nil {
		return launch.Options{}, err
	}
	o := launch.Options{BenchBin: self, SwitchyardBin: sy, Upstreams: u, ExtraTools: t, Protocol: f.protocol}
	if f.startCluster {
		topo := f.topo
		o.Cluster, o.LogDir, o.IdleRSSAfter, o.NATS = &topo, logDir, idleRSS, f.nats
	}
	return o, nil
}

// launch starts u fixtures with t extra tools behind a gateway and says
// so on stderr. A cluster's idle RSS is read idleRSS after it is ready (0:
// not read).
func (f *endpointFlags) launch(ctx context.Context, u, t int, logDir string, idleRSS time.Duration) (*launch.Stack, error) {
	o, err := f.launchOptions(u, t, logDir, idleRSS)
	if err != nil {
		return nil, err
	}
	e, err := launch.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	announce(os.Stderr, e, t)
	return e, nil
}

// announce says on w what was started, with t extra tools per fixture.
// It leaves out the idle RSS: the report of the run ("bench latency"'s
// text on stdout) prints it, and a second copy here made it appear twice.
func announce(w io.Writer, e *launch.Stack, t int) {
	fmt.Fprintf(w, "started %s (-tools %d)\n", e.Describe(), t)
	if e.Cluster != nil && len(e.Cluster.NotUp) > 0 {
		fmt.Fprintf(w, "warning: %v logged no upstream up within %v; measuring anyway\n", e.Cluster.NotUp, launch.WorkerUpTimeout)
	}
}

// idleRSSAfter is how long a cluster started for "latency" or "scale"
// idles before its processes' RSS is read.
const idleRSSAfter = 2 * time.Second

// stop stops e, reporting a failure on stderr.
func stop(e *launch.Stack) error {
	err := e.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stopping:", err)
	}
	return err
}
