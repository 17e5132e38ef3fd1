package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The hosts of the deployment: three NATS nodes, and two hosts of roles.
var (
	natsHosts = []string{"n1", "n2", "n3"}
	appHosts  = []string{"a1", "a2"}
)

// Ports every host uses (each host has its own addresses).
const (
	natsPort    = 4222
	routePort   = 6222
	edgePort    = 8080
	adminTenant = 9100
	adminRouter = 9101
	adminWorker = 9102
	adminEdge   = 9103
)

// Deployment is Switchyard on the hosts of a [Net]: a 3-node NATS cluster
// (n1, n2, n3), tenancy-svc, router-1, upstream-worker-1 and edge-1 on a1,
// router-2, upstream-worker-2 and edge-2 on a2, each its own process.
type Deployment struct {
	Net *Net
	// Procs are every process, NATS nodes first, by name.
	Procs  []*proc
	byName map[string]*proc
	dir    string
	// Edges are the edges' host:port, for the balancer.
	Edges []string
}

// DeployOptions configures [Deploy].
type DeployOptions struct {
	// Bin is the switchyard binary.
	Bin string
	// Dir receives the NATS credentials, stores, configuration and one
	// log per process.
	Dir string
	// Upstream is the upstream MCP server's URL, reachable from the hosts.
	Upstream string
	// ExtraConfig is appended to the configuration (top-level YAML).
	ExtraConfig string
}

// Deploy starts the deployment on n and waits until every process is
// ready; on error it stops what it started.
func Deploy(ctx context.Context, n *Net, o DeployOptions) (_ *Deployment, err error) {
	d := &Deployment{Net: n, byName: map[string]*proc{}, dir: o.Dir}
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	logs := filepath.Join(o.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	auth := filepath.Join(o.Dir, "nats-auth")
	initArgs := []string{"nats", "init", auth}
	for _, h := range natsHosts {
		initArgs = append(initArgs, "--host", n.IP(h))
	}
	if out, err := exec.CommandContext(ctx, o.Bin, initArgs...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("switchyard nats init: %v: %s", err, out)
	}
	key, err := exec.CommandContext(ctx, o.Bin, "keygen").Output()
	if err != nil {
		return nil, fmt.Errorf("switchyard keygen: %w", err)
	}
	env := []string{"SWITCHYARD_ADMIN_KEY=" + strings.TrimSpace(string(key)), "GOMAXPROCS=2"}
	var routes, urls []string
	for _, h := range natsHosts {
		routes = append(routes, net.JoinHostPort(n.IP(h), fmt.Sprint(routePort)))
		urls = append(urls, "tls://"+net.JoinHostPort(n.IP(h), fmt.Sprint(natsPort)))
	}
	for _, h := range natsHosts {
		addr := net.JoinHostPort(n.IP(h), fmt.Sprint(natsPort))
		d.add(&proc{name: "nats-" + h, host: h, bin: o.Bin, env: env, args: []string{"nats", "--auth", auth,
			"--addr", addr, "--store", d.store(h), "--name", h,
			"--cluster", net.JoinHostPort(n.IP(h), fmt.Sprint(routePort)), "--routes", strings.Join(routes, ",")},
			ready: func() bool { return dialable(addr) }}, logs)
	}
	cfg := filepath.Join(o.Dir, "switchyard.yaml")
	yaml := fmt.Sprintf("# Written by bench chaos.\nnats: %s\nupstreams:\n  - name: fx\n    url: %s\n%s",
		strings.Join(urls, ","), o.Upstream, o.ExtraConfig)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	common := []string{"--config", cfg, "--nats", strings.Join(urls, ","), "--nats-creds", auth,
		"--nats-ca", filepath.Join(auth, "ca.pem"), "--log-format", "text"}
	role := func(name, host, r string, admin int, extra ...string) {
		a := net.JoinHostPort(n.IP(host), fmt.Sprint(admin))
		args := append(append([]string{r}, common...), "--admin", a)
		d.add(&proc{name: name, host: host, bin: o.Bin, env: env, args: append(args, extra...),
			ready: func() bool { return httpOK("http://" + a + "/readyz") }}, logs)
	}
	role("tenancy-svc", "a1", "tenancy-svc", adminTenant)
	for i, h := range appHosts {
		id := fmt.Sprint(i + 1)
		role("router-"+id, h, "router", adminRouter, "--id", "router-"+id)
		role("worker-"+id, h, "upstream-worker", adminWorker, "--id", "worker-"+id)
	}
	for i, h := range appHosts {
		id := fmt.Sprint(i + 1)
		listen := net.JoinHostPort(n.IP(h), fmt.Sprint(edgePort))
		role("edge-"+id, h, "edge", adminEdge, "--id", "edge-"+id, "--listen", listen)
		d.Edges = append(d.Edges, listen)
	}
	for _, p := range d.Procs {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	if err := d.WaitReady(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Deployment) add(p *proc, logs string) {
	p.net = d.Net
	p.log = filepath.Join(logs, p.name+".log")
	d.Procs = append(d.Procs, p)
	d.byName[p.name] = p
}

func (d *Deployment) store(host string) string { return filepath.Join(d.dir, "store-"+host) }

// note appends a line to the run's steps.log, with the time.
func (d *Deployment) note(line string) {
	f, err := os.OpenFile(filepath.Join(d.dir, "steps.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000"), line)
	f.Close()
}

// Proc returns the process called name, or nil.
func (d *Deployment) Proc(name string) *proc { return d.byName[name] }

// WaitReady waits until every process runs and is ready.
func (d *Deployment) WaitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var notReady []string
		for _, p := range d.Procs {
			if !p.running() || !p.ready() {
				notReady = append(notReady, p.name)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %s (logs in %s)", within, strings.Join(notReady, ", "), filepath.Join(d.dir, "logs"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops every process, roles first (SIGTERM, then SIGKILL after
// 30 s).
func (d *Deployment) Stop() error {
	var errs []error
	for i := len(d.Procs) - 1; i >= 0; i-- {
		errs = append(errs, d.Procs[i].signal(syscall.SIGTERM, true))
	}
	return errors.Join(errs...)
}

// LoseStore stops every NATS node at once (SIGKILL), deletes their stores
// and starts them again: the cluster has lost everything it held.
func (d *Deployment) LoseStore() error {
	for _, h := range natsHosts {
		if err := d.byName["nats-"+h].signal(syscall.SIGKILL, true); err != nil {
			return err
		}
	}
	for _, h := range natsHosts {
		if err := os.RemoveAll(d.store(h)); err != nil {
			return err
		}
	}
	for _, h := range natsHosts {
		if err := d.byName["nats-"+h].start(); err != nil {
			return err
		}
	}
	return nil
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

var probe = &http.Client{Timeout: time.Second}

func httpOK(url string) bool {
	resp, err := probe.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
