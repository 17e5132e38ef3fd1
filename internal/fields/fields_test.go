package fields

import (
	"strings"
	"testing"
)

func TestCheckMessage(t *testing.T) {
	const call = `"jsonrpc":"2.0","id":1,"method":"tools/call"`
	tests := []struct {
		name, msg string
		want      Clash
	}{
		{"plain call", `{` + call + `,"params":{"name":"a","arguments":{"Name":"x","name":"y"},"_meta":{"progressToken":1,"x":{"progressToken":2}}}}`, ""},
		{"response", `{"jsonrpc":"2.0","id":"r1","result":{"action":"accept"}}`, ""},
		{"params not an object", `{` + call + `,"params":[1,2]}`, ""},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{}}`, "method"},
		{"Method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`, "method"},
		{"id twice", `{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`, "id"},
		{"jsonrpc variant", `{"jsonrpc":"2.0","JSONRPC":"1.0","id":1,"method":"ping"}`, "jsonrpc"},
		{"params twice", `{` + call + `,"params":{"name":"a"},"Params":{"name":"b"}}`, "params"},
		{"result twice", `{"jsonrpc":"2.0","id":"r1","result":{},"Result":{"action":"decline"}}`, "result"},
		{"error and Error", `{"jsonrpc":"2.0","id":"r1","error":{"code":1,"message":"m"},"ERROR":{}}`, "error"},
		{"name twice", `{` + call + `,"params":{"name":"a","name":"b"}}`, "params.name"},
		{"Name", `{` + call + `,"params":{"name":"a","Name":"b"}}`, "params.name"},
		{"NAME alone", `{` + call + `,"params":{"NAME":"b"}}`, "params.name"},
		{"escaped Name", `{` + call + `,"params":{"name":"a","\u004eame":"b"}}`, "params.name"},
		{"uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a://x","URI":"b://y"}}`, "params.uri"},
		{"arguments", `{` + call + `,"params":{"name":"a","arguments":{},"Arguments":{"x":1}}}`, "params.arguments"},
		{"_meta", `{` + call + `,"params":{"name":"a","_meta":{},"_Meta":{}}}`, "params._meta"},
		{"meta without underscore", `{` + call + `,"params":{"name":"a","meta":{}}}`, "params._meta"},
		{"cursor", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"a","Cursor":"b"}}`, "params.cursor"},
		{"taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","task_id":"b"}}`, "params.taskId"},
		{"requestState", `{` + call + `,"params":{"name":"a","requestState":"a","RequestState":"b"}}`, "params.requestState"},
		{"inputResponses", `{` + call + `,"params":{"name":"a","inputResponses":{},"InputResponses":{}}}`, "params.inputResponses"},
		{"ref", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{},"Ref":{}}}`, "params.ref"},
		{"ref name", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a","Name":"b"}}}`, "params.ref.name"},
		{"ref type", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","TYPE":"ref/resource"}}}`, "params.ref.type"},
		{"ref uri", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"a","uri":"b"}}}`, "params.ref.uri"},
		{"level", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error","Level":"debug"}}`, "params.level"},
		{"requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestID":2}}`, "params.requestId"},
		{"progressToken", `{` + call + `,"params":{"name":"a","_meta":{"progressToken":1,"ProgressToken":2}}}`, "params._meta.progressToken"},
		{"protocolVersion", `{` + call + `,"params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolversion":"2025-11-25"}}}`, "params._meta.io.modelcontextprotocol/protocolVersion"},
		{"clientCapabilities", `{` + call + `,"params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, "params._meta.io.modelcontextprotocol/clientCapabilities"},
		{"clientInfo", `{` + call + `,"params":{"name":"a","_meta":{"io.modelcontextprotocol/ClientInfo":{}}}}`, "params._meta.io.modelcontextprotocol/clientInfo"},
		{"logLevel", `{` + call + `,"params":{"name":"a","_meta":{"io.modelcontextprotocol/logLevel":"error","io.modelcontextprotocol/log_level":"debug"}}}`, "params._meta.io.modelcontextprotocol/logLevel"},
		{"subscriptionId", `{` + call + `,"params":{"name":"a","_meta":{"io.modelcontextprotocol/SubscriptionId":"s"}}}`, "params._meta.io.modelcontextprotocol/subscriptionId"},
		{"traceparent", `{` + call + `,"params":{"name":"a","_meta":{"traceparent":"x","TraceParent":"y"}}}`, "params._meta.traceparent"},
		{"tracestate", `{` + call + `,"params":{"name":"a","_meta":{"tracestate":"x","tracestate":"y"}}}`, "params._meta.tracestate"},
		{"timing", `{` + call + `,"params":{"name":"a","_meta":{"dev.switchyard/Timing":true}}}`, "params._meta.dev.switchyard/timing"},
		{"params before _meta", `{` + call + `,"params":{"_meta":{"progressToken":1,"progressToken":2},"name":"a","Name":"b"}}`, "params.name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckMessage([]byte(tc.msg)); got != tc.want {
				t.Fatalf("CheckMessage(%s) = %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}

func TestClashMessage(t *testing.T) {
	m := Clash("params.name").Message()
	if !strings.HasPrefix(m, "Invalid Request: params.name ") || !strings.Contains(m, "letter case") {
		t.Fatalf("message %q", m)
	}
}

func TestCheckParamsDoesNotAllocate(t *testing.T) {
	p := []byte(`{"name":"up__echo","arguments":{"text":"hi"},"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	if n := testing.AllocsPerRun(100, func() {
		if CheckParams(p) != "" {
			t.Fatal("clash")
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// BenchmarkCheckParams is the check alone, as the router and a caller
// without its own scan pay it: one pass over a 2026-07-28 tools/call's
// params and one over its _meta. (The edge and the worker fuse it into
// the reads they make anyway: edge BenchmarkFastPathRead.)
func BenchmarkCheckParams(b *testing.B) {
	p := []byte(`{"name":"up__echo","arguments":{"text":"hi","n":1,"nested":{"a":[1,2,3],"b":"x"}},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench-client","title":"Bench","version":"1.8.0"}}}`)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if CheckParams(p) != "" {
			b.Fatal("clash")
		}
	}
}
