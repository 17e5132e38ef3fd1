package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/trace"
)

// startTracedGateway is startGateway with every role's spans going to rec
// (one recorder for all three providers).
func startTracedGateway(t *testing.T, cfg *config.File, rec sdktrace.SpanProcessor) *gateway {
	t.Helper()
	return startGateway(t, cfg, trace.WithSpanProcessor(rec))
}

// postCall sends a 2026-07-28 tools/call of fixture__echo (the edge's
// fast path) with JSON-RPC id and the given extra HTTP headers, and
// returns the response body.
func postCall(t *testing.T, url string, id int, hdr map[string]string) (int, []byte) {
	t.Helper()
	return postTool(t, url, id, "fixture__echo", hdr)
}

// postTool is postCall for the tool name.
func postTool(t *testing.T, url string, id int, name string, hdr map[string]string) (int, []byte) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hi"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, name)
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", v2026)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// hops are one call's spans, by role.
type hops struct{ edge, router, worker sdktrace.ReadOnlySpan }

func role(s sdktrace.ReadOnlySpan) string {
	v, _ := s.Resource().Set().Value("switchyard.role")
	return v.AsString()
}

// waitChain polls rec until the call whose edge span pick selects has
// ended at all three hops in the edge span's trace, and returns them.
// The router may end its span after the client has its answer, hence
// the polling.
func waitChain(t *testing.T, rec *tracetest.SpanRecorder, pick func(sdktrace.ReadOnlySpan) bool) hops {
	t.Helper()
	var h hops
	eventually(t, 10*time.Second, func() error {
		h = hops{}
		ended := rec.Ended()
		for _, s := range ended {
			if role(s) == "edge" && pick(s) {
				h.edge = s
			}
		}
		if h.edge == nil {
			return fmt.Errorf("no edge span yet among %d", len(ended))
		}
		tid := h.edge.SpanContext().TraceID()
		for _, s := range ended {
			if s.SpanContext().TraceID() != tid {
				continue
			}
			switch role(s) {
			case "router":
				h.router = s
			case "worker":
				h.worker = s
			}
		}
		if h.router == nil || h.worker == nil {
			return fmt.Errorf("trace %s: router %v, worker %v", tid, h.router != nil, h.worker != nil)
		}
		return nil
	})
	return h
}

// check asserts the chain edge → router → worker: names and kinds, one
// trace id, each hop's parent the previous hop's span (remote: it came
// in NATS headers), and no failure recorded.
func (h hops) check(t *testing.T) {
	t.Helper()
	want := []struct {
		s    sdktrace.ReadOnlySpan
		name string
		kind oteltrace.SpanKind
	}{
		{h.edge, "tools/call fixture__echo", oteltrace.SpanKindServer},
		{h.router, "route tools/call", oteltrace.SpanKindInternal},
		{h.worker, "tools/call echo", oteltrace.SpanKindClient},
	}
	tid := h.edge.SpanContext().TraceID()
	for _, w := range want {
		if w.s.Name() != w.name || w.s.SpanKind() != w.kind {
			t.Errorf("%s span: %q %v, want %q %v", role(w.s), w.s.Name(), w.s.SpanKind(), w.name, w.kind)
		}
		if w.s.SpanContext().TraceID() != tid {
			t.Errorf("%s span in trace %s, edge in %s", role(w.s), w.s.SpanContext().TraceID(), tid)
		}
		if w.s.Status().Code != 0 {
			t.Errorf("%s span status %v %q", role(w.s), w.s.Status().Code, w.s.Status().Description)
		}
	}
	if p := h.router.Parent(); p.SpanID() != h.edge.SpanContext().SpanID() || !p.IsRemote() {
		t.Errorf("router parent %s (remote %v), want the edge span %s", p.SpanID(), p.IsRemote(), h.edge.SpanContext().SpanID())
	}
	if p := h.worker.Parent(); p.SpanID() != h.router.SpanContext().SpanID() || !p.IsRemote() {
		t.Errorf("worker parent %s (remote %v), want the router span %s", p.SpanID(), p.IsRemote(), h.router.SpanContext().SpanID())
	}
	if !hasAttr(h.worker, "switchyard.upstream", "fixture") || !hasAttr(h.router, "switchyard.upstream", "fixture") {
		t.Errorf("placement missing: router %v, worker %v", h.router.Attributes(), h.worker.Attributes())
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, k, v string) bool {
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(k) && a.Value.AsString() == v {
			return true
		}
	}
	return false
}

// TestIntegrationTracing: a call through an embedded gateway is one trace
// over the edge, router and worker (fast path and SDK path); a client's
// traceparent, by HTTP header or MCP _meta, is continued.
func TestIntegrationTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	fxURL, _ := startFixtureHTTP(t)
	// probe is an upstream that answers its tool with the traceparent of
	// the request's _meta: the trace context the worker sent upstream.
	probe := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	probe.AddTool(&mcp.Tool{Name: "peek", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "tp=" + tp}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return probe }, nil))
	defer ts.Close()
	cfg := loadConfig(t, fmt.Sprintf("upstreams:\n  - name: fixture\n    url: %s\n  - name: probe\n    url: %s\n"+
		// The endpoint is never dialled: the recorder replaces the exporter.
		"tracing:\n  enabled: true\n  endpoint: http://127.0.0.1:4318\n"+
		// Every call through the router, so that each trace has its route
		// span: a call on a route grant goes from the edge to the worker.
		"edge:\n  route_cache_ttl: 0s\n", fxURL, ts.URL))
	g := startTracedGateway(t, cfg, rec)
	// Wait until the worker serves the upstream; spans of these calls are
	// told apart from the checked ones by trace id or JSON-RPC id.
	eventually(t, 20*time.Second, func() error {
		if code, out := postCall(t, g.url, 1, nil); code != http.StatusOK || !bytes.Contains(out, []byte(`"hi"`)) {
			return fmt.Errorf("status %d: %s", code, out)
		}
		return nil
	})

	t.Run("upstream continues the worker span", func(t *testing.T) {
		const tid, sid = "aaaabbbbccccddddeeeeffff00001111", "2222333344445555"
		var out []byte
		eventually(t, 20*time.Second, func() error {
			var code int
			code, out = postTool(t, g.url, 103, "probe__peek", map[string]string{"traceparent": "00-" + tid + "-" + sid + "-01"})
			if code != http.StatusOK || !bytes.Contains(out, []byte("tp=00-")) {
				return fmt.Errorf("status %d: %s", code, out)
			}
			return nil
		})
		// The upstream saw the client's trace with a worker span as its
		// parent (not the client's span: the worker replaced it).
		eventually(t, 10*time.Second, func() error {
			var ids []string
			for _, s := range rec.Ended() {
				if role(s) == "worker" && s.SpanContext().TraceID().String() == tid && s.Name() == "tools/call peek" {
					id := s.SpanContext().SpanID().String()
					if bytes.Contains(out, []byte("tp=00-"+tid+"-"+id+"-01")) {
						return nil
					}
					ids = append(ids, id)
				}
			}
			return fmt.Errorf("upstream saw %s; worker spans of the trace: %v", out, ids)
		})
	})

	t.Run("root", func(t *testing.T) {
		if code, out := postCall(t, g.url, 101, nil); code != http.StatusOK || !bytes.Contains(out, []byte(`"hi"`)) {
			t.Fatalf("status %d: %s", code, out)
		}
		h := waitChain(t, rec, func(s sdktrace.ReadOnlySpan) bool { return hasAttr(s, "jsonrpc.request.id", "101") })
		h.check(t)
		if h.edge.Parent().IsValid() {
			t.Errorf("edge span of a call without trace context has parent %s", h.edge.Parent().SpanID())
		}
	})

	t.Run("http traceparent", func(t *testing.T) {
		const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		if code, out := postCall(t, g.url, 102, map[string]string{"traceparent": "00-" + tid + "-" + sid + "-01"}); code != http.StatusOK || !bytes.Contains(out, []byte(`"hi"`)) {
			t.Fatalf("status %d: %s", code, out)
		}
		h := waitChain(t, rec, func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().TraceID().String() == tid })
		h.check(t)
		if p := h.edge.Parent(); p.SpanID().String() != sid || !p.IsRemote() {
			t.Errorf("edge parent %s (remote %v), want the client's span %s", p.SpanID(), p.IsRemote(), sid)
		}
	})

	t.Run("sdk path meta traceparent", func(t *testing.T) {
		// A legacy HTTP+SSE session: its messages take the SDK path.
		c := mcp.NewClient(&mcp.Implementation{Name: "switchyard-test", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.SSEClientTransport{Endpoint: g.url + "/sse"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		const tid, sid = "11112222333344445555666677778888", "1111222233334444"
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
			Name: "fixture__echo", Arguments: map[string]any{"text": "sse"},
			Meta: mcp.Meta{"traceparent": "00-" + tid + "-" + sid + "-01"},
		})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		h := waitChain(t, rec, func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().TraceID().String() == tid })
		h.check(t)
		if p := h.edge.Parent(); p.SpanID().String() != sid || !p.IsRemote() {
			t.Errorf("edge parent %s (remote %v), want the client's span %s", p.SpanID(), p.IsRemote(), sid)
		}
	})
}
