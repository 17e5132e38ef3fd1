package edge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeTasks: tasks/get, tasks/update and tasks/cancel are checked as
// SEP-2663 asks (routing headers, the client's declaration of the
// extension, params.taskId) and forwarded on their route subjects with
// the taskId as the name the router routes by, in both eras; the removed
// tasks/result and tasks/list are -32601.
func TestEdgeTasks(t *testing.T) {
	seen := make(chan proto.Request, 16)
	var nc *nats.Conn
	g := newRig(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		seen <- req
		reply(nc, m, &proto.Reply{Result: []byte(`{"taskId":"sy1.x","status":"working"}`)})
	})
	nc = g.nc
	const declared = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	body := func(method, caps, params string) string {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
		if params != "" {
			meta = params + "," + meta
		}
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + meta + `}}`
	}
	h2026 := func(method, name string) []string {
		h := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}
		if name != "-" {
			h = append(h, "Mcp-Name", name)
		}
		return h
	}
	tests := []struct {
		name, body string
		hdr        []string
		status     int
		code       int64 // 0: a result
		op         string
	}{
		{"get", body("tasks/get", declared, `"taskId":"sy1.x"`), h2026("tasks/get", "sy1.x"), 200, 0, proto.OpTasksGet},
		{"update", body("tasks/update", declared, `"taskId":"sy1.x","inputResponses":{}`), h2026("tasks/update", " sy1.x "), 200, 0, proto.OpTasksUpdate},
		{"cancel", body("tasks/cancel", declared, `"taskId":"sy1.x"`), h2026("tasks/cancel", "sy1.x"), 200, 0, proto.OpTasksCancel},
		{"Mcp-Name mismatch", body("tasks/get", declared, `"taskId":"sy1.x"`), h2026("tasks/get", "other"), 400, -32020, ""},
		{"Mcp-Name missing", body("tasks/get", declared, `"taskId":"sy1.x"`), h2026("tasks/get", "-"), 400, -32020, ""},
		{"Mcp-Method mismatch", body("tasks/get", declared, `"taskId":"sy1.x"`), h2026("tasks/cancel", "sy1.x"), 400, -32020, ""},
		{"not declared", body("tasks/get", `{}`, `"taskId":"sy1.x"`), h2026("tasks/get", "sy1.x"), 400, -32021, ""},
		{"no taskId", body("tasks/get", declared, ""), h2026("tasks/get", ""), 400, -32602, ""},
		{"Mcp-Name base64", body("tasks/get", declared, `"taskId":"sy1.x"`), h2026("tasks/get", "=?base64?c3kxLng=?="), 200, 0, proto.OpTasksGet},
		{"taskId twice, by case", body("tasks/get", declared, `"taskId":"sy1.x","TaskId":"up-own"`), h2026("tasks/get", "sy1.x"), 400, -32600, ""}, // precheck: fields.Params
		{"taskId a number", body("tasks/get", declared, `"taskId":7`), h2026("tasks/get", "7"), 400, -32602, ""},
		{"declared false", body("tasks/get", `{"extensions":{"io.modelcontextprotocol/tasks":false}}`, `"taskId":"sy1.x"`), h2026("tasks/get", "sy1.x"), 400, -32021, ""},
		{"no _meta version", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"sy1.x","_meta":{"io.modelcontextprotocol/clientCapabilities":` + declared + `}}}`, h2026("tasks/get", "sy1.x"), 400, -32602, ""},
		{"_meta version mismatch", strings.Replace(body("tasks/get", declared, `"taskId":"sy1.x"`), `"2026-07-28"`, `"2025-11-25"`, 1), h2026("tasks/get", "sy1.x"), 400, -32020, ""},
		{"params not an object", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":["sy1.x"]}`, h2026("tasks/get", "sy1.x"), 400, -32602, ""},
		{"tasks/result removed", body("tasks/result", declared, `"taskId":"sy1.x"`), h2026("tasks/result", "-"), 404, -32601, ""},
		{"tasks/list removed", body("tasks/list", declared, ""), h2026("tasks/list", "-"), 404, -32601, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, raw, _ := g.post(tt.body, tt.hdr...)
			if code != tt.status {
				t.Fatalf("status %d, want %d: %s", code, tt.status, raw)
			}
			var resp struct {
				Result json.RawMessage
				Error  *struct {
					Code int64
					Data json.RawMessage
				}
			}
			if err := json.Unmarshal([]byte(raw), &resp); err != nil {
				t.Fatalf("response %q: %v", raw, err)
			}
			switch {
			case tt.code != 0 && (resp.Error == nil || resp.Error.Code != tt.code):
				t.Fatalf("response %s, want error %d", raw, tt.code)
			case tt.code == -32021 && !strings.Contains(string(resp.Error.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks"`):
				t.Fatalf("-32021 data %s, want requiredCapabilities", resp.Error.Data)
			case tt.code == 0 && !strings.Contains(string(resp.Result), `"resultType":"complete"`):
				t.Fatalf("result %s, want the upstream's with resultType complete", resp.Result)
			}
			if tt.op == "" {
				select {
				case req := <-seen:
					t.Fatalf("rejected request published: %+v", req)
				default:
				}
				return
			}
			req := <-seen
			if req.Method != strings.ReplaceAll(tt.op, "_", "/") || req.Name != "sy1.x" || req.Session != "" {
				t.Fatalf("published %+v", req)
			}
		})
	}

	// A 2025-era session: the declaration comes from initialize.
	code, raw, h := g.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + declared + `,"clientInfo":{"name":"t","version":"1"}}}`)
	if code != 200 {
		t.Fatalf("initialize: %d %s", code, raw)
	}
	g.sid = h.Get("Mcp-Session-Id")
	g.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	res, e := g.call("tasks/get", `{"taskId":"sy1.x"}`)
	if e != nil || !strings.Contains(string(res), `"taskId":"sy1.x"`) {
		t.Fatalf("2025 session tasks/get: %s %+v", res, e)
	}
	if req := <-seen; req.Session != g.sid || req.Name != "sy1.x" || req.Method != "tasks/get" {
		t.Fatalf("published %+v", req)
	}
	// Without the MCP-Protocol-Version header (2025-03-26 clients send none).
	code, raw, _ = g.post(`{"jsonrpc":"2.0","id":99,"method":"tasks/cancel","params":{"taskId":"sy1.x"}}`, "Mcp-Protocol-Version", "")
	if code != 200 || !strings.Contains(raw, `"taskId":"sy1.x"`) {
		t.Fatalf("tasks/cancel without the version header: %d %s", code, raw)
	}
	<-seen
	// tasks/result and tasks/list (2025-11-25's first tasks design) are
	// not served: JSON-RPC -32601.
	if _, e := g.call("tasks/result", `{"taskId":"sy1.x"}`); e == nil || e.Code != -32601 {
		t.Fatalf("tasks/result on a 2025 session: %+v, want -32601", e)
	}
	g.sid = ""
	g.initialize() // a session that did not declare it
	if res, e := g.call("tasks/cancel", `{"taskId":"sy1.x"}`); e == nil || e.Code != -32021 {
		t.Fatalf("undeclared 2025 session: %s error %+v, want -32021", res, e)
	}
}
