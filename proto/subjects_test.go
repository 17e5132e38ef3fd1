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
