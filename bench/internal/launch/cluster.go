package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/procrss"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// WorkerUpTimeout bounds the wait, once the edges list the tools, for every
// worker to report its upstreams up. Missing it is not an error (see
// [Cluster.NotUp]): the calls still work, on fewer workers at first.
const WorkerUpTimeout = 20 * time.Second

// workerUpLine is in the JSON log line a worker writes when one of its
// upstreams is up.
const workerUpLine = `"msg":"upstream up"`

// ClusterOptions configures [StartCluster].
type ClusterOptions struct {
	// SwitchyardBin is the switchyard binary; its subcommands run the
	// roles and NATS.
	SwitchyardBin string
	// Topology is how many edges, routers and workers to run; each at
	// least 1.
	Topology report.Topology
	// Upstreams are the upstreams in the generated configuration.
	Upstreams []Upstream
	// LogDir receives the generated configuration (switchyard.yaml) and
	// one log file per process (nats.log, tenancy-svc.log, router-1.log,
	// worker-1.log, edge-1.log, ...); it is created if needed.
	LogDir string
	// Protocol is the protocol version of the readiness checks' sessions.
	Protocol string
	// WantTools is how many tools every edge must list, including
	// <upstream>__echo of every upstream, before the cluster counts as
	// started.
	WantTools int
	// WorkerEnv, if not nil, returns extra environment entries (KEY=VALUE)
	// for worker i, counting from 1. Stdio upstreams inherit them.
	WorkerEnv func(i int) []string
	// NATS is the bus's security: [NATSTLS] (the default, ""),
	// [NATSCreds] or [NATSNone].
	NATS string
	// IdleRSSAfter, when positive, is how long StartCluster waits once
	// the cluster is ready before reading every gateway process's resident
	// set size into [Cluster.IdleRSS]; 0 skips that (and the wait).
	IdleRSSAfter time.Duration
	// ExtraConfig is appended to the generated configuration (top-level
	// YAML keys the roles read, e.g. "edge:\n  session_evict_after: 10s\n").
	ExtraConfig string
}

// The security of a cluster's bus (ClusterOptions.NATS).
const (
	// NATSTLS: every process authenticates with its identity's creds
	// from `switchyard nats init`, over TLS: the deployment
	// docs/security.md describes.
	NATSTLS = "tls"
	// NATSCreds: the same credentials over plain TCP (`switchyard nats
	// --no-tls`), to measure what TLS costs.
	NATSCreds = "creds"
	// NATSNone: no authentication (`switchyard nats` on loopback).
	NATSNone = "none"
)

// Cluster is a running multi-process gateway: one NATS server, one
// tenancy-svc, and the routers, workers and edges of its topology, each
// its own "switchyard <role>" process.
type Cluster struct {
	Topology report.Topology
	// NATSURL is the NATS server's client URL.
	NATSURL string
	// ConfigPath is the generated configuration, LogDir the directory of
	// the configuration and the logs.
	ConfigPath, LogDir string
	// GOGC is the GOGC value in every process's environment.
	GOGC string
	// GOMAXPROCS is the GOMAXPROCS value in every process's environment
	// (see [GatewayGOMAXPROCS]).
	GOMAXPROCS string

	NATS, Tenancy           *Process
	Routers, Workers, Edges []*Process
	// EdgeURLs are the edges' MCP endpoints, in the order of Edges.
	EdgeURLs []string
	// NotUp names the workers that had not logged an upstream up within
	// [WorkerUpTimeout] once the edges listed the tools; normally empty.
	NotUp []string
	// IdleRSS is every gateway process's RSS (NATS, tenancy-svc, routers,
	// workers, edges, in that order) [ClusterOptions.IdleRSSAfter] after
	// the cluster was ready, before any load; nil unless asked for or
	// where /proc is not available (a process whose status cannot be read
	// is left out).
	IdleRSS *report.IdleRSS

	bin string
	// store is the NATS server's JetStream store, a fresh temporary
	// directory removed by Stop: `switchyard nats` keeps its default store
	// (<tmp>/switchyard-nats-<port>) across runs, and a later run on the
	// same port would start from this one's streams and buckets.
	store string
}

// StartCluster starts NATS, then tenancy-svc, the routers, the workers and
// the edges, and waits until NATS accepts connections, every edge's
// /readyz answers 200 and lists the tools, and (best effort, see
// [Cluster.NotUp]) every worker has its upstreams up. On error nothing is
// left running.
func StartCluster(ctx context.Context, o ClusterOptions) (_ *Cluster, err error) {
	t := o.Topology
	if t.Edges < 1 || t.Routers < 1 || t.Workers < 1 {
		return nil, fmt.Errorf("launch: cluster needs at least one edge, router and worker, got %s", t)
	}
	if len(o.Upstreams) == 0 || o.LogDir == "" {
		return nil, errors.New("launch: cluster needs upstreams and a log directory")
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Topology: t, LogDir: o.LogDir, bin: o.SwitchyardBin}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	env, rt := gatewayEnv()
	c.GOGC, c.GOMAXPROCS = rt.GOGC, rt.GOMAXPROCS

	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if c.store, err = os.MkdirTemp("", "switchyard-bench-nats-"); err != nil {
		return nil, err
	}
	natsArgs := []string{"nats", "--addr", addr, "--store", c.store}
	var roleArgs []string // the roles' credentials and CA
	switch c.Topology.NATS = o.NATS; o.NATS {
	case "", NATSTLS, NATSCreds:
		if o.NATS == "" {
			c.Topology.NATS = NATSTLS
		}
		dir := filepath.Join(c.store, "auth") // removed with the store
		if out, err := exec.Command(c.bin, "nats", "init", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("launch: switchyard nats init: %w: %s", err, out)
		}
		natsArgs = append(natsArgs, "--auth", dir)
		roleArgs = []string{"--nats-creds", dir}
		c.NATSURL = "tls://" + addr
		if c.Topology.NATS == NATSCreds {
			natsArgs = append(natsArgs, "--no-tls")
			c.NATSURL = "nats://" + addr
		} else {
			roleArgs = append(roleArgs, "--nats-ca", filepath.Join(dir, "ca.pem"))
		}
	case NATSNone:
		c.NATSURL = "nats://" + addr
	default:
		return nil, fmt.Errorf("launch: NATS security %q: want %s, %s or %s", o.NATS, NATSTLS, NATSCreds, NATSNone)
	}
	if c.NATS, err = c.start("nats", env, newLineWatcher(""), natsArgs...); err != nil {
		return nil, err
	}
	if err := c.wait(ctx, "NATS to accept connections on "+addr, []*Process{c.NATS}, dials(addr)); err != nil {
		return nil, err
	}

	c.ConfigPath = filepath.Join(o.LogDir, "switchyard.yaml")
	if err := os.WriteFile(c.ConfigPath, []byte(ClusterConfigYAML(c.NATSURL, o.Upstreams)+o.ExtraConfig), 0o644); err != nil {
		return nil, err
	}
	common := slices.Concat([]string{"--config", c.ConfigPath, "--nats", c.NATSURL, "--log-format", "json"}, roleArgs)
	if c.Tenancy, err = c.start("tenancy-svc", env, newLineWatcher(""), slices.Concat([]string{"tenancy-svc"}, common)...); err != nil {
		return nil, err
	}
	for i := 1; i <= t.Routers; i++ {
		p, err := c.start(fmt.Sprintf("router-%d", i), env, newLineWatcher(""), slices.Concat([]string{"router"}, common)...)
		if err != nil {
			return nil, err
		}
		c.Routers = append(c.Routers, p)
	}
	for i := 1; i <= t.Workers; i++ {
		id := WorkerID(i)
		wenv := env
		if o.WorkerEnv != nil {
			wenv = slices.Concat(env, o.WorkerEnv(i))
		}
		p, err := c.start(id, wenv, newContainsWatcher(workerUpLine), slices.Concat([]string{"upstream-worker"}, common, []string{"--id", id})...)
		if err != nil {
			return nil, err
		}
		c.Workers = append(c.Workers, p)
	}
	var ready []func(context.Context) bool
	for i := 1; i <= t.Edges; i++ {
		id := EdgeID(i)
		listen, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p, err := c.start(id, env, newLineWatcher(""), slices.Concat([]string{"edge"}, common, []string{"--id", id, "--listen", listen})...)
		if err != nil {
			return nil, err
		}
		c.Edges = append(c.Edges, p)
		c.EdgeURLs = append(c.EdgeURLs, "http://"+listen+"/mcp")
		ready = append(ready, answers200("http://"+listen+"/readyz"))
	}

	for i, ok := range ready {
		if err := c.wait(ctx, c.Edges[i].Name+"'s /readyz to answer 200", c.processes(), ok); err != nil {
			return nil, err
		}
	}
	names := make([]string, len(o.Upstreams))
	for i, u := range o.Upstreams {
		names[i] = u.Name
	}
	for i, url := range c.EdgeURLs {
		what := fmt.Sprintf("%s's tools/list to hold %d tools including %s__echo", c.Edges[i].Name, o.WantTools, names[0])
		if err := c.wait(ctx, what, c.processes(), listsTools(url, o.Protocol, names, o.WantTools)); err != nil {
			return nil, err
		}
	}
	c.NotUp = c.waitWorkersUp(ctx, len(o.Upstreams))
	if o.IdleRSSAfter > 0 {
		if c.IdleRSS, err = c.readIdleRSS(ctx, o.IdleRSSAfter); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readIdleRSS waits d (failing if a process exits or ctx ends meanwhile),
// then reads every process's VmRSS, RssAnon and RssFile. It returns nil
// when none could be read.
func (c *Cluster) readIdleRSS(ctx context.Context, d time.Duration) (*report.IdleRSS, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	procs := c.processes()
	exited := make(chan *Process, len(procs))
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	for _, p := range procs {
		go func() {
			select {
			case <-p.Exited():
				exited <- p
			case <-stopWatch:
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("cluster: waiting %v to read idle RSS: %w", d, ctx.Err())
	case p := <-exited:
		return nil, fmt.Errorf("cluster: waiting %v to read idle RSS: %w (logs in %s)", d, p.exitError(), c.LogDir)
	case <-t.C:
	}
	r := &report.IdleRSS{After: d}
	for _, p := range procs {
		if rss, err := procrss.Read(p.PID()); err == nil {
			r.Processes = append(r.Processes, report.ProcessRSS{Process: p.Name, PID: p.PID(), KiB: rss.KiB, AnonKiB: rss.AnonKiB, FileKiB: rss.FileKiB})
		}
	}
	if len(r.Processes) == 0 {
		return nil, nil
	}
	return r, nil
}

// WorkerID returns the id of worker i (counting from 1): "worker-i".
func WorkerID(i int) string { return fmt.Sprintf("worker-%d", i) }

// EdgeID returns the id of edge i (counting from 1): "edge-i".
func EdgeID(i int) string { return fmt.Sprintf("edge-%d", i) }

// start starts "switchyard args..." as name with env, logging to
// LogDir/name.log.
func (c *Cluster) start(name string, env []string, w *lineWatcher, args ...string) (*Process, error) {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = env
	return startLogged(name, cmd, w, filepath.Join(c.LogDir, name+".log"))
}

// wait polls ok until it holds, within [StartTimeout].
func (c *Cluster) wait(ctx context.Context, what string, procs []*Process, ok func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := pollProcs(ctx, what, procs, ok); err != nil {
		return fmt.Errorf("cluster: %w (logs in %s)", err, c.LogDir)
	}
	return nil
}

// waitWorkersUp waits up to [WorkerUpTimeout] for every worker to log
// upstreams upstreams up and returns the names of those that did not.
func (c *Cluster) waitWorkersUp(ctx context.Context, upstreams int) []string {
	ctx, cancel := context.WithTimeout(ctx, WorkerUpTimeout)
	defer cancel()
	var notUp []string
	_ = pollProcs(ctx, "workers", c.processes(), func(context.Context) bool {
		notUp = notUp[:0]
		for _, w := range c.Workers {
			if w.out.count() < upstreams {
				notUp = append(notUp, w.Name)
			}
		}
		return len(notUp) == 0
	})
	return notUp
}

// dials returns a probe that reports whether a TCP connection to addr
// succeeds.
func dials(addr string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
}

// processes returns every process, NATS first, edges last.
func (c *Cluster) processes() []*Process {
	var ps []*Process
	for _, p := range slices.Concat([]*Process{c.NATS, c.Tenancy}, c.Routers, c.Workers, c.Edges) {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// PIDs returns the process ids of every gateway process, NATS included.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.processes() {
		pids = append(pids, p.PID())
	}
	return pids
}

// String describes the cluster for messages.
func (c *Cluster) String() string {
	var pids []string
	for _, p := range c.processes() {
		pids = append(pids, fmt.Sprintf("%s %d", p.Name, p.PID()))
	}
	return fmt.Sprintf("cluster of %s at %s (pids: %s; GOGC=%s, GOMAXPROCS=%s; logs in %s)",
		c.Topology, strings.Join(c.EdgeURLs, " "), strings.Join(pids, ", "), c.GOGC, c.GOMAXPROCS, c.LogDir)
}

// Stop stops the edges, then the workers, the routers, tenancy-svc and
// NATS, the processes of each group in parallel. It is safe to call on a
// partly started cluster and more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for _, group := range [][]*Process{c.Edges, c.Workers, c.Routers, {c.Tenancy}, {c.NATS}} {
		errs = append(errs, stopParallel(group))
	}
	if c.store != "" {
		errs = append(errs, os.RemoveAll(c.store))
	}
	return errors.Join(errs...)
}

// stopParallel stops the non-nil processes of ps at once.
func stopParallel(ps []*Process) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if p != nil {
			wg.Go(func() { errs[i] = p.Stop() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
