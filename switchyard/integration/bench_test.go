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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCall is one sequential tools/call through every role of an
// in-process gateway (edge, router, upstream-worker, tenancy-svc on
// in-process NATS) to an in-memory go-sdk upstream (httptest), next to the
// same call made directly to that upstream. The client is plain HTTP
// POSTs on an initialized session, so the numbers are the server sides'
// cost: gateway/op minus direct/op is what Switchyard adds, CPU included
// (all of it runs in this process; allocs/op counts every role).
func BenchmarkCall(b *testing.B) {
	srv := echoServer()
	get := func(*http.Request) *mcp.Server { return srv }
	stateful := mcp.NewStreamableHTTPHandler(get, nil)
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	// Like the edge, one endpoint serves both eras.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= v2026 {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	b.Cleanup(up.Close)
	g := startGateway(b, loadConfig(b, fmt.Sprintf("upstreams:\n  - name: mem\n    url: %s\n", up.URL)))
	for _, era := range []string{v2025, v2026} {
		for _, side := range []struct{ name, url, tool string }{
			{"direct", up.URL, "echo"},
			{"gateway", g.url + "/mcp", "mem__echo"},
		} {
			b.Run("protocol="+era+"/side="+side.name, func(b *testing.B) {
				c := newRawClient(b, side.url, era)
				body := c.callBody(side.tool)
				c.post(body) // first call: the worker opens its upstream session
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c.post(body)
				}
			})
		}
	}
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	return s
}

// rawClient speaks streamable HTTP by hand: one session (2025) or none
// (2026), one POST per call, the response read whole.
type rawClient struct {
	b       testing.TB
	url, pv string
	sid     string
	hc      *http.Client
}

func newRawClient(b testing.TB, url, pv string) *rawClient {
	c := &rawClient{b: b, url: url, pv: pv, hc: &http.Client{}}
	if pv == v2025 {
		h := c.do(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, "", "")
		c.sid = h.Get("Mcp-Session-Id")
		c.do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "")
	}
	return c
}

type callBody struct {
	data []byte
	name string
}

func (c *rawClient) callBody(tool string) callBody {
	meta := ""
	if c.pv == v2026 {
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}`
	}
	return callBody{[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"}` + meta + `}}`), tool}
}

func (c *rawClient) post(cb callBody) {
	c.do(string(cb.data), "tools/call", cb.name)
}

func (c *rawClient) do(body, method, name string) http.Header {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if c.pv == v2026 || c.sid != "" {
		req.Header.Set("Mcp-Protocol-Version", c.pv)
	}
	if c.pv == v2026 && method != "" {
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.b.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || bytes.Contains(data, []byte(`"error"`)) || bytes.Contains(data, []byte(`"isError":true`)) {
		c.b.Fatalf("%s: HTTP %d %s", c.url, resp.StatusCode, data)
	}
	return resp.Header
}
