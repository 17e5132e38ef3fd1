package upstream

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/proto"
)

// TestUpstreamParamsClash: the worker refuses (-32600, naming the member)
// params that give a member it reads or rewrites twice, exactly or in
// another letter case, '_' or '-': the name it replaces with the
// upstream's, the uri and taskId it forwards, a completion's ref and the
// name in it, the _meta keys it drops or replaces. Whatever reached the
// bus (an edge refuses these first), the upstream never gets a second
// member beside the one the gateway checked.
func TestUpstreamParamsClash(t *testing.T) {
	cases := []struct {
		name, method, params, field string
	}{
		{"tool name by case", "tools/call", `{"name":"gw__ok","Name":"denied","arguments":{}}`, "params.name"},
		{"tool name first by case", "tools/call", `{"NAME":"denied","name":"gw__ok"}`, "params.name"},
		{"tool name twice", "tools/call", `{"name":"gw__ok","name":"denied"}`, "params.name"},
		{"tool name escaped", "tools/call", `{"name":"gw__ok","\u004eame":"denied"}`, "params.name"},
		{"tool name only by case", "tools/call", `{"Name":"denied"}`, "params.name"},
		{"arguments", "tools/call", `{"name":"gw__ok","arguments":{},"ARGUMENTS":{"x":1}}`, "params.arguments"},
		{"requestState", "tools/call", `{"name":"gw__ok","requestState":"a","RequestState":"b"}`, "params.requestState"},
		{"inputResponses", "tools/call", `{"name":"gw__ok","inputResponses":{},"input_responses":{"a":{}}}`, "params.inputResponses"},
		{"hop key by case", "tools/call", `{"name":"gw__ok","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.modelcontextprotocol/protocolVersion":"x"}}`, "params._meta.io.modelcontextprotocol/protocolVersion"},
		{"hop key alone by case", "tools/call", `{"name":"gw__ok","_meta":{"io.modelcontextprotocol/ClientCapabilities":{"sampling":{}}}}`, "params._meta.io.modelcontextprotocol/clientCapabilities"},
		{"progress token", "tools/call", `{"name":"gw__ok","_meta":{"progressToken":1,"progress_token":2}}`, "params._meta.progressToken"},
		{"_meta twice", "tools/call", `{"name":"gw__ok","_meta":{},"_meta":{"progressToken":1}}`, "params._meta"},
		{"prompt name by case", "prompts/get", `{"name":"gw__ok","Name":"secret"}`, "params.name"},
		{"prompt name twice", "prompts/get", `{"name":"gw__ok","name":"secret"}`, "params.name"},
		{"uri by case", "resources/read", `{"uri":"test://ok","URI":"test://denied"}`, "params.uri"},
		{"subscribe uri", "resources/subscribe", `{"uri":"test://ok","uri":"test://denied"}`, "params.uri"},
		{"taskId", "tasks/get", `{"taskId":"a","TaskId":"b"}`, "params.taskId"},
		{"ref twice", "completion/complete", `{"ref":{"type":"ref/prompt","name":"gw__ok"},"Ref":{"type":"ref/prompt","name":"secret"}}`, "params.ref"},
		{"ref name by case", "completion/complete", `{"ref":{"type":"ref/prompt","name":"gw__ok","Name":"secret"}}`, "params.ref.name"},
		{"ref type twice", "completion/complete", `{"ref":{"type":"ref/resource","type":"ref/prompt","name":"x"}}`, "params.ref.type"},
		{"level", "logging/setLevel", `{"level":"error","Level":"debug"}`, "params.level"},
		{"cursor", "tools/list", `{"cursor":"a","Cursor":"b"}`, "params.cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &proto.Request{Method: tc.method, Name: "ok", Params: []byte(tc.params)}
			var perr *proto.Error
			if tc.method == methodToolsCall {
				_, perr = newRawParams(req)
			} else {
				_, perr = newForwardParams(req)
			}
			if perr == nil || perr.Code != proto.CodeInvalidRequest || perr.Msg != fields.Clash(tc.field).Message() {
				t.Fatalf("error %v, want -32600 naming %s", perr, tc.field)
			}
			if tc.method == methodToolsCall {
				u := &Upstream{log: slog.New(slog.DiscardHandler)}
				if _, perr := u.callParams(req); perr == nil || perr.Code != proto.CodeInvalidRequest {
					t.Fatalf("SDK path: error %v, want -32600", perr)
				}
			}
		})
	}
}

// lenientName is what a decoder that matches member names without
// regard to case, keeping the last, reads as the name (Go's encoding/json).
type lenientName struct {
	Name string
	Ref  struct{ Name string }
}

// FuzzUpstreamRenamed: whatever params the worker accepts for tools/call
// or prompts/get, the params it sends name exactly the tool or prompt the
// router chose, for a case-insensitive decoder too: the name it writes is
// the only one. A completion's prompt ref the same.
func FuzzUpstreamRenamed(f *testing.F) {
	for _, s := range []string{
		`{"name":"gw__ok","arguments":{}}`, `{"name":"gw__ok","Name":"denied"}`, `{"Name":"denied"}`,
		`{"n\u0061me":"x","NAME":"y"}`, `{"arguments":{"name":"x"},"_meta":{"name":1}}`,
		`{"ref":{"type":"ref/prompt","name":"a","nAme":"b"}}`, `{"ref":{"type":"ref/prompt"},"x_name":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, method := range []string{methodToolsCall, methodPromptsGet, methodComplete} {
			req := &proto.Request{Method: method, Name: "ok", Params: params}
			var p *rawParams
			var perr *proto.Error
			if method == methodToolsCall {
				p, perr = newRawParams(req)
			} else {
				p, perr = newForwardParams(req)
			}
			if perr != nil {
				continue
			}
			out := p.appendParams(nil, nil)
			var got lenientName
			if err := json.Unmarshal(out, &got); err != nil {
				continue // a member of another type: refused upstream
			}
			switch {
			case method != methodComplete && got.Name != "ok":
				t.Fatalf("%s params %s sent as %s: a lenient decoder reads name %q", method, params, out, got.Name)
			case method == methodComplete && got.Ref.Name != "" && got.Ref.Name != "ok" && isPromptRef(out):
				t.Fatalf("%s params %s sent as %s: a lenient decoder reads ref name %q", method, params, out, got.Ref.Name)
			}
		}
	})
}

// isPromptRef reports whether completion params name a prompt reference,
// as a lenient decoder reads them.
func isPromptRef(params []byte) bool {
	var p struct{ Ref struct{ Type string } }
	return json.Unmarshal(params, &p) == nil && p.Ref.Type == "ref/prompt"
}
