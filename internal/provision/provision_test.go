package provision_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natsauthtest"
)

// TestProvisionAsOwners runs the plan with the identities that own it,
// on a server enforcing the permission table: the admin identity creates
// the buckets and the stream and reports the secrets it may not write,
// quickly and without error; tenancy-svc creates the secrets; a second
// run finds nothing to do; a changed stream is drift until the admin
// updates it.
func TestProvisionAsOwners(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	js := func(id proto.Identity) jetstream.JetStream {
		j, err := jetstream.New(srv.Connect(t, id))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	admin, tenancy := js(proto.IdentityAdmin), js(proto.IdentityTenancy)
	plan := provision.Plan{KV: provision.Buckets(), Secrets: provision.Secrets(),
		Streams: []jetstream.StreamConfig{audit.StreamConfig{}.JetStreamConfig()}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	start := time.Now()
	r, err := provision.Ensure(ctx, admin, plan, provision.Options{})
	if err != nil {
		t.Fatalf("as admin: %v", err)
	}
	if len(r.Created) != len(plan.KV)+1 || len(r.Missing) != 2 {
		t.Fatalf("as admin: %+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("as admin took %v: a refused write waited out a timeout", d)
	}
	r, err = provision.Ensure(ctx, tenancy, plan, provision.Options{CreateSecrets: true})
	if err != nil || !slices.Equal(r.Created, []string{"secret switchyard_keys/tasks", "secret switchyard_keys/grants"}) {
		t.Fatalf("as tenancy-svc: %+v %v", r, err)
	}
	r, err = provision.Ensure(ctx, admin, plan, provision.Options{})
	if err != nil || len(r.Created)+len(r.Missing)+len(r.Drift)+len(r.Updated) != 0 {
		t.Fatalf("second run as admin: %+v %v", r, err)
	}

	changed := plan
	changed.Streams = []jetstream.StreamConfig{audit.StreamConfig{MaxAge: time.Hour}.JetStreamConfig()}
	r, err = provision.Ensure(ctx, tenancy, changed, provision.Options{CreateSecrets: true})
	if err != nil || !slices.Equal(r.Drift, []string{"stream " + proto.DefaultAuditStream}) {
		t.Fatalf("changed stream as tenancy-svc: %+v %v", r, err)
	}
	r, err = provision.Ensure(ctx, admin, changed, provision.Options{Update: true})
	if err != nil || !slices.Equal(r.Updated, []string{"stream " + proto.DefaultAuditStream}) {
		t.Fatalf("changed stream as admin with update: %+v %v", r, err)
	}
	st, err := admin.Stream(ctx, proto.DefaultAuditStream)
	if err != nil || st.CachedInfo().Config.MaxAge != time.Hour {
		t.Fatalf("stream after update: %v", err)
	}
}
