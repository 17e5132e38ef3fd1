package router

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// TestRouterTakesCallsOnlyWhenLoaded: a router takes no call before its
// catalog and lists are loaded (here: before the buckets even exist), so
// no client gets "unknown tool" from a router that has not read the
// catalog yet; once they are, it is ready and answers.
func TestRouterTakesCallsOnlyWhenLoaded(t *testing.T) {
	s := natstest.Start(t)
	src := &swapSource{}
	src.set(t, config.DefaultTenants()...)
	r, err := New(Config{PageSize: 2, Tenancy: src, TenancyPoll: 20 * time.Millisecond}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	nc := natstest.Connect(t, s)
	subj, _ := proto.AppendRouteSubject(nil, config.DefaultTenant, proto.OpToolsList)
	req, _ := proto.Marshal(&proto.Request{Method: "tools/list", Tenant: config.DefaultTenant})
	// Not provisioned: the router waits, unsubscribed (no responders).
	for range 3 {
		if _, err := nc.Request(string(subj), req, time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("a router that has not loaded its catalog answered (%v)", err)
		}
		if r.Ready() {
			t.Fatal("ready without a catalog")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	provisiontest.Provision(t, nc)
	deadline := time.Now().Add(10 * time.Second)
	for !r.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("not ready within 10s of the buckets' creation")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	msg, err := nc.Request(string(subj), req, 5*time.Second)
	if err != nil {
		t.Fatalf("a ready router did not answer: %v", err)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(msg.Data, &rep); err != nil || rep.Error != nil {
		t.Fatalf("tools/list: %+v %v", rep.Error, err)
	}
}

// TestRouterNotReadyWhileStoreUnseeded: a router that reads the tenants
// from the store is not ready while tenancy-svc's seeded mark is gone (a
// NATS store lost and being rebuilt), and ready again once it is back.
func TestRouterNotReadyWhileStoreUnseeded(t *testing.T) {
	s := provisiontest.Start(t)
	nc := natstest.Connect(t, s)
	js, _ := jetstream.New(nc)
	seeded, err := js.KeyValue(t.Context(), tenancy.BucketSeeded)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seeded.Put(t.Context(), tenancy.KeySeeded, []byte("1")); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{PageSize: 2, TenancyPoll: 20 * time.Millisecond}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitReady := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for r.Ready() != want {
			if time.Now().After(deadline) {
				t.Fatalf("Ready() stayed %v", !want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady(true)
	if err := seeded.Delete(t.Context(), tenancy.KeySeeded); err != nil {
		t.Fatal(err)
	}
	waitReady(false)
	if _, err := seeded.Put(t.Context(), tenancy.KeySeeded, []byte("1")); err != nil {
		t.Fatal(err)
	}
	waitReady(true)
}
