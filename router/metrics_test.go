package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// metricsRig is newRig with the router's metrics in reg, tenant A
// (tenantA) and upstream a (tools echo and secret_x, prompts greet and
// hidden, resources a://doc and a://secret) served by worker w-a.
func metricsRig(t *testing.T, reg prometheus.Registerer) *rig {
	s := provisiontest.Start(t)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := bus.Bucket(t.Context(), js, proto.BucketUpstreams)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := bus.Bucket(t.Context(), js, proto.BucketLists)
	if err != nil {
		t.Fatal(err)
	}
	src := &swapSource{}
	src.set(t, tenantA())
	r, err := New(Config{ID: "router-m", Tenancy: src, TenancyPoll: 20 * time.Millisecond, Metrics: reg}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs := r.Checks(); !hasCheck(cs, "subscriptions", admin.StatusFail) {
		t.Errorf("checks before Run: %v, want subscriptions failing", cs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("router did not stop")
		}
	})
	c := bus.NewCaller(nc, 0)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, nc: nc, caller: c, kv: kv, tools: tools, r: r, src: src}
	g.upstream("a", "echo", "secret_x")
	g.list("a", proto.KindPrompts, "name", "greet", "hidden")
	g.list("a", proto.KindResources, "uri", "a://doc", "a://secret")
	g.worker("w-a", map[string]bool{"a": true})
	eventually(t, func() error {
		if !r.Ready() || !r.presence.View().Up("a") || r.snap.Load().List(proto.KindResources, "").Len() != 2 {
			return errors.New("not ready")
		}
		return nil
	})
	return g
}

func hasCheck(cs []admin.Check, name string, st admin.Status) bool {
	for _, c := range cs {
		if c.Name == name && c.Status == st {
			return true
		}
	}
	return false
}

// TestRouterMetrics: routed calls and refusals are counted by method and
// outcome, policy denials by kind (the client sees an unknown name), list
// lookups as cache hits and misses.
func TestRouterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := metricsRig(t, reg)
	for _, c := range g.r.Checks() {
		if c.Status == admin.StatusFail {
			t.Errorf("check %s fails once ready: %s", c.Name, c.Detail)
		}
	}
	calls := []struct {
		op  string
		req proto.Request
		ok  bool
	}{
		{proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo"}, true},
		{proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo"}, true},
		{proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__secret_x"}, false},        // denied: tools
		{proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__nope"}, false},            // unknown, not a denial
		{proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "a__hidden"}, false},        // denied: prompts
		{proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "a://secret"}, false}, // denied: resources
		{proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "a://doc"}, true},
		{proto.OpToolsList, proto.Request{Method: "tools/list"}, true}, // cache miss
		{proto.OpToolsList, proto.Request{Method: "tools/list"}, true}, // hit
	}
	for i, c := range calls {
		_, err := g.callAs("ta", c.op, &c.req)
		if (err == nil) != c.ok {
			t.Fatalf("call %d (%s %s): err %v, want ok=%v", i, c.req.Method, c.req.Name, err, c.ok)
		}
	}
	// The router records after answering: wait for the last one.
	eventually(t, func() error {
		if n := testutil.CollectAndCount(reg, "switchyard_router_handling_seconds"); n != 6 {
			return fmt.Errorf("%d handling series", n)
		}
		return nil
	})
	const want = `
# HELP switchyard_router_list_cache_total Lookups of a tenant's filtered list in the router's cache, by result (hit or miss).
# TYPE switchyard_router_list_cache_total counter
switchyard_router_list_cache_total{result="hit"} 1
switchyard_router_list_cache_total{result="miss"} 1
# HELP switchyard_router_policy_denials_total Requests a tenant's policy refused at the router, by kind (tools, prompts, resources, upstreams).
# TYPE switchyard_router_policy_denials_total counter
switchyard_router_policy_denials_total{kind="prompts"} 1
switchyard_router_policy_denials_total{kind="resources"} 1
switchyard_router_policy_denials_total{kind="tools"} 1
switchyard_router_policy_denials_total{kind="upstreams"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchyard_router_list_cache_total", "switchyard_router_policy_denials_total"); err != nil {
		t.Error(err)
	}
	counts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_router_handling_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetValue())
			}
			counts[strings.Join(ls, " ")] = m.GetHistogram().GetSampleCount()
		}
	}
	wantCounts := map[string]uint64{
		"tools/call ok":                 2,
		"tools/call invalid_params":     2,
		"prompts/get invalid_params":    1,
		"resources/read invalid_params": 1,
	}
	for k, v := range wantCounts {
		if counts[k] != v {
			t.Errorf("handling %s: %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if counts["resources/read ok"] != 1 || counts["tools/list ok"] != 2 {
		t.Errorf("handling counts: %v", counts)
	}
	// The mailbox gauge: present, and empty once every call was answered.
	const idle = `
# HELP switchyard_router_intake_pending_messages Calls delivered to the router's intake subscriptions and not yet handled (its mailbox).
# TYPE switchyard_router_intake_pending_messages gauge
switchyard_router_intake_pending_messages 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(idle), "switchyard_router_intake_pending_messages"); err != nil {
		t.Error(err)
	}
}

// TestRouterMicroService: a running router answers $SRV.PING and INFO as
// switchyard-router, with its id in the metadata.
func TestRouterMicroService(t *testing.T) {
	g := metricsRig(t, nil)
	for _, verb := range []string{"PING", "INFO"} {
		msg, err := g.nc.Request("$SRV."+verb+"."+MicroService, nil, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
		var id struct {
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(msg.Data, &id); err != nil || id.Name != MicroService || id.Metadata["id"] != "router-m" {
			t.Errorf("%s answer %s (%v), want name %s and metadata id router-m", verb, msg.Data, err, MicroService)
		}
	}
}
