package edge

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// clashCase is a request that gives a member the gateway decides on twice
// (clash) next to the same request without the second member (clean).
// Bodies use META for the SEP-2575 _meta members of a 2026-07-28 request,
// which withEra fills in (nothing for a 2025-era session).
type clashCase struct {
	name, method, target string // target: the Mcp-Name of a 2026-07-28 request
	clash, clean         string // the params members
	field                string // the member the refusal names
	only2025             bool   // a method the stateless era does not have
}

var clashCases = []clashCase{
	{name: "tool name by case", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","Name":"up__denied","arguments":{},"_meta":{META}`,
		clean: `"name":"up__echo","arguments":{},"_meta":{META}`, field: "params.name"},
	{name: "tool name by case, first", method: "tools/call", target: "up__echo",
		clash: `"Name":"up__denied","name":"up__echo","arguments":{},"_meta":{META}`,
		clean: `"name":"up__echo","arguments":{},"_meta":{META}`, field: "params.name"},
	{name: "tool name twice", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","arguments":{},"name":"up__denied","_meta":{META}`,
		clean: `"name":"up__echo","arguments":{},"_meta":{META}`, field: "params.name"},
	{name: "tool name escaped", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","\u004eAME":"up__denied","_meta":{META}`,
		clean: `"name":"up__echo","_meta":{META}`, field: "params.name"},
	{name: "taskId with a Kelvin sign", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META},"taskId":"x","tas` + "\u212a" + `Id":"y"`,
		clean: `"name":"up__echo","_meta":{META},"taskId":"x"`, field: "params.taskId"},
	{name: "arguments", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","arguments":{"a":1},"Arguments":{"a":2},"_meta":{META}`,
		clean: `"name":"up__echo","arguments":{"a":1},"_meta":{META}`, field: "params.arguments"},
	{name: "_meta", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META},"_Meta":{"progressToken":1}`,
		clean: `"name":"up__echo","_meta":{META}`, field: "params._meta"},
	{name: "progress token", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META"progressToken":"p1","ProgressToken":"p2"}`,
		clean: `"name":"up__echo","_meta":{META"progressToken":"p1"}`, field: "params._meta.progressToken"},
	{name: "protocol version", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META"io.modelcontextprotocol/ProtocolVersion":"2025-06-18"}`,
		clean: `"name":"up__echo","_meta":{META}`, field: "params._meta.io.modelcontextprotocol/protocolVersion"},
	{name: "traceparent", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","TraceParent":"x"}`,
		clean: `"name":"up__echo","_meta":{META"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, field: "params._meta.traceparent"},
	{name: "timing", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META"dev.switchyard/timing":false,"dev.switchyard/Timing":true}`,
		clean: `"name":"up__echo","_meta":{META"dev.switchyard/timing":false}`, field: "params._meta.dev.switchyard/timing"},
	{name: "requestState", method: "tools/call", target: "up__echo",
		clash: `"name":"up__echo","_meta":{META},"requestState":"a","request_state":"b"`,
		clean: `"name":"up__echo","_meta":{META},"requestState":"a"`, field: "params.requestState"},
	{name: "cursor", method: "tools/list",
		clash: `"cursor":"sy1:a","Cursor":"sy1:b","_meta":{META}`,
		clean: `"cursor":"sy1:a","_meta":{META}`, field: "params.cursor"},
	{name: "prompt name", method: "prompts/get", target: "up__greet",
		clash: `"name":"up__greet","NAME":"up__secret","_meta":{META}`,
		clean: `"name":"up__greet","_meta":{META}`, field: "params.name"},
	{name: "resource uri", method: "resources/read", target: "test://allowed",
		clash: `"uri":"test://allowed","Uri":"test://denied","_meta":{META}`,
		clean: `"uri":"test://allowed","_meta":{META}`, field: "params.uri"},
	{name: "completion ref", method: "completion/complete",
		clash: `"ref":{"type":"ref/prompt","name":"up__greet"},"Ref":{"type":"ref/prompt","name":"up__secret"},"argument":{"name":"a","value":""},"_meta":{META}`,
		clean: `"ref":{"type":"ref/prompt","name":"up__greet"},"argument":{"name":"a","value":""},"_meta":{META}`, field: "params.ref"},
	{name: "completion ref name", method: "completion/complete",
		clash: `"ref":{"type":"ref/prompt","name":"up__greet","Name":"up__secret"},"argument":{"name":"a","value":""},"_meta":{META}`,
		clean: `"ref":{"type":"ref/prompt","name":"up__greet"},"argument":{"name":"a","value":""},"_meta":{META}`, field: "params.ref.name"},
	{name: "log level", method: "logging/setLevel", only2025: true,
		clash: `"level":"error","Level":"debug"`, clean: `"level":"error"`, field: "params.level"},
}

// request fills params (c.clash or c.clean) in for an era and returns the
// body and headers of the request.
func (c clashCase) request(params string, stateless bool) (string, []string) {
	meta := ""
	if stateless {
		meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	}
	if strings.Contains(params, "{META}") {
		params = strings.ReplaceAll(params, "{META}", "{"+meta+"}")
	} else if meta != "" {
		params = strings.ReplaceAll(params, "{META", "{"+meta+",")
	} else {
		params = strings.ReplaceAll(params, "{META", "{")
	}
	body := `{"jsonrpc":"2.0","id":41,"method":"` + c.method + `","params":{` + params + `}}`
	if !stateless {
		return body, nil
	}
	return body, hdr2026(c.method, c.target)
}

// rpcErrorOf is the id and JSON-RPC error of an answer (plain JSON or the last SSE
// message event), nil when it has none.
func rpcErrorOf(t *testing.T, body string) (id json.RawMessage, e *jsonrpc.Error) {
	t.Helper()
	data := body
	if strings.HasPrefix(body, "event:") || strings.Contains(body, "\ndata: ") {
		data = ""
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				data = d
			}
		}
	}
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &resp); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return resp.ID, resp.Error
}

// drain empties seen and returns what was in it.
func drain(seen chan proto.Request) []proto.Request {
	var out []proto.Request
	for {
		select {
		case r := <-seen:
			out = append(out, r)
		default:
			return out
		}
	}
}

// TestEdgeRefusesClashingMembers: a request that gives a member the
// gateway decides on twice (exactly, by letter case, by '_' or '-') is
// refused with HTTP 400 and -32600 naming the member, and never reaches a
// router; the same request with the member once does. For every such
// member, on the fast path (JSON and SSE responses) and the SDK path, in
// a 2025-11-25 session and statelessly (2026-07-28).
func TestEdgeRefusesClashingMembers(t *testing.T) {
	for _, o := range []rigOpts{{}, {sse: true}, {noFastPath: true}} {
		t.Run(fmt.Sprintf("sse=%v/fast=%v", o.sse, !o.noFastPath), func(t *testing.T) {
			var nc *nats.Conn
			seen := make(chan proto.Request, 16)
			g := newRigWith(t, scriptedRouter(&nc, seen), &o)
			nc = g.nc
			g.initialize()
			sid := g.sid
			for _, era := range []string{"2025", "2026"} {
				for _, c := range clashCases {
					if c.only2025 && era == "2026" {
						continue
					}
					t.Run(era+"/"+c.name, func(t *testing.T) {
						g.sid = sid
						if era == "2026" {
							g.sid = ""
						}
						drain(seen)
						body, hdr := c.request(c.clash, era == "2026")
						code, raw, _ := g.post(body, hdr...)
						id, e := rpcErrorOf(t, raw)
						if code != http.StatusBadRequest || e == nil || e.Code != jsonrpc.CodeInvalidRequest ||
							e.Message != fields.Clash(c.field).Message() || string(id) != "41" {
							t.Fatalf("HTTP %d %s, want 400 with -32600 naming %s under id 41", code, raw, c.field)
						}
						// The clean request reaches the router (its answer
						// then is the scripted router's).
						body, hdr = c.request(c.clean, era == "2026")
						code, raw, _ = g.post(body, hdr...)
						if _, e := rpcErrorOf(t, raw); e != nil && e.Code == jsonrpc.CodeInvalidRequest {
							t.Fatalf("clean request: HTTP %d %s", code, raw)
						}
						select {
						case r := <-seen:
							if r.Method != c.method {
								t.Fatalf("router got %s", r.Method)
							}
						case <-time.After(5 * time.Second):
							t.Fatal("the clean request did not reach the router")
						}
						if late := drain(seen); len(late) != 0 {
							t.Fatalf("the refused request reached the router: %+v", late)
						}
					})
				}
			}
			g.sid = sid
			envelope := []struct {
				name, body, field, id string
			}{
				{"method twice", `{"jsonrpc":"2.0","id":42,"method":"tools/list","method":"tools/call","params":{"name":"up__echo"}}`, "method", "42"},
				{"Method", `{"jsonrpc":"2.0","id":42,"method":"tools/list","Method":"tools/call","params":{"name":"up__echo"}}`, "method", "42"},
				{"id by case", `{"jsonrpc":"2.0","id":42,"ID":43,"method":"tools/list"}`, "id", "null"},
				{"jsonrpc", `{"jsonrpc":"2.0","json_rpc":"1.0","id":42,"method":"tools/list"}`, "jsonrpc", "42"},
				{"params by case", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__echo"},"Params":{"name":"up__denied"}}`, "params", "42"},
				{"in a batch", `[{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__echo","Name":"up__denied"}}]`, "params.name", "42"},
				{"batch Method", `[{"jsonrpc":"2.0","id":42,"Method":"tools/call","params":{"name":"up__echo"}}]`, "method", "42"},
				{"cancel requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestID":2}}`, "params.requestId", "null"},
				{"relayed answer result twice", `{"jsonrpc":"2.0","id":"sy-r1","result":{"action":"decline"},"Result":{"action":"accept"}}`, "result", `"sy-r1"`},
				{"relayed answer error and Error", `{"jsonrpc":"2.0","id":"sy-r1","error":{"code":1,"message":"no"},"ERROR":{"code":2,"message":"x"}}`, "error", `"sy-r1"`},
			}
			for _, c := range envelope {
				t.Run("envelope/"+c.name, func(t *testing.T) {
					drain(seen)
					code, raw, _ := g.post(c.body)
					id, e := rpcErrorOf(t, raw)
					if code != http.StatusBadRequest || e == nil || e.Code != jsonrpc.CodeInvalidRequest ||
						e.Message != fields.Clash(c.field).Message() || string(id) != c.id {
						t.Fatalf("HTTP %d %s, want 400 with -32600 naming %s under id %s", code, raw, c.field, c.id)
					}
					if late := drain(seen); len(late) != 0 {
						t.Fatalf("the refused request reached the router: %+v", late)
					}
				})
			}
		})
	}
}

// TestEdgeLegacySSERefusesClashingMembers: on the legacy HTTP+SSE
// transport a POST whose message gives a member twice is refused with HTTP
// 400 and the -32600 error as its body (the session's stream never sees
// it), and the router gets nothing; the same call with the member once is
// accepted (202) and answered on the stream.
func TestEdgeLegacySSERefusesClashingMembers(t *testing.T) {
	var nc *nats.Conn
	seen := make(chan proto.Request, 4)
	g := newRigWith(t, scriptedRouter(&nc, seen), nil)
	nc = g.nc
	base := strings.TrimSuffix(g.url, "/mcp")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	data := func() string {
		t.Helper()
		for events.Scan() {
			if v, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				return v
			}
		}
		t.Fatalf("SSE stream ended: %v", events.Err())
		return ""
	}
	endpoint := data()
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+endpoint, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); code != http.StatusAccepted {
		t.Fatalf("initialize: %d %s", code, body)
	}
	data()
	if code, body := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	for _, c := range []struct{ body, field string }{
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","Name":"up__denied"}}`, "params.name"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","_meta":{"progressToken":1,"progressToken":2}}}`, "params._meta.progressToken"},
		{`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"up__greet","name":"up__secret"}}`, "params.name"},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","method":"tools/list","params":{"name":"up__echo"}}`, "method"},
	} {
		code, raw := post(c.body)
		id, e := rpcErrorOf(t, raw)
		if code != http.StatusBadRequest || e == nil || e.Code != jsonrpc.CodeInvalidRequest || e.Message != fields.Clash(c.field).Message() || string(id) != "2" {
			t.Fatalf("%s: HTTP %d %s, want 400 with -32600 naming %s", c.body, code, raw, c.field)
		}
	}
	if code, body := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__odd"}}`); code != http.StatusAccepted {
		t.Fatalf("clean call: %d %s", code, body)
	}
	if got := data(); !strings.Contains(got, `"id":3`) || !strings.Contains(got, "hologram") {
		t.Fatalf("stream answered %s, want the clean call's result", got)
	}
	if r := drain(seen); len(r) != 1 || r[0].Name != "up__odd" {
		t.Fatalf("router got %+v, want only the clean call", r)
	}
}

// TestEdgeSDKPathRefusesClashingMeta: behind precheck, the SDK path
// checks the params it forwards (the SDK's decoding re-encoded) as well:
// a _meta map can still hold keys a lenient upstream decoder takes for
// one another. A client on an in-memory transport (no HTTP, so no
// precheck) gets -32600 and the router nothing.
func TestEdgeSDKPathRefusesClashingMeta(t *testing.T) {
	var nc *nats.Conn
	seen := make(chan proto.Request, 4)
	g := newRigWith(t, scriptedRouter(&nc, seen), nil)
	nc = g.nc
	v := g.e.tenantView(config.DefaultTenant, "")
	ct, st := mcp.NewInMemoryTransports()
	ss, err := v.server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__odd", Meta: mcp.Meta{"progressToken": "a", "ProgressToken": "b"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidRequest || je.Message != fields.Clash("params._meta.progressToken").Message() {
		t.Fatalf("call with a clashing _meta: %v, want -32600", err)
	}
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__meta", Meta: mcp.Meta{"progressToken": "a"}}); err != nil || res == nil {
		t.Fatalf("clean call: %v", err)
	}
	if r := drain(seen); len(r) != 1 {
		t.Fatalf("router got %d requests, want only the clean call", len(r))
	}
}

// TestEdgeFieldsNameTheKeysRead: fields.Meta holds every _meta key the
// edge reads (probeParams.meta answers those from its single pass; it
// would scan again for any other), spelled as the SDK and the tracing
// spec spell them.
func TestEdgeFieldsNameTheKeysRead(t *testing.T) {
	for _, k := range []string{"progressToken", mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities,
		mcp.MetaKeyClientInfo, mcp.MetaKeyLogLevel, mcp.MetaKeySubscriptionID, trace.KeyTraceparent, trace.KeyTracestate,
		hop.MetaKey, perRequestVersionKey} {
		if fields.Meta.Index(k) < 0 {
			t.Errorf("fields.Meta lacks %q", k)
		}
	}
	if fields.Meta.Len() != fields.MetaCount {
		t.Fatalf("fields.MetaCount %d, fields.Meta has %d names", fields.MetaCount, fields.Meta.Len())
	}
}
