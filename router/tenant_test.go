package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// Tenants of the isolation tests. A sees upstreams a and c, allows by
// default and denies anything with "secret" in it and the prompt
// a__hidden. B sees only b, denies by default and allows b's tools but
// b__admin, every prompt, and b's resources.
func tenantA() tenancy.Tenant {
	return tenancy.Tenant{Name: "ta", Policy: policy.Spec{Upstreams: []string{"a", "c"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Pattern: "*secret*"},
		{Effect: policy.Deny, Kind: policy.KindPrompts, Pattern: "a__hidden"},
	}}}
}

func tenantB() tenancy.Tenant {
	return tenancy.Tenant{Name: "tb", Policy: policy.Spec{Upstreams: []string{"b"}, Default: policy.Deny, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "b__admin"},
		{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "b__*"},
		{Effect: policy.Allow, Kind: policy.KindPrompts, Pattern: "*"},
		{Effect: policy.Allow, Kind: policy.KindResources, Pattern: "b://*"},
	}}}
}

// tenantRig is a router with tenants A and B over upstreams a, b and c
// (c's spec asks for the client's Authorization), each served by its own
// worker, all up.
func tenantRig(t *testing.T) *rig {
	g := newRig(t)
	g.src.set(t, tenantA(), tenantB())
	g.upstream("a", "echo", "ping", "zap", "secret_x")
	ls := &proto.ListSet{Upstream: "a", Kind: proto.KindTools, Items: [][]byte{
		[]byte(`{"name":"echo"}`), []byte(`{"name":"ping"}`), []byte(`{"name":"zap"}`), []byte(`{"name":"secret_x"}`),
		[]byte(`{"name":"secret_deploy","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`)}}
	data, _ := proto.Marshal(ls)
	if _, err := g.tools.Put(t.Context(), proto.ListKey("a", proto.KindTools), data); err != nil {
		t.Fatal(err)
	}
	g.list("a", proto.KindPrompts, "name", "greet", "hidden")
	g.list("a", proto.KindResources, "uri", "a://doc", "a://secret")
	g.list("a", proto.KindResourceTemplates, "uriTemplate", "a://item/{id}")
	g.upstream("b", "echo", "admin")
	g.list("b", proto.KindPrompts, "name", "p")
	g.list("b", proto.KindResources, "uri", "b://doc")
	g.list("c", proto.KindResources, "uri", "c://r")
	spec, _ := proto.Marshal(&proto.UpstreamSpec{Name: "c", Transport: proto.TransportStreamable, URL: "http://x",
		Auth: &proto.UpstreamAuth{Passthrough: true}})
	if _, err := g.kv.Put(t.Context(), "c", spec); err != nil {
		t.Fatal(err)
	}
	ts := &proto.ListSet{Upstream: "c", Kind: proto.KindTools, Items: [][]byte{[]byte(`{"name":"run"}`)}}
	data, _ = proto.Marshal(ts)
	if _, err := g.tools.Put(t.Context(), proto.ListKey("c", proto.KindTools), data); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"a", "b", "c"} {
		g.worker("w-"+u, map[string]bool{u: true})
	}
	eventually(t, func() error {
		snap := g.r.snap.Load()
		pres := g.r.presence.View()
		if !g.r.Ready() || !pres.Up("a") || !pres.Up("b") || !pres.Up("c") || !snap.Passthrough("c") ||
			snap.Federated.Len() != 8 || snap.List(proto.KindPrompts, "").Len() != 3 ||
			snap.List(proto.KindResources, "").Len() != 4 || snap.List(proto.KindResourceTemplates, "").Len() != 1 {
			return fmt.Errorf("not ready: ready %v, up a/b/c %v/%v/%v, passthrough c %v, tools %d, prompts %d, resources %d, templates %d",
				g.r.Ready(), pres.Up("a"), pres.Up("b"), pres.Up("c"), snap.Passthrough("c"), snap.Federated.Len(),
				snap.List(proto.KindPrompts, "").Len(), snap.List(proto.KindResources, "").Len(), snap.List(proto.KindResourceTemplates, "").Len())
		}
		return nil
	})
	return g
}

// listNames lists every page of a list method for tenant in view and
// returns the items' names (or URIs, or URI templates).
func (g *rig) listNames(tenant, op, method, view string) ([]string, error) {
	var names []string
	cursor := ""
	for range 100 {
		m, err := g.callAs(tenant, op, &proto.Request{Method: method, View: view, Params: fmt.Appendf(nil, `{"cursor":%q}`, cursor)})
		if err != nil {
			return names, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal([]byte(m["raw"]), &page); err != nil {
			return nil, err
		}
		for k, v := range page {
			if k == "nextCursor" {
				continue
			}
			var items []struct{ Name, URI, URITemplate string }
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			for _, it := range items {
				names = append(names, it.Name+it.URI+it.URITemplate)
			}
		}
		if err := json.Unmarshal(page["nextCursor"], &cursor); err != nil || cursor == "" {
			return names, nil
		}
	}
	return nil, errors.New("too many pages")
}

// TestRouterTenantLists: every list, federated and passthrough, shows a
// tenant only what its policy allows; a passthrough view of an upstream it
// does not see answers as an unknown upstream does.
func TestRouterTenantLists(t *testing.T) {
	g := tenantRig(t)
	lists := []struct{ op, method string }{
		{proto.OpToolsList, "tools/list"},
		{proto.OpPromptsList, "prompts/list"},
		{proto.OpResourcesList, "resources/list"},
		{proto.OpResourceTemplatesList, "resources/templates/list"},
	}
	tests := []struct {
		tenant, view string
		want         [4][]string // by lists
	}{
		{"ta", "", [4][]string{{"a__echo", "a__ping", "a__zap", "c__run"}, {"a__greet"}, {"a://doc", "c://r"}, {"a://item/{id}"}}},
		{"tb", "", [4][]string{{"b__echo"}, {"b__p"}, {"b://doc"}, nil}},
		{"ta", "a", [4][]string{{"echo", "ping", "zap"}, {"greet"}, {"a://doc"}, {"a://item/{id}"}}},
		{"ta", "c", [4][]string{{"run"}, nil, {"c://r"}, nil}},
		{"tb", "b", [4][]string{{"echo"}, {"p"}, {"b://doc"}, nil}},
		{DefaultTenant, "", [4][]string{nil, nil, nil, nil}}, // not in the tenancy snapshot: see below
	}
	for _, tc := range tests[:5] {
		for i, l := range lists {
			t.Run(fmt.Sprintf("%s/%s/view=%q", tc.tenant, l.method, tc.view), func(t *testing.T) {
				got, err := g.listNames(tc.tenant, l.op, l.method, tc.view)
				if err != nil || !slices.Equal(got, tc.want[i]) {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want[i])
				}
			})
		}
	}
	t.Run("passthrough view of an unseen upstream", func(t *testing.T) {
		for _, l := range lists {
			for _, c := range []struct{ tenant, view string }{{"tb", "a"}, {"tb", "c"}, {"ta", "b"}} {
				_, denied := g.callAs(c.tenant, l.op, &proto.Request{Method: l.method, View: c.view})
				sameError(t, denied, errUnknownUpstream(c.view))
			}
			_, unknown := g.callAs("tb", l.op, &proto.Request{Method: l.method, View: "zz"})
			sameError(t, unknown, errUnknownUpstream("zz"))
		}
	})
	t.Run("tenant not in the snapshot", func(t *testing.T) {
		_, err := g.callAs(DefaultTenant, proto.OpToolsList, &proto.Request{Method: "tools/list"})
		sameError(t, err, errUnknownTenant)
	})
}

// sameError fails unless err is a *proto.Error with want's code, message
// and data, byte for byte.
func sameError(t *testing.T, err error, want *proto.Error) {
	t.Helper()
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != want.Code || pe.Msg != want.Msg || !bytes.Equal(pe.Data, want.Data) {
		t.Fatalf("got %v (data %s), want %v (data %s)", err, dataOf(err), want, want.Data)
	}
}

func dataOf(err error) []byte {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Data
	}
	return nil
}

// TestRouterTenantDeniedIsUnknown: on every method, an item a tenant's
// policy denies (or that belongs to an upstream it does not see) is
// answered exactly as an item that does not exist, and reaches no worker.
// Each case has a twin naming an item nobody has, with the same answer.
func TestRouterTenantDeniedIsUnknown(t *testing.T) {
	g := tenantRig(t)
	unknownTool := func(n string) *proto.Error { return proto.Errorf(proto.CodeInvalidParams, "unknown tool %q", n) }
	unknownPrompt := func(n string) *proto.Error { return proto.Errorf(proto.CodeInvalidParams, "unknown prompt %q", n) }
	unknownTask := func(m, n string) *proto.Error {
		return proto.Errorf(proto.CodeInvalidParams, "%s: unknown taskId %q", m, n)
	}
	taskA, taskZZ := taskOf("a"), taskOf("zz")
	complete := func(ref string) []byte { return []byte(`{"ref":` + ref + `,"argument":{"name":"x","value":"y"}}`) }
	tests := []struct {
		name, tenant, op string
		req              proto.Request
		want             *proto.Error
	}{
		{"tool denied by glob", "ta", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__secret_x"}, unknownTool("a__secret_x")},
		{"tool denied by glob, passthrough", "ta", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "a", Name: "secret_x"}, unknownTool("secret_x")},
		{"tool of an unseen upstream", "tb", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo"}, unknownTool("a__echo")},
		{"tool denied before the default allow", "tb", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "b__admin"}, unknownTool("b__admin")},
		{"tool of an unseen passthrough view", "tb", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "a", Name: "echo"}, unknownTool("echo")},
		{"twin: no such tool", "tb", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "b__nope"}, unknownTool("b__nope")},
		{"twin: no such view", "tb", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "zz", Name: "echo"}, unknownTool("echo")},
		{"prompt denied", "ta", proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "a__hidden"}, unknownPrompt("a__hidden")},
		{"prompt denied, passthrough", "ta", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "a", Name: "hidden"}, unknownPrompt("hidden")},
		{"prompt of an unseen upstream", "tb", proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "a__greet"}, unknownPrompt("a__greet")},
		{"twin: no such prompt", "ta", proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "a__nope"}, unknownPrompt("a__nope")},
		{"twin: no such prompt, passthrough", "ta", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "a", Name: "nope"}, unknownPrompt("nope")},
		{"prompt, unseen passthrough view", "tb", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "a", Name: "greet"}, errUnknownUpstream("a")},
		{"resource denied", "ta", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "a://secret"}, resourceNotFound("a://secret")},
		{"resource denied, passthrough", "ta", proto.OpResourcesRead, proto.Request{Method: "resources/read", View: "a", Name: "a://secret"}, resourceNotFound("a://secret")},
		{"resource of an unseen upstream", "tb", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "a://doc"}, resourceNotFound("a://doc")},
		{"resource by an unseen template", "tb", proto.OpResourcesSubscribe, proto.Request{Method: "resources/subscribe", Name: "a://item/7"}, resourceNotFound("a://item/7")},
		{"resource, unsubscribe", "tb", proto.OpResourcesUnsubscribe, proto.Request{Method: "resources/unsubscribe", Name: "a://doc"}, resourceNotFound("a://doc")},
		// B's policy restricts resources (default deny), so an unlisted URI
		// gets no fallback: only the upstream could say whether it exists,
		// and its answer could tell it from a denied one.
		{"unlisted URI under a restricting policy: no fallback", "tb", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "b://x"}, resourceNotFound("b://x")},
		{"twin: no such resource (A sees two resource upstreams)", "ta", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "zz://none"}, resourceNotFound("zz://none")},
		{"completion of a denied prompt", "ta", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: complete(`{"type":"ref/prompt","name":"a__hidden"}`)}, unknownPrompt("a__hidden")},
		{"completion of an unseen prompt", "tb", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: complete(`{"type":"ref/prompt","name":"a__greet"}`)}, unknownPrompt("a__greet")},
		{"completion of an unseen template", "tb", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: complete(`{"type":"ref/resource","uri":"a://item/{id}"}`)}, resourceNotFound("a://item/{id}")},
		{"completion, unseen passthrough view", "tb", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", View: "a", Params: complete(`{"type":"ref/prompt","name":"greet"}`)}, errUnknownUpstream("a")},
		{"twin: completion of no such prompt", "tb", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: complete(`{"type":"ref/prompt","name":"b__nope"}`)}, unknownPrompt("b__nope")},
		{"set level, unseen passthrough view", "tb", proto.OpLoggingSetLevel, proto.Request{Method: "logging/setLevel", View: "a", Params: []byte(`{"level":"info"}`)}, errUnknownUpstream("a")},
		{"twin: set level, no such view", "tb", proto.OpLoggingSetLevel, proto.Request{Method: "logging/setLevel", View: "zz", Params: []byte(`{"level":"info"}`)}, errUnknownUpstream("zz")},
		{"task of an unseen upstream", "tb", proto.OpTasksGet, proto.Request{Method: "tasks/get", Name: taskA}, unknownTask("tasks/get", taskA)},
		{"task, unseen passthrough view", "tb", proto.OpTasksCancel, proto.Request{Method: "tasks/cancel", View: "a", Name: taskA}, unknownTask("tasks/cancel", taskA)},
		{"twin: task of no such upstream", "tb", proto.OpTasksUpdate, proto.Request{Method: "tasks/update", Name: taskZZ}, unknownTask("tasks/update", taskZZ)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.callAs(tc.tenant, tc.op, &tc.req)
			if tc.want == nil {
				if err != nil || got["worker"] == "" {
					t.Fatalf("got %v, %v; want it forwarded", got, err)
				}
				return
			}
			sameError(t, err, tc.want)
		})
	}
	t.Run("allowed items are forwarded", func(t *testing.T) {
		for _, c := range []struct {
			tenant, op string
			req        proto.Request
			worker     string
		}{
			{"ta", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo"}, "w-a"},
			{"ta", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "c", Name: "run"}, "w-c"},
			{"tb", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "b__echo"}, "w-b"},
			{"ta", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "a", Name: "greet"}, "w-a"},
			{"ta", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "a://item/7"}, "w-a"},
			{"ta", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: complete(`{"type":"ref/resource","uri":"a://item/{id}"}`)}, "w-a"},
			{"ta", proto.OpTasksGet, proto.Request{Method: "tasks/get", Name: taskOf("a")}, "w-a"},
		} {
			got, err := g.callAs(c.tenant, c.op, &c.req)
			if err != nil || got["worker"] != c.worker {
				t.Errorf("%s %s %q: %v, %v; want %s", c.tenant, c.req.Method, c.req.Name, got, err, c.worker)
			}
		}
	})
	t.Run("parameter headers are not checked for a denied tool", func(t *testing.T) {
		req := &proto.Request{Method: "tools/call", Name: "a__secret_deploy", Protocol: protocol2026,
			Params: []byte(`{"name":"a__secret_deploy","arguments":{"region":"eu"}}`)}
		_, err := g.callMsgAs("ta", proto.OpToolsCall, req, &nats.Msg{Header: nats.Header{"Mcp-Param-Region": []string{"us"}}})
		sameError(t, err, unknownTool("a__secret_deploy"))
	})
	t.Run("a denied tool's upstream being down is not told", func(t *testing.T) {
		g.heartbeat("w-a", map[string]bool{"a": false})
		eventually(t, func() error {
			if g.r.presence.View().Up("a") {
				return errors.New("a still up")
			}
			return nil
		})
		// A sees a: a name of a's may exist while a is down.
		_, err := g.callAs("ta", proto.OpToolsCall, &proto.Request{Method: "tools/call", Name: "a__nope"})
		if !errors.Is(err, proto.ErrUpstreamUnavailable) {
			t.Fatalf("tenant A: %v, want upstream unavailable", err)
		}
		// B does not see a: its names are unknown, up or down.
		_, err = g.callAs("tb", proto.OpToolsCall, &proto.Request{Method: "tools/call", Name: "a__echo"})
		sameError(t, err, unknownTool("a__echo"))
		_, err = g.callAs("tb", proto.OpToolsCall, &proto.Request{Method: "tools/call", View: "a", Name: "echo"})
		sameError(t, err, unknownTool("echo"))
	})
}

// TestRouterTenantCursors: a cursor is honoured only for the tenant, list
// and view it was issued for; anywhere else it is refused exactly as a
// cursor no router issued.
func TestRouterTenantCursors(t *testing.T) {
	g := tenantRig(t)
	first, err := g.callAs("ta", proto.OpToolsList, &proto.Request{Method: "tools/list"})
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal([]byte(first["raw"]), &page); err != nil || page.NextCursor == "" {
		t.Fatalf("first page %s: %v", first["raw"], err)
	}
	params := fmt.Appendf(nil, `{"cursor":%q}`, page.NextCursor)
	got, err := g.callAs("ta", proto.OpToolsList, &proto.Request{Method: "tools/list", Params: params})
	if err != nil || got["raw"] != `{"tools":[{"name":"a__zap"},{"name":"c__run"}]}` {
		t.Fatalf("second page for A: %v, %v", got["raw"], err)
	}
	_, garbage := g.callAs("tb", proto.OpToolsList, &proto.Request{Method: "tools/list", Params: []byte(`{"cursor":"c3kxOmJfX2VjaG8"}`)})
	sameError(t, garbage, errInvalidCursor)
	for _, c := range []struct {
		name, tenant, op, method, view string
	}{
		{"another tenant", "tb", proto.OpToolsList, "tools/list", ""},
		{"another list", "ta", proto.OpPromptsList, "prompts/list", ""},
		{"another view", "ta", proto.OpToolsList, "tools/list", "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.callAs(c.tenant, c.op, &proto.Request{Method: c.method, View: c.view, Params: params})
			sameError(t, err, errInvalidCursor)
		})
	}
}

// TestRouterTenantPassthroughAuth: the client's Authorization reaches an
// upstream only if its spec asks for it, on calls and on a fanned-out
// logging/setLevel; B's fan-out reaches only the upstream B sees.
func TestRouterTenantPassthroughAuth(t *testing.T) {
	g := tenantRig(t)
	var mu sync.Mutex
	setLevel := map[string]string{} // upstream -> Authorization seen
	for _, w := range []string{"w-a", "w-b", "w-c"} {
		subj, _ := proto.WorkerSubjectAll(w)
		sub, err := g.nc.Subscribe(subj, func(m *nats.Msg) {
			var req proto.Request
			if proto.Unmarshal(m.Data, &req) == nil && req.Method == "logging/setLevel" {
				mu.Lock()
				setLevel[req.Upstream] = m.Header.Get(proto.HdrAuthorization)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	hdr := func() *nats.Msg {
		return &nats.Msg{Header: nats.Header{proto.HdrAuthorization: []string{"Bearer client-token"}}}
	}
	for _, c := range []struct {
		name, tenant string
		req          proto.Request
		auth         string
	}{
		{"passthrough upstream", "ta", proto.Request{Method: "tools/call", Name: "c__run"}, "Bearer client-token"},
		{"passthrough upstream, its view", "ta", proto.Request{Method: "tools/call", View: "c", Name: "run"}, "Bearer client-token"},
		{"other upstream: stripped", "ta", proto.Request{Method: "tools/call", Name: "a__echo"}, ""},
		{"other upstream, B: stripped", "tb", proto.Request{Method: "tools/call", Name: "b__echo"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.callMsgAs(c.tenant, proto.OpToolsCall, &c.req, hdr())
			if err != nil || got["auth"] != c.auth {
				t.Fatalf("got %v, %v; want Authorization %q", got, err, c.auth)
			}
		})
	}
	t.Run("set level fan-out", func(t *testing.T) {
		// The recording subscription runs beside the rig's worker, which
		// answers: what it saw is awaited, not assumed.
		seen := func(want map[string]string) func() error {
			return func() error {
				mu.Lock()
				defer mu.Unlock()
				if fmt.Sprint(setLevel) != fmt.Sprint(want) {
					return fmt.Errorf("setLevel reached %v, want %v", setLevel, want)
				}
				return nil
			}
		}
		got, err := g.callMsgAs("ta", proto.OpLoggingSetLevel, &proto.Request{Method: "logging/setLevel", Params: []byte(`{"level":"debug"}`)}, hdr())
		if err != nil || got["raw"] != "{}" {
			t.Fatalf("got %v, %v", got, err)
		}
		eventually(t, seen(map[string]string{"a": "", "c": "Bearer client-token"}))
		mu.Lock()
		clear(setLevel)
		mu.Unlock()
		if _, err := g.callMsgAs("tb", proto.OpLoggingSetLevel, &proto.Request{Method: "logging/setLevel", Params: []byte(`{"level":"debug"}`)}, hdr()); err != nil {
			t.Fatal(err)
		}
		eventually(t, seen(map[string]string{"b": ""}))
	})
}

// TestRouterTenantListChanged: a policy change announces list_changed to
// the tenant whose view changed, on its own subject, naming the upstreams
// whose items it sees changed.
func TestRouterTenantListChanged(t *testing.T) {
	g := tenantRig(t)
	events := make(chan *nats.Msg, 64)
	if _, err := g.nc.ChanSubscribe(proto.SubjEvtListChangedAll, events); err != nil {
		t.Fatal(err)
	}
	if err := g.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b := tenantB()
	b.Policy.Rules = append([]policy.Rule{{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "b__echo"}}, b.Policy.Rules...)
	g.src.set(t, tenantA(), b)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-events:
			var ev proto.ListChanged
			if err := proto.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if want, _ := proto.EvtListChangedSubject(ev.Tenant); m.Subject != want {
				t.Fatalf("event of %q on %s", ev.Tenant, m.Subject)
			}
			if ev.Tenant != "tb" || ev.Kind != proto.KindTools {
				continue // the rig's own catalog loading
			}
			if !slices.Equal(ev.Upstreams, []string{"b"}) {
				t.Fatalf("event %+v, want upstreams [b]", ev)
			}
			names, err := g.listNames("tb", proto.OpToolsList, "tools/list", "")
			if err != nil || len(names) != 0 {
				t.Fatalf("B lists %v, %v after the deny", names, err)
			}
			return
		case <-deadline:
			t.Fatal("no list_changed for tb")
		}
	}
}

// TestRouterTenantChanges checks the announcements computed between two
// states: only tenants whose visible lists changed, each with the
// upstreams that changed for it.
func TestRouterTenantChanges(t *testing.T) {
	up := func(string) bool { return true }
	st := catalog.NewState("__")
	for _, u := range []string{"a", "b", "c"} {
		st.SetUpstream(u, true)
		if err := st.SetTools(u, [][]byte{[]byte(`{"name":"echo"}`), []byte(`{"name":"secret_x"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	cat1 := st.Build(up)
	ten1 := tenancy.NewSnapshot([]tenancy.Tenant{tenantA(), tenantB()}, nil)
	if err := st.SetTools("a", [][]byte{[]byte(`{"name":"echo"}`), []byte(`{"name":"secret_x","description":"new"}`)}); err != nil {
		t.Fatal(err)
	}
	cat2 := st.Build(up)
	if err := st.SetTools("b", [][]byte{[]byte(`{"name":"echo","description":"new"}`), []byte(`{"name":"secret_x"}`)}); err != nil {
		t.Fatal(err)
	}
	cat3 := st.Build(up)
	added := tenancy.Tenant{Name: "tc", Policy: policy.Spec{Upstreams: []string{"c"}, Default: policy.Allow}}
	ten2 := tenancy.NewSnapshot([]tenancy.Tenant{tenantA(), tenantB(), added}, nil)
	str := func(evs []*proto.ListChanged) string {
		var out []string
		for _, e := range evs {
			out = append(out, fmt.Sprintf("%s/%s%v", e.Tenant, e.Kind, e.Upstreams))
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		name        string
		oldCat, cat *catalog.Snapshot
		oldTen, ten *tenancy.Snapshot
		want        string
	}{
		{"first announcement", nil, cat1, nil, ten1, "[ta/tools[a c] tb/tools[b]]"},
		{"nothing changed", cat1, cat1, ten1, ten1, "[]"},
		{"a denied item changed: nobody sees it", cat1, cat2, ten1, ten1, "[]"},
		{"b's visible item changed: only B", cat2, cat3, ten1, ten1, "[tb/tools[b]]"},
		{"a tenant added", cat3, cat3, ten1, ten2, "[tc/tools[c]]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// ten2 compiled A's and B's policies anew: different pointers,
			// the same lists, so nothing to announce for them.
			oldTen := c.oldTen
			if s := str(tenantChanges(c.oldCat, c.cat, oldTen, c.ten)); s != c.want {
				t.Fatalf("got %s, want %s", s, c.want)
			}
		})
	}
}
