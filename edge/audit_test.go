package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/proto"
)

// auditRig is a rig with the audit trail on whose fake router answers
// every call as upstream "up" would (a tool named "fail" with isError),
// and a core subscription that collects the published events.
func auditRig(t *testing.T) (*rig, chan audit.Event) {
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		res := `{"content":[{"type":"text","text":"ok"}]}`
		switch req.Name {
		case "up__fail":
			res = `{"content":[],"isError":true}`
		case "up__nope": // the router's answer: no worker, no upstream
			reply(nc, m, &proto.Reply{Error: proto.Errorf(proto.CodeInvalidParams, "unknown tool")})
			return
		}
		reply(nc, m, &proto.Reply{Result: []byte(res), Upstream: "up", ServiceNs: 1500})
	}, &rigOpts{sse: true, audit: &audit.Config{}})
	nc = g.nc
	events := make(chan audit.Event, 64)
	if _, err := nc.Subscribe(audit.SubjectAll, func(m *nats.Msg) {
		var ev audit.Event
		if err := audit.Decode(m.Data, &ev); err != nil {
			t.Errorf("bad event on %s: %v", m.Subject, err)
		}
		events <- ev
	}); err != nil {
		t.Fatal(err)
	}
	return g, events
}

// nextEvent waits for the next event.
func nextEvent(t *testing.T, events chan audit.Event) audit.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no audit event")
	}
	return audit.Event{}
}

// TestEdgeAudit: each request the edge answers is one event, whichever
// path answered it: the fast path (a result, a tool error), the SDK
// (initialize), and precheck's refusals (unparsable body, unknown
// method, the latter's name clipped).
func TestEdgeAudit(t *testing.T) {
	g, events := auditRig(t)
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{"a":1},` + meta2026 + `}}`
	}
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name   string
		body   string
		hdr    []string
		check  func(ev audit.Event) bool
		expect string
	}{
		{"fast path result", call("up__x"), hdr2026("tools/call", "up__x"), func(ev audit.Event) bool {
			return ev.Method == "tools/call" && ev.Upstream == "up" && ev.Name == "x" && ev.Outcome == audit.OutcomeOK &&
				ev.UpstreamDuration == 1500 && ev.Duration > 0 && ev.RequestBytes > 0 && ev.ResponseBytes > 0 && !ev.Session &&
				ev.Tenant == "default" && ev.EdgeID == "edge-t" && ev.Arguments == nil && ev.Result == nil
		}, "tools/call of x at up, ok, upstream 1.5 µs, no arguments or result"},
		{"tool error", call("up__fail"), hdr2026("tools/call", "up__fail"), func(ev audit.Event) bool {
			return ev.Name == "fail" && ev.Outcome == audit.OutcomeToolError && ev.ErrorCode == 0
		}, "tool_error"},
		{"traceparent", call("up__x"), append(hdr2026("tools/call", "up__x"), "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			func(ev audit.Event) bool { return ev.TraceID == "4bf92f3577b34da6a3ce929d0e0e4736" }, "the client's trace id"},
		{"_meta traceparent", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",` + meta2026[len(`"_meta":{`):] + `}}`,
			append(hdr2026("tools/call", "up__x"), "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			func(ev audit.Event) bool { return ev.TraceID == "0af7651916cd43dd8448eb211c80319c" }, "the _meta trace id, over the header's"},
		{"unparsable", `{"jsonrpc":`, nil, func(ev audit.Event) bool {
			return ev.Method == "" && ev.Outcome == "-32700" && ev.ErrorCode == -32700
		}, "-32700"},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"no/such` + long + `","params":{}}`, hdr2026("no/such", ""), func(ev audit.Event) bool {
			return ev.Outcome == "-32601" && strings.HasPrefix(ev.Method, "no/such") && len(ev.Method) == maxAuditString
		}, "-32601 with the method clipped"},
		{"unknown tool: the federated name's upstream", call("up__nope"), hdr2026("tools/call", "up__nope"), func(ev audit.Event) bool {
			return ev.Upstream == "up" && ev.Name == "nope" && ev.Outcome == "-32602" && ev.UpstreamDuration == 0
		}, "upstream up, name nope, -32602"},
		{"tasks/get refused (serveTasks)", `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"t1",` + meta2026 + `}}`,
			hdr2026("tasks/get", "t1"), func(ev audit.Event) bool {
				return ev.Method == "tasks/get" && ev.Outcome == "-32021"
			}, "tasks/get, -32021"},
		{"header mismatch (the SDK's own refusal)", call("up__x"), hdr2026("tools/call", "up__other"), func(ev audit.Event) bool {
			return ev.Method == "tools/call" && ev.Outcome == "-32020" && ev.Name == "x" && ev.Upstream == "up"
		}, "tools/call of x at up, -32020"},
		{"initialize (SDK path)", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			nil, func(ev audit.Event) bool {
				return ev.Method == "initialize" && ev.Outcome == audit.OutcomeOK && ev.Upstream == "" && ev.ResponseBytes > 0
			}, "initialize, ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g.post(tc.body, tc.hdr...)
			if ev := nextEvent(t, events); !tc.check(ev) {
				t.Errorf("event %+v, want %s", ev, tc.expect)
			}
			select {
			case ev := <-events:
				t.Errorf("a second event: %+v", ev)
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
	// On a 2025 session: params the SDK cannot decode are its own
	// refusal, recorded once.
	g.initialize()
	for ev := nextEvent(t, events); ev.Method != "initialize"; ev = nextEvent(t, events) {
	}
	g.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}`)
	if ev := nextEvent(t, events); ev.Method != "tools/call" || ev.Outcome != "-32602" || !ev.Session {
		t.Errorf("undecodable params: event %+v, want tools/call -32602 in a session", ev)
	}
	// A request without params (the SDK hands the handler a nil pointer of
	// the params type).
	g.post(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	if ev := nextEvent(t, events); ev.Method != "ping" || ev.Outcome != audit.OutcomeOK || ev.RequestBytes != 0 {
		t.Errorf("ping without params: event %+v", ev)
	}
	g.post(`{"jsonrpc":"2.0","id":11,"method":"prompts/list"}`)
	if ev := nextEvent(t, events); ev.Method != "prompts/list" {
		t.Errorf("prompts/list without params: event %+v", ev)
	}
	select {
	case ev := <-events:
		t.Errorf("a second event: %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}
