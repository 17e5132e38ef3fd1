// Package natstest starts embedded NATS servers for tests: JetStream on a
// per-test store, a random port, shut down by t.Cleanup.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// MaxPayload is the max_payload the test servers run with, matching
// `switchyard dev` and `switchyard nats`.
const MaxPayload = 8 << 20

// Start runs an embedded NATS server with JetStream on a random TCP port
// and returns it once it is ready for connections.
func Start(t testing.TB) *server.Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with the server's options changed by edit (nil: none)
// before it starts.
func StartWith(t testing.TB, edit func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: MaxPayload,
	}
	if edit != nil {
		edit(opts)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		s.Shutdown()
		t.Fatal("natstest: server not ready within 5s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect returns an in-process connection to s, closed by t.Cleanup.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.InProcessServer(s)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
