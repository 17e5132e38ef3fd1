package router

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// grantOf sends one tools/call for tenant and returns the reply's worker
// and the route grant of its placement note (nil without one).
func (g *rig) grantOf(tenant string, req *proto.Request) (worker string, grant *proto.RouteGrant, err error) {
	data, _ := proto.Marshal(req)
	subj, _ := proto.AppendRouteSubject(nil, tenant, proto.OpToolsCall)
	k := g.caller.New()
	defer k.Close()
	if err := g.nc.PublishRequest(string(subj), k.Reply(), data); err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(g.t.Context(), 5*time.Second)
	defer cancel()
	out, err := k.Wait(ctx)
	if err != nil {
		return "", nil, err
	}
	var rep proto.Reply
	if err := proto.Unmarshal(out, &rep); err != nil {
		return "", nil, err
	}
	if rep.Error != nil {
		return "", nil, rep.Error
	}
	if b := k.Grant(); b != nil {
		grant = &proto.RouteGrant{}
		if err := proto.Unmarshal(b, grant); err != nil {
			return "", nil, err
		}
	}
	return rep.Worker, grant, nil
}

// TestRouterRouteGrant: a routed tools/call's placement note carries a
// grant naming the upstream, the upstream's name of the tool and the live
// workers, and placing by the grant picks the worker the router picked,
// for every session and for the stateless round-robin's set.
func TestRouterRouteGrant(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	g.worker("w-1", map[string]bool{"a": true})
	g.worker("w-2", map[string]bool{"a": true})
	g.worker("w-3", map[string]bool{"a": false}) // down: never in a grant
	eventually(t, func() error {
		if len(g.r.presence.View().ByUpstream["a"]) != 3 || !g.r.Ready() || g.r.grantKey.Load() == nil {
			return errors.New("workers or grant key not seen")
		}
		return nil
	})
	key := g.provisionedGrantKey(t)
	for _, session := range []string{"s-1", "s-2", "s-3", "s-4", "s-5", "s-6", "s-7", "s-8"} {
		req := &proto.Request{Method: "tools/call", Edge: "e-1", Session: session, Name: "a__echo"}
		worker, grant, err := g.grantOf(DefaultTenant, req)
		if err != nil {
			t.Fatal(err)
		}
		if grant == nil {
			t.Fatal("no grant in the placement note")
		}
		ws := slices.Sorted(slices.Values(grant.Workers))
		if grant.Upstream != "a" || grant.Name != "echo" || !slices.Equal(ws, []string{"w-1", "w-2"}) {
			t.Fatalf("grant = %+v, want upstream a, name echo, workers w-1 w-2", grant)
		}
		// The token is the router's MAC with the fleet's key: a worker
		// accepts it for this tenant, upstream and tool only.
		now := time.Now()
		if err := key.Verify(grant.Token, DefaultTenant, "a", "echo", now); err != nil {
			t.Fatalf("grant token: %v", err)
		}
		if err := key.Verify(grant.Token, "other", "a", "echo", now); err == nil {
			t.Fatal("grant token verifies for another tenant")
		}
		if err := key.Verify(grant.Token, DefaultTenant, "a", "echo", now.Add(DefaultGrantValidity+time.Second)); err == nil {
			t.Fatal("grant token verifies after its validity")
		}
		if i := bus.Place(grant.Workers, "e-1", session, "a", nil); grant.Workers[i] != worker {
			t.Fatalf("session %s: the router placed it on %s, the grant places it on %s", session, worker, grant.Workers[i])
		}
	}
}

// TestRouterRouteGrantWithheld: calls that need the router each time get
// no grant: a tool with SEP-2243 parameter headers, and an upstream that
// takes the client's Authorization. A plain tool beside them is granted.
func TestRouterRouteGrantWithheld(t *testing.T) {
	g := newRig(t)
	ls := &proto.ListSet{Upstream: "a", Kind: proto.KindTools, Items: [][]byte{
		[]byte(`{"name":"echo","inputSchema":{"type":"object"}}`),
		[]byte(`{"name":"deploy","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`)}}
	g.catalogOnly("a")
	data, _ := proto.Marshal(ls)
	if _, err := g.tools.Put(t.Context(), proto.ListKey("a", proto.KindTools), data); err != nil {
		t.Fatal(err)
	}
	spec, _ := proto.Marshal(&proto.UpstreamSpec{Name: "c", Transport: proto.TransportStreamable, URL: "http://x",
		Auth: &proto.UpstreamAuth{Passthrough: true}})
	if _, err := g.kv.Put(t.Context(), "c", spec); err != nil {
		t.Fatal(err)
	}
	g.list("c", proto.KindTools, "name", "run")
	g.worker("w-1", map[string]bool{"a": true, "c": true})
	eventually(t, func() error {
		snap := g.r.snap.Load()
		if e, ok := snap.Federated.Lookup("a__deploy"); !ok || len(e.Params) != 1 || !snap.Passthrough("c") ||
			!g.r.presence.View().Up("a") || !g.r.presence.View().Up("c") {
			return errors.New("not ready")
		}
		return nil
	})
	for _, c := range []struct {
		name, tool string
		granted    bool
	}{
		{"plain tool", "a__echo", true},
		{"parameter headers", "a__deploy", false},
		{"authorization passthrough", "c__run", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &proto.Request{Method: "tools/call", Edge: "e-1", Session: "s", Name: c.tool,
				Params: []byte(`{"name":"` + c.tool + `","arguments":{"region":"eu"}}`)}
			_, grant, err := g.grantOf(DefaultTenant, req)
			if err != nil {
				t.Fatal(err)
			}
			if (grant != nil) != c.granted {
				t.Fatalf("grant %+v, want granted %v", grant, c.granted)
			}
		})
	}
}

// TestRouterRevokesGrants: the router publishes on switchyard.v1.evt.routes
// when what grants are made from changes: a worker's upstream going down,
// and the tenancy snapshot.
func TestRouterRevokesGrants(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	g.worker("w-1", map[string]bool{"a": true})
	eventually(t, func() error {
		if !g.r.Ready() || !g.r.presence.View().Up("a") {
			return errors.New("not ready")
		}
		return nil
	})
	revoked := make(chan struct{}, 16)
	sub, err := g.nc.Subscribe(proto.SubjEvtRoutes, func(*nats.Msg) { revoked <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := g.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	drain := func() {
		for {
			select {
			case <-revoked:
			case <-time.After(300 * time.Millisecond): // the rig's tenancy poll is 20 ms
				return
			}
		}
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-revoked:
		case <-time.After(5 * time.Second):
			t.Fatalf("no revocation after %s", what)
		}
	}
	drain()
	g.heartbeat("w-1", map[string]bool{"a": false})
	wait("the upstream went down")
	drain()
	g.src.set(t, tenantA())
	wait("the tenancy snapshot changed")
}

// provisionedGrantKey reads the fleet's grant key from the rig's server.
func (g *rig) provisionedGrantKey(t *testing.T) *grant.Key {
	t.Helper()
	js, err := jetstream.New(g.nc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.Secret(t.Context(), js, proto.KeyGrants, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := grant.NewKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
