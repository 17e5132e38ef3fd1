// Package natsauthtest starts embedded NATS servers for tests with
// Switchyard's authentication on: operator mode with one user per
// identity (internal/natsauth), each with exactly the permissions of
// proto.AccessTable. Connections record every permission violation the
// server reports, so a test fails when a role touches a subject the
// table does not give it.
package natsauthtest

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// Server is a running authenticated server.
type Server struct {
	*server.Server
	Material *natsauth.Material
	store    string

	mu         sync.Mutex
	violations []string // guarded by mu
}

// Start runs an embedded server (JetStream, a random loopback port, a
// per-test store) that authenticates with new material for p, shut down
// by t.Cleanup. At cleanup the test fails if any connection made with
// [Server.Connect] saw a permission violation.
func Start(t testing.TB, p proto.AccessParams) *Server {
	t.Helper()
	m, err := natsauth.Generate(p)
	if err != nil {
		t.Fatalf("natsauthtest: %v", err)
	}
	conf, err := m.ServerConfig()
	if err != nil {
		t.Fatalf("natsauthtest: %v", err)
	}
	store := t.TempDir()
	opts, err := options(conf, "127.0.0.1", -1, store)
	if err != nil {
		t.Fatalf("natsauthtest: %v", err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natsauthtest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		s.Shutdown()
		t.Fatal("natsauthtest: server not ready within 5s")
	}
	srv := &Server{Server: s, Material: m, store: store}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
		if v := srv.Violations(); len(v) > 0 {
			t.Errorf("natsauthtest: permission violations: %q", v)
		}
	})
	return srv
}

// Violations returns the permission violations seen so far, as
// "<identity>: <error>".
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Options returns the options of an in-process connection as id: its
// credentials and inbox prefix, and an error handler recording
// permission violations.
func (s *Server) Options(id proto.Identity) []nats.Option {
	u := s.Material.Users[id]
	return []nats.Option{
		nats.InProcessServer(s.Server),
		nats.Name("test-" + string(id)),
		nats.UserJWTAndSeed(u.JWT, string(u.Seed)),
		nats.CustomInboxPrefix(id.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				s.mu.Lock()
				s.violations = append(s.violations, string(id)+": "+err.Error())
				s.mu.Unlock()
			}
		}),
	}
}

// Connect returns an in-process connection as id, closed by t.Cleanup.
func (s *Server) Connect(t testing.TB, id proto.Identity, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", append(s.Options(id), opts...)...)
	if err != nil {
		t.Fatalf("natsauthtest: connect as %s: %v", id, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func options(conf, host string, port int, store string) (*server.Options, error) {
	opts := &server.Options{}
	if err := opts.ProcessConfigString(conf); err != nil {
		return nil, err
	}
	opts.Host, opts.Port = host, port
	opts.JetStream, opts.StoreDir = true, store
	opts.NoLog, opts.NoSigs = true, true
	opts.MaxPayload = natstest.MaxPayload
	return opts, nil
}

// Rotate gives id a new key (revoking the old one, natsauth.Material.
// Rotate) and reloads the server's authorization, as switchyard nats
// rotate and a reload do. Connections with the old key are closed.
func (s *Server) Rotate(t testing.TB, id proto.Identity) {
	t.Helper()
	if err := s.Material.Rotate(id); err != nil {
		t.Fatal(err)
	}
	conf, err := s.Material.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := options(conf, "127.0.0.1", s.Addr().(*net.TCPAddr).Port, s.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadOptions(opts); err != nil {
		t.Fatalf("natsauthtest: reload: %v", err)
	}
}
