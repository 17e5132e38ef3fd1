package provision_test

import (
	"bytes"
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

// TestProvisionFixedTaskKey: a task key from configuration (Plan.Fixed)
// is what tenancy-svc creates, what it sets over a random key already
// there, and, the store lost and made again, what the new store gets: task
// ids keep opening. A run that finds it in place changes nothing.
func TestProvisionFixedTaskKey(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	tenancy, err := jetstream.New(srv.Connect(t, proto.IdentityTenancy))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	key := bytes.Repeat([]byte{7}, provision.SecretBytes)
	random := provision.Plan{KV: provision.Buckets(), Secrets: provision.Secrets()}
	fixed := random
	fixed.Fixed = map[string][]byte{proto.KeyTasks: key}
	value := func() []byte {
		kv, err := tenancy.KeyValue(ctx, proto.BucketKeys)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, proto.KeyTasks)
		if err != nil {
			t.Fatal(err)
		}
		return e.Value()
	}
	if _, err := provision.Ensure(ctx, tenancy, random, provision.Options{CreateSecrets: true}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(value(), key) {
		t.Fatal("a random key equals the fixed one")
	}
	r, err := provision.Ensure(ctx, tenancy, fixed, provision.Options{CreateSecrets: true})
	if err != nil || !slices.Equal(r.Updated, []string{"secret switchyard_keys/tasks"}) || !bytes.Equal(value(), key) {
		t.Fatalf("over a random key: %+v %v", r, err)
	}
	if r, err := provision.Ensure(ctx, tenancy, fixed, provision.Options{CreateSecrets: true}); err != nil || len(r.Updated)+len(r.Created) != 0 {
		t.Fatalf("in place: %+v %v", r, err)
	}
	// The store lost: every bucket gone, then made again.
	admin, _ := jetstream.New(srv.Connect(t, proto.IdentityAdmin))
	for _, c := range provision.Buckets() {
		if err := admin.DeleteKeyValue(ctx, c.Bucket); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := provision.Ensure(ctx, admin, fixed, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	r, err = provision.Ensure(ctx, tenancy, fixed, provision.Options{CreateSecrets: true})
	if err != nil || !slices.Contains(r.Created, "secret switchyard_keys/tasks") || !bytes.Equal(value(), key) {
		t.Fatalf("after the store was lost: %+v %v", r, err)
	}
}
