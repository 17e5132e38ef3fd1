// Package embedded starts the NATS server that `switchyard dev` and
// `switchyard nats` run: JetStream on, max_payload raised to 8 MiB (the
// largest size the server accepts without a warning; bigger replies are
// chunked by the roles), and, with an authorization configuration
// (internal/natsauth), operator-mode authentication and TLS.
package embedded

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// MaxPayload is the max_payload Switchyard's own servers run with.
const MaxPayload = 8 << 20

// Options configure an embedded server.
type Options struct {
	// Addr is host:port to listen on; "" listens on no TCP port (in-process only).
	Addr string
	// StoreDir holds JetStream data.
	StoreDir string
	// Log enables the server's own logging.
	Log bool
	// AuthConf is the server's authorization in nats-server config syntax
	// (natsauth.Material.ServerConfig: operator, system account, resolver
	// preload); "" runs without authentication.
	AuthConf string
	// TLS is the client listener's TLS configuration; nil: plain TCP.
	// In-process connections never use TLS.
	TLS *tls.Config
	// Name is the server's name, unique in its cluster. "": "switchyard".
	Name string
	// Cluster, if set, makes the server a node of a NATS cluster: it
	// listens for routes and connects to the seed routes, and JetStream
	// runs clustered (a stream or bucket with replicas R keeps R copies
	// on R nodes, and survives the loss of a minority of them).
	Cluster *Cluster
	// SyncInterval is how often JetStream flushes its store to disk;
	// SyncAlways flushes on every write. Zero and false: the server's
	// default (2 minutes). See docs/reliability.md.
	SyncInterval time.Duration
	SyncAlways   bool
}

// A cluster node's lame-duck mode: the wait after telling its clients it
// stops, then the time over which it closes their connections.
const (
	LameDuckGrace    = time.Second
	LameDuckDuration = 3 * time.Second
)

// RouteUser is the user name routes authenticate with (Cluster.Secret is
// its password).
const RouteUser = "switchyard-route"

// Cluster is a node's part in a NATS cluster.
type Cluster struct {
	// Name is the cluster's name, the same on every node.
	Name string
	// Listen is host:port for the routes of the other nodes.
	Listen string
	// Routes are the seed routes: other nodes' route addresses, host:port
	// or nats-route://host:port (this node's own may be among them).
	Routes []string
	// Secret, if set, is the password every route presents (user
	// [RouteUser]), the same on every node; "": routes unauthenticated.
	Secret string
	// TLS, if set, secures the routes: the node serves it and verifies the
	// node it connects to against its RootCAs.
	TLS *tls.Config
}

// ServerOptions returns the nats-server options o describes. The same o
// gives the same options, so a changed AuthConf can be applied to a
// running server with [server.Server.ReloadOptions].
func (o Options) ServerOptions() (*server.Options, error) {
	opts := &server.Options{}
	if o.AuthConf != "" {
		if err := opts.ProcessConfigString(o.AuthConf); err != nil {
			return nil, fmt.Errorf("nats authorization: %w", err)
		}
	}
	opts.JetStream = true
	opts.StoreDir = o.StoreDir
	opts.MaxPayload = MaxPayload
	opts.NoSigs = true
	opts.NoLog = !o.Log
	// A client (or, clustered, a node) cut off without its connection
	// closing is given up on after two unanswered pings, ~2-3 s: what was
	// queued for it is dropped rather than delivered late, and its
	// interest goes, so that messages stop being sent into the cut (edges
	// rely on it: edge/reconnect.go). nats-server's default pings every
	// two minutes.
	opts.PingInterval = time.Second
	opts.MaxPingsOut = 2
	opts.ServerName = "switchyard"
	if o.Name != "" {
		opts.ServerName = o.Name
	}
	opts.SyncInterval, opts.SyncAlways = o.SyncInterval, o.SyncAlways
	if c := o.Cluster; c != nil {
		if err := clusterOptions(opts, c); err != nil {
			return nil, err
		}
	}
	if o.TLS != nil {
		opts.TLSConfig = o.TLS
		opts.TLS = true
		opts.TLSVerify = o.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		opts.TLSTimeout = 2
	}
	if o.Addr == "" {
		opts.DontListen = true
		return opts, nil
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("nats addr %q: %w", o.Addr, err)
	}
	opts.Host = host
	if opts.Port, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("nats addr %q: bad port", o.Addr)
	}
	return opts, nil
}

// clusterOptions sets opts' cluster listener and routes from c.
func clusterOptions(opts *server.Options, c *Cluster) error {
	if c.Name == "" {
		return errors.New("nats cluster: a cluster name is required")
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("nats cluster listen %q: %w", c.Listen, err)
	}
	opts.Cluster.Name = c.Name
	// A node stopping (Server.LameDuckShutdown) hands its streams'
	// leadership over, tells its clients, and closes their connections
	// over LameDuckDuration, so that they move to the other nodes one by
	// one rather than all at once.
	opts.LameDuckGracePeriod = LameDuckGrace
	opts.LameDuckDuration = LameDuckDuration
	opts.Cluster.Host = host
	if opts.Cluster.Port, err = strconv.Atoi(port); err != nil {
		return fmt.Errorf("nats cluster listen %q: bad port", c.Listen)
	}
	if c.Secret != "" {
		opts.Cluster.Username, opts.Cluster.Password = RouteUser, c.Secret
	}
	if c.TLS != nil {
		opts.Cluster.TLSConfig = c.TLS
		opts.Cluster.TLSTimeout = 2
	}
	for _, r := range c.Routes {
		if r == "" {
			continue
		}
		if !strings.Contains(r, "://") {
			r = "nats-route://" + r
		}
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return fmt.Errorf("nats cluster route %q: not host:port or nats-route://host:port", r)
		}
		if c.Secret != "" {
			u.User = url.UserPassword(RouteUser, c.Secret)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// Start runs a NATS server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	opts, err := o.ServerOptions()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	if o.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats server not ready within 10s")
	}
	return s, nil
}
