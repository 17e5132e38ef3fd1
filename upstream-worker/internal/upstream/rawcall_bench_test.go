package upstream

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkUpstreamCall is one tools/call (a small echo) through
// Upstream.Call on the raw and on the SDK path, against an in-process
// go-sdk server (upstream=sdk-*), or against one whose tools/call answers
// are canned (upstream=canned-*: the go-sdk server still opens the session)
// so that the client's own cost shows. Server and client share the CPUs.
func BenchmarkUpstreamCall(b *testing.B) {
	for _, kind := range []string{"sdk-sse", "sdk-json", "sdk-stateless", "canned-sse", "canned-json"} {
		var s *testServer
		switch kind {
		case "canned-sse":
			s = newServer(b, "sse", cannedIntercept(true), false)
		case "canned-json":
			s = newServer(b, "sse", cannedIntercept(false), false)
		default:
			s = newServer(b, kind[len("sdk-"):], nil, false)
		}
		for _, path := range []string{"raw", "sdk"} {
			b.Run("upstream="+kind+"/path="+path, func(b *testing.B) {
				u := startUpstream(b, s.url(), path == "sdk", nil)
				req := call("echo", "", `{"name":"up__echo","arguments":{"text":"hello","n":1}}`)
				if _, perr := u.Call(b.Context(), req); perr != nil {
					b.Fatal(perr)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, perr := u.Call(b.Context(), req); perr != nil {
						b.Fatal(perr)
					}
				}
			})
		}
	}
}

// cannedIntercept answers every tools/call with a fixed result, as an SSE
// event or a JSON body, echoing the request id found by a byte search.
func cannedIntercept(sse bool) interceptor {
	return func(w http.ResponseWriter, _ *http.Request, p *posted) bool {
		if p.msg.Method != "tools/call" {
			return false
		}
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hello"}]}}`, bytes.TrimSpace(p.msg.ID))
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
		} else {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, msg)
		}
		return true
	}
}
