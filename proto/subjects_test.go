package proto

import "testing"

func TestProtoOp(t *testing.T) {
	for _, c := range []struct{ method, op string }{
		{"tools/call", OpToolsCall},
		{"resources/templates/list", "resources_templates_list"},
		{"logging/setLevel", "logging_setlevel"},
		{"completion/complete", OpCompletionComplete},
		{"x/Custom/Thing", "x_custom_thing"},
	} {
		if got := Op(c.method); got != c.op {
			t.Errorf("Op(%q) = %q, want %q", c.method, got, c.op)
		}
		if !ValidToken(Op(c.method)) {
			t.Errorf("Op(%q) is not a subject token", c.method)
		}
	}
	if _, ok := Forwarded("initialize"); ok {
		t.Error("initialize is answered by the edge, not forwarded")
	}
	if m, ok := ForwardedOp(OpLoggingSetLevel); !ok || m != "logging/setLevel" {
		t.Errorf("ForwardedOp(logging_setlevel) = %q, %v", m, ok)
	}
	if _, ok := ForwardedOp("catalog"); ok {
		t.Error("catalog is not a forwarded method")
	}
	if op, ok := Forwarded("prompts/get"); !ok || op != OpPromptsGet {
		t.Errorf("Forwarded(prompts/get) = %q, %v", op, ok)
	}
}

func TestProtoListKey(t *testing.T) {
	for _, c := range []struct {
		key, upstream, kind string
		ok                  bool
	}{
		{ListKey("fs", KindTools), "fs", KindTools, true},
		{ListKey("a-b", KindResourceTemplates), "a-b", KindResourceTemplates, true},
		{"fs", "", "", false},
		{".tools", "", "", false},
		{"fs.unknown", "", "", false},
	} {
		u, k, ok := ParseListKey(c.key)
		if u != c.upstream || k != c.kind || ok != c.ok {
			t.Errorf("ParseListKey(%q) = %q, %q, %v; want %q, %q, %v", c.key, u, k, ok, c.upstream, c.kind, c.ok)
		}
	}
}

func TestProtoEdgeMsgSubject(t *testing.T) {
	if s, err := EdgeMsgSubject("edge-1"); err != nil || s != "switchyard.v1.edge.edge-1.msg" {
		t.Fatalf("got %q %v", s, err)
	}
	if _, err := EdgeMsgSubject("a.b"); err == nil {
		t.Fatal("a dotted edge id made a subject")
	}
}

// TestProtoRouterRouteSubject: a call sent to one router by name parses as
// one on the route subject; bad tokens are refused.
func TestProtoRouterRouteSubject(t *testing.T) {
	b, err := AppendRouterRouteSubject(nil, "router-ab", "acme", "tools_call")
	if err != nil || string(b) != Prefix+"router.router-ab.acme.tools_call" {
		t.Fatalf("%s %v", b, err)
	}
	if tenant, op, ok := RouteTokens(string(b)); !ok || tenant != "acme" || op != "tools_call" {
		t.Fatalf("RouteTokens: %q %q %v", tenant, op, ok)
	}
	if tenant, op, ok := RouteTokens(Prefix + "route.acme.tools_call"); !ok || tenant != "acme" || op != "tools_call" {
		t.Fatalf("RouteTokens of a route subject: %q %q %v", tenant, op, ok)
	}
	for _, bad := range [][3]string{{"r.x", "acme", "op"}, {"r", "ac*", "op"}, {"r", "acme", ""}, {"", "acme", "op"}} {
		if _, err := AppendRouterRouteSubject(nil, bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, bad := range []string{Prefix + "router.r", Prefix + "router.r.acme", Prefix + "router..acme.op", Prefix + "router.r.acme.op.x"} {
		if _, _, ok := RouteTokens(bad); ok {
			t.Errorf("RouteTokens(%q) accepted", bad)
		}
	}
}
