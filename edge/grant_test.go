package edge

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeRouteGrant: once a router's placement note granted a tool's
// route, the edge sends that tool's calls straight to the worker on its
// grant subject, as the router would have (upstream and upstream's name
// filled, same session) with the router's token;
// a list_changed event drops the grant (the client may just have been told
// the tool is gone); a granted worker that is gone (no responders) costs
// the client nothing: the call goes through a router.
func TestEdgeRouteGrant(t *testing.T) {
	var routed, served atomic.Int32
	grant, _ := proto.Marshal(&proto.RouteGrant{Upstream: "up", Name: "echo", Workers: []string{"w-1"}, Token: []byte("router-mac")})
	var g *rig
	g = newRig(t, func(m *nats.Msg) {
		routed.Add(1)
		note := &nats.Msg{Subject: m.Reply, Data: grant, Header: nats.Header{proto.HdrPlaced: []string{"w-1"}}}
		_ = g.nc.PublishMsg(note)
		reply(g.nc, m, &proto.Reply{Result: []byte(`{"content":[],"by":"router"}`)})
	})
	g.e.grants.ttl = time.Hour // no grant runs out during the test
	var sessions []string
	worker, err := g.nc.Subscribe("switchyard.v1.grant.w-1.tools_call", func(m *nats.Msg) {
		var req proto.Request
		if err := proto.Unmarshal(m.Data, &req); err != nil || req.Upstream != "up" || req.Name != "echo" || string(req.Grant) != "router-mac" {
			reply(g.nc, m, &proto.Reply{Error: proto.Errorf(proto.CodeInternal, "worker got %+v (%v)", req, err)})
			return
		}
		served.Add(1)
		sessions = append(sessions, req.Session)
		reply(g.nc, m, &proto.Reply{Result: []byte(`{"content":[],"by":"worker"}`), Worker: "w-1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	g.initialize()
	call := func(want string) {
		t.Helper()
		res, rpcErr := g.call("tools/call", `{"name":"up__echo","arguments":{}}`)
		if rpcErr != nil {
			t.Fatalf("call: %+v", rpcErr)
		}
		if got := string(res); got != fmt.Sprintf(`{"content":[],"by":%q}`, want) {
			t.Fatalf("answered %s, want by %s", got, want)
		}
	}
	call("router")
	for range 3 {
		call("worker")
	}
	if routed.Load() != 1 || served.Load() != 3 {
		t.Fatalf("routed %d, served directly %d; want 1 and 3", routed.Load(), served.Load())
	}
	rc := labelled(gather(t, g.e), "switchyard_edge_route_cache_total")
	if rc["hit"] != 3 || rc["miss"] != 1 {
		t.Fatalf("switchyard_edge_route_cache_total %v, want hit 3, miss 1", rc)
	}
	for _, s := range sessions {
		if s != g.sid {
			t.Fatalf("worker saw session %q, want %q", s, g.sid)
		}
	}

	// list_changed drops the grant before the client hears of it.
	key := routeKey{config.DefaultTenant, "", "up__echo"}
	ev, _ := proto.Marshal(&proto.ListChanged{Tenant: config.DefaultTenant, Kind: proto.KindTools})
	if err := g.nc.Publish(proto.Prefix+"evt.list_changed."+config.DefaultTenant, ev); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "grant dropped on list_changed", func() bool { gr, _ := g.e.grants.get(key, time.Now()); return gr == nil })
	call("router")
	call("worker")

	// The worker goes away: the granted call reaches no one and is placed
	// through the router.
	if err := worker.Unsubscribe(); err != nil || g.nc.Flush() != nil {
		t.Fatal(err)
	}
	before := routed.Load()
	call("router")
	if routed.Load() != before+1 {
		t.Fatalf("routed %d times for one call after the worker left", routed.Load()-before)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
