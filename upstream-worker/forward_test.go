package worker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// resultField decodes the JSON value at path (object keys; "0" indexes an
// array) of r's result.
func resultField(t *testing.T, r *proto.Reply, path ...string) any {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("reply error %v, want a result", r.Error)
	}
	var v any
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			if p != "0" || len(c) == 0 {
				return nil
			}
			v = c[0]
		default:
			return nil
		}
	}
	return v
}

// TestWorkerForwardedOps: requests for the forwarded methods' ops on the
// worker subject reach the upstream (the router's name for the prompt
// replaced by the upstream's) and get its result, on every transport;
// tools_list and an op that does not match the envelope's method are
// unknown ops.
func TestWorkerForwardedOps(t *testing.T) {
	transports := []struct {
		name string
		spec func(t *testing.T) proto.UpstreamSpec
	}{
		{"streamable", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL)
		}},
		{"legacy-sse", func(t *testing.T) proto.UpstreamSpec {
			return proto.UpstreamSpec{Name: "up", Transport: proto.TransportSSE, URL: serveHTTP(t, newUpstream(0), "sse").ts.URL}
		}},
		{"stdio", func(*testing.T) proto.UpstreamSpec { return stdioSpec("up", 1) }},
	}
	cases := []struct {
		op, method, name, params string
		path                     []string
		want                     any
	}{
		{proto.OpPromptsGet, "prompts/get", "greet", `{"name":"up__greet","arguments":{"who":"nats"}}`,
			[]string{"messages", "0", "content", "text"}, "greet: hello nats"},
		{proto.OpPromptsList, "prompts/list", "", `{}`, []string{"prompts", "0", "name"}, "greet"},
		{proto.OpResourcesRead, "resources/read", "", `{"uri":"test://items/3"}`, []string{"contents", "0", "text"}, "item test://items/3"},
		{proto.OpResourceTemplatesList, "resources/templates/list", "", ``, []string{"resourceTemplates", "0", "uriTemplate"}, "test://items/{id}"},
		{proto.OpLoggingSetLevel, "logging/setLevel", "", `{"level":"error"}`, nil, map[string]any{}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := startWorker(t, Config{}, tr.spec(t))
			e.waitUp("up")
			for _, session := range []string{"", "sess-1"} {
				for _, c := range cases {
					if c.method == "logging/setLevel" && session == "" {
						continue // a session's setting
					}
					req := proto.Request{Method: c.method, Upstream: "up", Name: c.name, Edge: "e1", Session: session, ID: 7, Params: []byte(c.params)}
					r, err := e.callErr(t.Context(), c.op, req)
					if err != nil {
						t.Fatalf("%s: %v", c.op, err)
					}
					got := resultField(t, r, c.path...)
					if m, ok := c.want.(map[string]any); ok {
						if gm, ok := got.(map[string]any); !ok || len(gm) != len(m) {
							t.Errorf("%s (session %q): result %s, want %v", c.op, session, r.Result, c.want)
						}
						continue
					}
					if got != c.want {
						t.Errorf("%s (session %q): %v = %v, want %v (result %s)", c.op, session, c.path, got, c.want, r.Result)
					}
				}
			}
			// An upstream error passes unchanged.
			r, err := e.callErr(t.Context(), proto.OpResourcesRead, proto.Request{Method: "resources/read", Upstream: "up", Edge: "e1", Params: []byte(`{"uri":"test://nope"}`)})
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, r, int32(mcp.CodeResourceNotFound), "Resource not found")
			if string(r.Error.Data) != `{"uri":"test://nope"}` {
				t.Errorf("error data %s", r.Error.Data)
			}
			for _, c := range []struct{ op, method string }{
				{proto.OpToolsList, "tools/list"},         // answered by routers
				{proto.OpPromptsGet, "prompts/list"},      // op and method disagree
				{"initialize", "initialize"},              // not forwarded
				{proto.OpResourcesRead, "resources/Read"}, // methods are case-sensitive
			} {
				r, err := e.callErr(t.Context(), c.op, proto.Request{Method: c.method, Upstream: "up", Params: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, r, proto.CodeMethodNotFound, c.op)
			}
		})
	}
}

// TestWorkerListSets: after connecting, KV holds the upstream's prompts,
// resources and resource templates (all pages: the upstream serves one
// item per page) next to its tools; a prompt added upstream reaches the
// prompts set through notifications/prompts/list_changed, and the other
// sets are not rewritten.
func TestWorkerListSets(t *testing.T) {
	u := newUpstream(0)
	u.addPrompt("a-first")
	h := serveHTTP(t, u, "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	names := func(kind, key string) string {
		set := e.listSet("up", kind)
		if set.Upstream != "up" || set.Kind != kind {
			return "<no set>"
		}
		var out []string
		for _, raw := range set.Items {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s item %s: %v", kind, raw, err)
			}
			s, _ := m[key].(string)
			out = append(out, s)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct{ kind, key, want string }{
		{proto.KindPrompts, "name", "a-first,greet"},
		{proto.KindResources, "uri", "test://text"},
		{proto.KindResourceTemplates, "uriTemplate", "test://items/{id}"},
	} {
		if got := names(c.kind, c.key); got != c.want {
			t.Errorf("%s set: %s, want %s", c.kind, got, c.want)
		}
	}
	if n := len(e.listSet("up", proto.KindTools).Items); n != fixedTools {
		t.Errorf("tool set has %d tools, want %d", n, fixedTools)
	}
	kv, err := e.js.KeyValue(t.Context(), proto.BucketLists)
	if err != nil {
		t.Fatal(err)
	}
	rev := func(kind string) uint64 {
		ent, err := kv.Get(t.Context(), proto.ListKey("up", kind))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return ent.Revision()
	}
	toolsRev, resRev := rev(proto.KindTools), rev(proto.KindResources)

	u.addPrompt("late")
	eventually(t, 10*time.Second, "the prompts set with the late prompt", func() bool {
		return names(proto.KindPrompts, "name") == "a-first,greet,late"
	})
	if rev(proto.KindTools) != toolsRev || rev(proto.KindResources) != resRev {
		t.Errorf("unchanged sets rewritten: tools %d -> %d, resources %d -> %d", toolsRev, rev(proto.KindTools), resRev, rev(proto.KindResources))
	}
}
