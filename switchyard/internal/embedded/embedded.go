// Package embedded starts the NATS server that `switchyard dev` and
// `switchyard nats` run: JetStream on, max_payload raised to 8 MiB (the
// largest size the server accepts without a warning; bigger replies are
// chunked by the roles).
package embedded

import (
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
}

// Start runs a NATS server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	opts := &server.Options{
		JetStream:  true,
		StoreDir:   o.StoreDir,
		MaxPayload: MaxPayload,
		NoSigs:     true,
		NoLog:      !o.Log,
		ServerName: "switchyard",
	}
	if o.Addr == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(o.Addr)
		if err != nil {
			return nil, fmt.Errorf("nats addr %q: %w", o.Addr, err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("nats addr %q: bad port", o.Addr)
		}
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
