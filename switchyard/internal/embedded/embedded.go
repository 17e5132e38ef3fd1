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
	"strconv"
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
	opts.ServerName = "switchyard"
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
