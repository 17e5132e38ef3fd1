// Package provisiontest creates on a test's NATS server what tenancy-svc
// provisions in a deployment (internal/provision): every KV bucket and
// the fleet's shared secrets, so that a test can run a role (which only
// opens them, and waits until they exist) without a tenancy-svc.
package provisiontest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// Provision creates every bucket and secret over nc (idempotent).
func Provision(t testing.TB, nc *nats.Conn) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("provisiontest: %v", err)
	}
	if _, err := provision.Ensure(t.Context(), js, provision.Plan{KV: provision.Buckets(), Secrets: provision.Secrets()}, provision.Options{CreateSecrets: true}); err != nil {
		t.Fatalf("provisiontest: %v", err)
	}
}

// Start is natstest.Start with every bucket and secret provisioned.
func Start(t testing.TB) *server.Server {
	t.Helper()
	s := natstest.Start(t)
	Provision(t, natstest.Connect(t, s))
	return s
}
