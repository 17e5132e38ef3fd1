package edge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// goDetail matches what client-visible error messages must not carry: Go's
// names for types ("*mcp.CallToolParamsRaw", "mcp.CallToolParamsRaw",
// "map[string]interface {}") and encoding/json's phrases for them.
var goDetail = regexp.MustCompile(`\*?\b[a-z][a-z0-9]*\.[A-Z]\w+|Go value of type|Go struct field|map\[|interface \{\}|json: |unmarshal`)

// TestEdgeErrorTextHasNoGoDetails: requests the SDK or precheck refuse
// for malformed params or envelopes are answered with messages in JSON's
// terms, never Go's, on the fast and the SDK path, with JSON and SSE
// responses, in a session and statelessly. (The SDK's own text for these
// was "handling 'tools/call': invalid params: unmarshaling ... into a
// *mcp.CallToolParamsRaw: json: cannot unmarshal ... into Go struct field
// mcp.CallToolParamsRaw.name of type string", and a plain-text "malformed
// payload: parse error: invalid ID type map[string]interface {}".)
func TestEdgeErrorTextHasNoGoDetails(t *testing.T) {
	type req struct {
		name, method, body string
		want               string // a part of the message
		wantCode           int64
	}
	withMeta := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{META` + params + `}}`
	}
	reqs := []req{
		{"tool name a number", "tools/call", withMeta("tools/call", `"name":5`), "params.name must be a string", -32602},
		{"tool params an array", "tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, "params must be an object", -32602},
		{"prompt name a number", "prompts/get", withMeta("prompts/get", `"name":5`), "params.name must be a string", -32602},
		{"prompt argument a number", "prompts/get", withMeta("prompts/get", `"name":"up__p","arguments":{"a":5}}`), "params.arguments.a must be a string", -32602},
		{"uri an object", "resources/read", withMeta("resources/read", `"uri":{}`), "params.uri must be a string", -32602},
		{"ref a number", "completion/complete", withMeta("completion/complete", `"ref":5`), "params.ref must be an object", -32602},
		{"cursor a number", "prompts/list", withMeta("prompts/list", `"cursor":5`), "params.cursor must be a string", -32602},
		{"level a number", "logging/setLevel", withMeta("logging/setLevel", `"level":5`), "params.level must be a string", -32602},
		{"ping params a number", "ping", `{"jsonrpc":"2.0","id":1,"method":"ping","params":5}`, "params must be an object", -32602},
		{"id an object", "ping", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "id must be a string, a number or null", -32600},
		{"id true", "ping", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, "id must be a string, a number or null", -32600},
		{"id out of range", "ping", `{"jsonrpc":"2.0","id":1e999,"method":"ping"}`, "id is a number out of range", -32600},
		{"jsonrpc 1.0", "ping", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `jsonrpc must be "2.0"`, -32600},
		{"no jsonrpc", "ping", `{"id":1,"method":"ping"}`, `jsonrpc must be "2.0"`, -32600},
		{"response error a string", "", `{"jsonrpc":"2.0","id":"x","error":"boom"}`, "error must be an object", -32600},
		{"response error code a string", "", `{"jsonrpc":"2.0","id":"x","error":{"code":"1","message":"m"}}`, "error must be an object", -32600},
	}
	for _, o := range []rigOpts{{}, {sse: true}, {noFastPath: true}} {
		t.Run(fmt.Sprintf("sse=%v/fast=%v", o.sse, !o.noFastPath), func(t *testing.T) {
			var nc *nats.Conn
			g := newRigWith(t, scriptedRouter(&nc, nil), &o)
			nc = g.nc
			g.initialize()
			sid := g.sid
			for _, era := range []string{"2025", "2026"} {
				for _, r := range reqs {
					if era == "2026" && (r.method == "logging/setLevel" || r.method == "") {
						continue // not a 2026-07-28 request
					}
					t.Run(era+"/"+r.name, func(t *testing.T) {
						g.sid = sid
						body, meta := r.body, ""
						var hdr []string
						if era == "2026" {
							g.sid = ""
							meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},`
							hdr = hdr2026(r.method, "")
							if r.method == "prompts/get" {
								hdr = hdr2026(r.method, "up__p")
							}
						}
						body = strings.Replace(body, "META", meta, 1)
						if strings.HasSuffix(body, "}}}") && strings.Contains(body, `"arguments":{"a":5}}`) {
							body = strings.TrimSuffix(body, "}") // the case's params close their own object
						}
						code, raw, _ := g.post(body, hdr...)
						_, e := rpcErrorOf(t, raw)
						if e == nil {
							t.Fatalf("HTTP %d %s: no JSON-RPC error", code, raw)
						}
						if goDetail.MatchString(e.Message) {
							t.Fatalf("message %q names Go types", e.Message)
						}
						// At 2026-07-28 the SDK checks the Mcp-Name header and
						// the _meta triple first: its answer is another, but
						// in the same terms.
						if era == "2025" && (e.Code != r.wantCode || !strings.Contains(e.Message, r.want)) {
							t.Fatalf("error %d %q, want %d with %q", e.Code, e.Message, r.wantCode, r.want)
						}
					})
				}
			}
		})
	}
}

// TestEdgeLegacySSEErrorTextHasNoGoDetails: on the legacy HTTP+SSE
// transport the SDK's answer to params it cannot decode travels on the
// session's stream; it reaches the client in JSON's terms too.
func TestEdgeLegacySSEErrorTextHasNoGoDetails(t *testing.T) {
	g := newRig(t, nil)
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
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(base+endpoint, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: HTTP %d %s", body, resp.StatusCode, b)
		}
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	data()
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5}}`)
	var msg struct {
		ID    json.RawMessage
		Error *jsonrpc.Error
	}
	if err := json.Unmarshal([]byte(data()), &msg); err != nil || msg.Error == nil {
		t.Fatalf("answer %+v: %v", msg, err)
	}
	if goDetail.MatchString(msg.Error.Message) || msg.Error.Message != "Invalid params: params.name must be a string" || string(msg.ID) != "2" {
		t.Fatalf("answer %s %+v", msg.ID, msg.Error)
	}
}

// TestEdgeBusErrorsNameNoInternals: what the edge makes of bus failures
// (a reply it cannot decode, a worker that went away mid-call) names no
// worker (an operator's name for a host) and no decoder's text.
func TestEdgeBusErrorsNameNoInternals(t *testing.T) {
	const worker = "ip-10-0-3-7"
	var nc *nats.Conn
	heartbeat := func(bye bool) {
		data, _ := proto.Marshal(&proto.Heartbeat{Worker: worker, Boot: 1, IntervalMs: 500, Bye: bye})
		subj, _ := proto.EvtWorkerSubject(worker)
		_ = nc.Publish(subj, data)
	}
	router := func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		switch req.Name {
		case "up__garbled":
			_ = nc.Publish(m.Reply, []byte{0xc1, 0x00, 0xff}) // not msgpack
		case "up__lost":
			// Placed on the worker, which then says goodbye.
			_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{worker}}})
			heartbeat(true)
		}
	}
	g := newRigWith(t, router, nil)
	nc = g.nc
	heartbeat(false)
	waitUntil(t, "the edge sees the worker", func() bool { return g.e.presence.Alive(worker) })
	g.initialize()
	for _, tool := range []string{"up__garbled", "up__lost"} {
		code, raw, _ := g.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + tool + `"}}`)
		_, e := rpcErrorOf(t, raw)
		if e == nil {
			t.Fatalf("%s: HTTP %d %s", tool, code, raw)
		}
		if goDetail.MatchString(e.Message) || strings.Contains(e.Message, worker) || strings.Contains(e.Message, "msgpack") {
			t.Fatalf("%s: message %q", tool, e.Message)
		}
		t.Logf("%s: %d %q", tool, e.Code, e.Message)
	}
}
