package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/embedded"
)

const natsUsage = `usage: switchyard nats [flags]                 serve NATS with JetStream
       switchyard nats init DIR [flags]        generate the deployment's NATS auth material
       switchyard nats rotate DIR IDENTITY|all  replace an identity's credentials, revoke the old
       switchyard nats provision [flags]       create (or --update) every bucket and stream
       switchyard nats cert DIR [--host NAME]  issue a new server certificate (renew, add names)

Serve:
  switchyard nats --auth DIR --addr 0.0.0.0:4222 --store /data
    Authenticates every client with the identities in DIR (switchyard nats
    init) and serves TLS with DIR's server certificate. Without --auth it
    refuses a non-loopback address unless --insecure is given.

Cluster (three nodes, the same DIR copied to each; docs/reliability.md):
  switchyard nats --auth DIR --addr 0.0.0.0:4222 --store /data --name n1 \
    --cluster 0.0.0.0:6222 --routes n1.internal:6222,n2.internal:6222,n3.internal:6222
    Routes run over TLS with DIR's server certificate (its names must
    include every node's route host: nats init/cert --host) and present
    DIR's route secret. Roles take every node's URL (nats: tls://n1:4222,
    tls://n2:4222,tls://n3:4222) and fail over between them; buckets get
    three replicas on a cluster of three or more (nats.replicas).

Identities: edge, router, upstream-worker, tenancy-svc, admin, audit, bench;
their permissions come from Switchyard's permission table (docs/security.md).

Run 'switchyard nats <subcommand> -h' for the subcommand's flags.
`

// runNATS runs `switchyard nats` and its subcommands.
func runNATS(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return runNATSInit(args[1:], os.Stdout, os.Stderr)
		case "rotate":
			return runNATSRotate(args[1:], os.Stdout, os.Stderr)
		case "provision":
			return runNATSProvision(args[1:], os.Stdout, os.Stderr)
		case "cert":
			return runNATSCert(args[1:], os.Stdout, os.Stderr)
		}
	}
	return runNATSServe(args, os.Stderr)
}

// runNATSServe runs a standalone NATS server with JetStream.
func runNATSServe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, natsUsage, "\nFlags:\n"); fs.PrintDefaults() }
	addr := fs.String("addr", "127.0.0.1:4222", "client address (host:port)")
	store := fs.String("store", "", "JetStream store directory, kept across restarts (default: <tmp>/switchyard-nats-<port>)")
	authDir := fs.String("auth", os.Getenv("SWITCHYARD_NATS_AUTH"), "auth directory from switchyard nats init: authenticate clients, serve TLS; env SWITCHYARD_NATS_AUTH")
	insecure := fs.Bool("insecure", false, "serve without authentication on a non-loopback address (anyone who can connect owns the deployment)")
	noTLS := fs.Bool("no-tls", false, "with --auth, serve plain TCP (credentials stay signed, traffic is readable on the network)")
	tlsCert := fs.String("tls-cert", "", "server certificate (PEM) instead of DIR/server-cert.pem")
	tlsKey := fs.String("tls-key", "", "server key (PEM) instead of DIR/server-key.pem")
	tlsVerify := fs.Bool("tls-verify", false, "require client certificates signed by DIR/ca.pem (or --tls-client-ca)")
	tlsClientCA := fs.String("tls-client-ca", "", "CA (PEM) client certificates must chain to, with --tls-verify (default DIR/ca.pem)")
	name := fs.String("name", "", "server name, unique in the cluster (default: switchyard, or switchyard-<host>-<port> of --addr in a cluster)")
	clusterAddr := fs.String("cluster", "", "join a NATS cluster: listen for the other nodes' routes on this host:port")
	clusterName := fs.String("cluster-name", "switchyard", "the cluster's name, the same on every node")
	routes := fs.String("routes", "", "seed routes, comma-separated host:port or nats-route://host:port (every node's --cluster address; this node's own may be listed)")
	syncPolicy := fs.String("sync", "1s", `JetStream's flush to disk: an interval, or "always" (every write: ~30 times slower audit ingest); docs/reliability.md`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "switchyard nats: unexpected argument %q\n\n%s", fs.Arg(0), natsUsage)
		return 2
	}
	dir := *store
	if dir == "" {
		_, port, _ := net.SplitHostPort(*addr)
		dir = filepath.Join(os.TempDir(), "switchyard-nats-"+port)
		// A predictable path: use it only if this user made it and
		// nobody else can reach it (another user could plant a store).
		if err := privateDir(dir); err != nil {
			fmt.Fprintln(stderr, "switchyard nats:", err)
			return 1
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fmt.Fprintln(stderr, "switchyard nats:", err)
			return 1
		}
	}
	o := embedded.Options{Addr: *addr, StoreDir: dir, Log: true, Name: *name}
	switch sp := *syncPolicy; sp {
	case "always":
		o.SyncAlways = true
	default:
		d, err := time.ParseDuration(sp)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "switchyard nats: --sync %q: want always or a positive duration\n", sp)
			return 2
		}
		o.SyncInterval = d
	}
	if *clusterAddr != "" {
		if o.Name == "" {
			host, port, _ := net.SplitHostPort(*addr)
			o.Name = "switchyard-" + strings.NewReplacer(".", "-", ":", "-", "[", "", "]", "").Replace(host) + "-" + port
		}
		o.Cluster = &embedded.Cluster{Name: *clusterName, Listen: *clusterAddr}
		for _, r := range strings.Split(*routes, ",") {
			if r = strings.TrimSpace(r); r != "" {
				o.Cluster.Routes = append(o.Cluster.Routes, r)
			}
		}
		if !admin.IsLoopback(*clusterAddr) && *authDir == "" && !*insecure {
			fmt.Fprintf(stderr, "switchyard nats: refusing cluster routes on %s without authentication: any host that can connect could join the cluster and read every message.\n"+
				"  Serve with --auth DIR (routes then present DIR's route secret over TLS), or pass --insecure.\n", *clusterAddr)
			return 2
		}
	}
	loopback := admin.IsLoopback(*addr) // IP literals only: a name may resolve anywhere
	switch {
	case *authDir == "" && !loopback && !*insecure:
		fmt.Fprintf(stderr, "switchyard nats: refusing to serve %s without authentication: anyone who can connect could run commands on every worker, mint API keys and read every call.\n"+
			"  Generate credentials with `switchyard nats init DIR` and serve with --auth DIR (docs/security.md),\n"+
			"  or pass --insecure to serve without authentication on a network you trust.\n", *addr)
		return 2
	case *authDir == "" && *insecure:
		fmt.Fprintf(stderr, "WARNING: NATS on %s without authentication (--insecure): anyone who can connect owns the deployment\n", *addr)
	case *authDir == "":
		fmt.Fprintf(stderr, "NOTE: NATS without authentication: any process on this host can connect and owns the deployment (use --auth DIR for credentials)\n")
	}
	if *tlsVerify && *authDir == "" && *tlsClientCA == "" {
		fmt.Fprintln(stderr, "switchyard nats: --tls-verify needs --auth DIR or --tls-client-ca")
		return 2
	}
	load := func() (embedded.Options, error) {
		if *authDir == "" {
			return o, nil
		}
		conf, err := os.ReadFile(filepath.Join(*authDir, natsauth.FileAuthConf))
		if err != nil {
			return o, fmt.Errorf("auth: %w (create it with switchyard nats init %s)", err, *authDir)
		}
		out := o
		out.AuthConf = string(conf)
		if out.Cluster != nil {
			c := *out.Cluster
			if c.Secret, err = natsauth.RouteSecret(*authDir); err != nil {
				return out, err
			}
			out.Cluster = &c
		}
		if *noTLS {
			return out, nil
		}
		cert, key := *tlsCert, *tlsKey
		if cert == "" {
			cert = filepath.Join(*authDir, natsauth.FileServerCert)
		}
		if key == "" {
			key = filepath.Join(*authDir, natsauth.FileServerKey)
		}
		cb, err := os.ReadFile(cert)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		kb, err := os.ReadFile(key)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		var pool *x509.CertPool
		if *tlsVerify {
			caFile := *tlsClientCA
			if caFile == "" {
				caFile = filepath.Join(*authDir, natsauth.FileCA)
			}
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return out, fmt.Errorf("tls: %w", err)
			}
			pool = x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return out, fmt.Errorf("tls: %s holds no PEM certificate", caFile)
			}
		}
		out.TLS, err = natsauth.ServerTLS(cb, kb, pool)
		if err == nil && out.Cluster != nil {
			err = routeSecurity(&out, *authDir, cb, kb)
		}
		clear(kb)
		return out, err
	}
	cur, err := load()
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats:", err)
		return 1
	}
	if cur.AuthConf != "" && cur.TLS == nil && !loopback {
		fmt.Fprintf(stderr, "WARNING: NATS on %s without TLS (--no-tls): calls, results and audit events cross the network readable\n", *addr)
	}
	ns, err := embedded.Start(cur)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats:", err)
		return 1
	}
	scheme, auth := "nats", ""
	if cur.TLS != nil {
		scheme = "tls"
	}
	if cur.AuthConf != "" {
		auth = ", authenticated by " + filepath.Join(*authDir, natsauth.FileAuthConf)
	}
	fmt.Fprintf(stderr, "NATS (JetStream, max_payload %d%s) listening on %s://%s\n", embedded.MaxPayload, auth, scheme, *addr)
	if c := cur.Cluster; c != nil {
		sec := "unauthenticated"
		if c.Secret != "" {
			sec = "route secret"
		}
		if c.TLS != nil {
			sec += ", TLS"
		}
		fmt.Fprintf(stderr, "cluster %s: node %s, routes on %s (%s), seeds %s\n", c.Name, cur.Name, c.Listen, sec, strings.Join(c.Routes, ","))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *authDir != "" {
		go watchAuth(ctx, ns, filepath.Join(*authDir, natsauth.FileAuthConf), load, stderr)
	}
	<-ctx.Done()
	if cur.Cluster != nil {
		// The other nodes take over: leadership moves, clients move
		// (embedded.LameDuckGrace and LameDuckDuration), then it stops.
		ns.LameDuckShutdown()
	} else {
		ns.Shutdown()
	}
	ns.WaitForShutdown()
	return 0
}

// routeSecurity serves o's routes over TLS with the server certificate
// (cert, key), and verifies the node a route connects to against dir's CA:
// a node's route addresses must be among the certificate's names
// (switchyard nats init --host, switchyard nats cert --host).
func routeSecurity(o *embedded.Options, dir string, cert, key []byte) error {
	ca, err := os.ReadFile(filepath.Join(dir, natsauth.FileCA))
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("routes: %s holds no PEM certificate", natsauth.FileCA)
	}
	t, err := natsauth.ServerTLS(cert, key, nil)
	if err != nil {
		return err
	}
	t.RootCAs = pool
	c := *o.Cluster
	c.TLS = t
	o.Cluster = &c
	return nil
}

// watchAuth applies a changed auth.conf (switchyard nats rotate) to the
// running server: at once on SIGHUP, else within a second of the change.
func watchAuth(ctx context.Context, ns *server.Server, path string, load func() (embedded.Options, error), stderr io.Writer) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last, _ := os.ReadFile(path)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-hup:
			force = true
		case <-t.C:
		}
		cur, err := os.ReadFile(path)
		if err != nil || (!force && bytes.Equal(cur, last)) {
			continue
		}
		last = cur
		o, err := load()
		if err == nil {
			var opts *server.Options
			if opts, err = o.ServerOptions(); err == nil {
				err = ns.ReloadOptions(opts)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "switchyard nats: auth reload failed:", err)
			continue
		}
		fmt.Fprintln(stderr, "switchyard nats: auth reloaded from", path)
	}
}

// runNATSInit writes a deployment's NATS auth material.
func runNATSInit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var hosts multiFlag
	fs.Var(&hosts, "host", "a name or address the server certificate is valid for, besides 127.0.0.1 and localhost (repeatable)")
	clientCerts := fs.Bool("client-certs", false, "also issue a client certificate per identity (for switchyard nats --tls-verify)")
	cfgPath := fs.String("config", os.Getenv("SWITCHYARD_CONFIG"), "config file whose audit.stream the permissions name (default stream SWITCHYARD_AUDIT)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: switchyard nats init DIR [--host NAME]... [--client-certs] [--config FILE]\n\n"+
			"Writes into DIR (created 0700): auth.conf (the server's authorization), one\n"+
			"<identity>.creds per identity (edge, router, upstream-worker, tenancy-svc, admin,\n"+
			"audit, bench), ca.pem, server-cert.pem and server-key.pem, and keys/ (the signing\n"+
			"keys: keep them off the servers; rotate needs them). Give each process only its\n"+
			"own identity's creds and ca.pem.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	dir, rest := splitDirArg(args)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 || dir == "" {
		fs.Usage()
		return 2
	}
	p := proto.AccessParams{}
	if *cfgPath != "" {
		c, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintln(stderr, "switchyard nats init:", err)
			return 2
		}
		p.AuditStream = c.Audit.StreamName()
	}
	if _, err := natsauth.Init(dir, natsauth.InitOptions{Params: p, Hosts: hosts, ClientCerts: *clientCerts}); err != nil {
		fmt.Fprintln(stderr, "switchyard nats init:", err)
		return 1
	}
	abs, _ := filepath.Abs(dir)
	fmt.Fprintf(stdout, "NATS auth material written to %s\n"+
		"  serve:   switchyard nats --auth %s --addr HOST:4222\n"+
		"  roles:   SWITCHYARD_NATS_CREDS=%s/<identity>.creds SWITCHYARD_NATS_CA=%s/%s (or --nats-creds DIR for a process running several roles)\n"+
		"  rotate:  switchyard nats rotate %s <identity>\n", abs, abs, abs, abs, natsauth.FileCA, abs)
	return 0
}

// runNATSRotate replaces one identity's (or every identity's) key.
func runNATSRotate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: switchyard nats rotate DIR IDENTITY|all\n\n"+
			"Gives the identity a new key and credentials (DIR/<identity>.creds, with the\n"+
			"current permission table), revokes its old key, and rewrites DIR/auth.conf.\n"+
			"A server run with --auth DIR reloads it within a second (a plain nats-server:\n"+
			"send it SIGHUP); connections with the old key are then closed and refused, and\n"+
			"the identity's processes reconnect with their creds file, read again (calls in\n"+
			"the second or two between fail with -32067 and can be retried). When the server\n"+
			"reads a copy of auth.conf on another host, copy the new creds to the identity's\n"+
			"hosts first and auth.conf to the server last: the old key works until then.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	dir, which := fs.Arg(0), fs.Arg(1)
	ids := []proto.Identity{proto.Identity(which)}
	if which == "all" {
		ids = proto.Identities
	} else if !proto.ValidIdentity(ids[0]) {
		fmt.Fprintf(stderr, "switchyard nats rotate: unknown identity %q (identities: %v, or all)\n", which, proto.Identities)
		return 2
	}
	m, err := natsauth.LoadDir(dir)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats rotate:", err)
		return 1
	}
	for _, id := range ids {
		if err := m.Rotate(id); err != nil {
			fmt.Fprintln(stderr, "switchyard nats rotate:", err)
			return 1
		}
	}
	if err := m.WriteDir(dir); err != nil {
		fmt.Fprintln(stderr, "switchyard nats rotate:", err)
		return 1
	}
	for _, id := range ids {
		fmt.Fprintf(stdout, "rotated %s: new %s, old key revoked\n", id, filepath.Join(dir, natsauth.CredsFile(id)))
	}
	return 0
}

// runNATSProvision creates (and with --update changes) every bucket and
// stream a deployment needs, as the admin identity.
func runNATSProvision(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c cliNATS
	c.register(fs)
	cfgPath := fs.String("config", os.Getenv("SWITCHYARD_CONFIG"), "the deployment's config file (audit stream settings); env SWITCHYARD_CONFIG")
	update := fs.Bool("update", false, "also change existing buckets and streams to the config (admin identity only; a smaller audit limit drops the oldest events)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the whole run")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: switchyard nats provision [--config FILE] [--update] [--nats URL --creds admin.creds --nats-ca ca.pem]\n\n"+
			"Creates every KV bucket, the audit stream and the fleet's shared secrets that are\n"+
			"missing (tenancy-svc does the same at start). Buckets and streams that exist with\n"+
			"another configuration are reported; --update changes them, which only the admin\n"+
			"identity may do.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats provision:", err)
		return 2
	}
	nc, id, err := c.connectID("switchyard-nats-provision", *timeout, proto.IdentityAdmin, proto.IdentityTenancy)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats provision:", err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats provision:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// Only tenancy-svc may write the secrets; as admin, missing ones are
	// reported (tenancy-svc creates them at start). As tenancy-svc, the
	// task key is tasks.key_file's, as tenancy-svc would make it.
	plan := provision.FromFile(cfg)
	if id == proto.IdentityTenancy {
		key, err := cfg.Tasks.Key(os.ReadFile)
		if err != nil {
			fmt.Fprintln(stderr, "switchyard nats provision:", err)
			return 1
		}
		if key != nil {
			plan.Fixed = map[string][]byte{proto.KeyTasks: key}
		}
	}
	res, err := provision.Ensure(ctx, js, plan, provision.Options{Update: *update, CreateSecrets: id == proto.IdentityTenancy})
	for _, w := range res.Created {
		fmt.Fprintln(stdout, "created", w)
	}
	for _, w := range res.Updated {
		fmt.Fprintln(stdout, "updated", w)
	}
	for _, w := range res.Drift {
		fmt.Fprintln(stdout, "differs from the config (use --update to change it):", w)
	}
	for _, w := range res.Missing {
		fmt.Fprintln(stdout, "missing (tenancy-svc creates it at start):", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchyard nats provision:", err)
		return 1
	}
	if len(res.Created)+len(res.Updated)+len(res.Drift)+len(res.Missing) == 0 {
		fmt.Fprintln(stdout, "every bucket and stream is as the config says")
	}
	return 0
}

// runNATSCert issues a new server certificate from DIR's CA: to renew it
// (valid natsauth.CertValidity) or to add names the server is reached
// by. A server run with --auth DIR reads it when it starts: restart it.
func runNATSCert(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nats cert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var hosts multiFlag
	fs.Var(&hosts, "host", "a name or address the certificate is valid for, besides 127.0.0.1, ::1 and localhost (repeatable; the old certificate's are not kept)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: switchyard nats cert DIR [--host NAME]...\n\n"+
			"Issues a new server certificate and key (DIR/server-cert.pem, server-key.pem)\n"+
			"from the CA of switchyard nats init (DIR/ca.pem, DIR/keys/ca-key.pem), valid for\n"+
			"the loopback names and every --host: to renew it, or to add a name. Clients\n"+
			"keep trusting ca.pem. Restart the server to serve it.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	dir, rest := splitDirArg(args)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := natsauth.RenewServerCert(dir, hosts); err != nil {
		fmt.Fprintln(stderr, "switchyard nats cert:", err)
		return 1
	}
	if err := natsauth.EnsureRouteSecret(dir); err != nil { // a directory made before clusters
		fmt.Fprintln(stderr, "switchyard nats cert:", err)
		return 1
	}
	fmt.Fprintf(stdout, "new server certificate in %s (restart the server to serve it)\n", filepath.Join(dir, natsauth.FileServerCert))
	return 0
}

// splitDirArg takes a leading positional argument (the directory) off
// args, so flags may follow it.
func splitDirArg(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// cliNATS are the NATS connection flags of the admin CLIs.
type cliNATS struct {
	url, creds, ca, cert, key string
}

// register adds --nats, --creds, --nats-ca, --nats-cert and --nats-key
// to fs, defaulting from the SWITCHYARD_NATS* environment.
func (c *cliNATS) register(fs *flag.FlagSet) {
	def := os.Getenv("SWITCHYARD_NATS")
	if def == "" {
		def = config.DefaultNATS
	}
	fs.StringVar(&c.url, "nats", def, "NATS server URL; env SWITCHYARD_NATS")
	fs.StringVar(&c.creds, "creds", os.Getenv("SWITCHYARD_NATS_CREDS"), "NATS credentials file, or the directory of switchyard nats init (each command takes its identity's file); env SWITCHYARD_NATS_CREDS")
	fs.StringVar(&c.creds, "nats-creds", os.Getenv("SWITCHYARD_NATS_CREDS"), "the same as --creds (the roles' name for it)")
	fs.StringVar(&c.ca, "nats-ca", os.Getenv("SWITCHYARD_NATS_CA"), "CA (PEM) of the NATS server's certificate; env SWITCHYARD_NATS_CA")
	fs.StringVar(&c.cert, "nats-cert", os.Getenv("SWITCHYARD_NATS_CERT"), "client certificate (PEM); env SWITCHYARD_NATS_CERT")
	fs.StringVar(&c.key, "nats-key", os.Getenv("SWITCHYARD_NATS_KEY"), "client certificate key (PEM); env SWITCHYARD_NATS_KEY")
}

// connect dials as identity want (or one of also, as the credentials
// say); errors never show the URL's user information.
func (c *cliNATS) connect(name string, timeout time.Duration, want proto.Identity, also ...proto.Identity) (*nats.Conn, error) {
	nc, _, err := c.connectID(name, timeout, want, also...)
	return nc, err
}

// connectID is connect that also returns the identity connected as.
func (c *cliNATS) connectID(name string, timeout time.Duration, want proto.Identity, also ...proto.Identity) (*nats.Conn, proto.Identity, error) {
	n := config.NATSFile{URL: c.url, Creds: c.creds, CA: c.ca, Cert: c.cert, Key: c.key}
	opts, id, err := app.NATSOptions(n, want, name, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), also...)
	if err != nil {
		return nil, "", err
	}
	nc, err := nats.Connect(c.url, append(opts, nats.Timeout(timeout))...)
	if err != nil {
		return nil, "", fmt.Errorf("connect %s: %w", config.RedactURL(c.url), err)
	}
	return nc, id, nil
}

// runProbe exits 0 if the URL answers 2xx within 2s (for healthchecks in
// images that have no shell or curl).
func runProbe(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: switchyard probe URL")
		return 2
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "probe: status", resp.Status)
		return 1
	}
	return 0
}
