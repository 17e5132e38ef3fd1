package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchyard-mcp/switchyard/testutil/taskserver"
)

// prefixProxy is a reverse proxy that serves the gateway at g under
// /tools: it answers 404 to every other path, strips the prefix and says
// so with X-Forwarded-Prefix, and sets X-Forwarded-Host and -Proto to
// what the client asked it (httputil.ProxyRequest.SetXForwarded). It
// reaches the gateway from loopback, a trusted peer.
func prefixProxy(t *testing.T, gateway string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(gateway)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.SetXForwarded()
		pr.Out.Header.Set("X-Forwarded-Prefix", "/tools")
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/tools")
		pr.Out.URL.RawPath = ""
	}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/tools/") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front
}

// TestIntegrationPublicURLPrefixProxy: behind a reverse proxy that serves
// the gateway at /tools/ and strips the prefix, a legacy HTTP+SSE client
// (the go-sdk's SSE client transport) follows the endpoint event, which
// names the path under the prefix, and lists and calls tools, in the
// passthrough and the federated view; a streamable HTTP client works the
// same way, and the protected resource metadata names the proxy's URL.
func TestIntegrationPublicURLPrefixProxy(t *testing.T) {
	up := httptest.NewServer(taskserver.New(taskserver.GreetHandler(), taskserver.Options{}))
	t.Cleanup(up.Close)
	g := startGateway(t, loadConfig(t, fmt.Sprintf("upstreams:\n  - name: tk\n    url: %s\n", up.URL)))
	front := prefixProxy(t, g.url)

	for _, tc := range []struct{ path, tool string }{{"/tools/sse/tk", "greet"}, {"/tools/sse", "tk__greet"}} {
		t.Run("legacy SSE "+tc.path, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.SSEClientTransport{Endpoint: front.URL + tc.path}, nil)
			if err != nil {
				t.Fatalf("connect through the proxy: %v", err)
			}
			defer cs.Close()
			eventually(t, 20*time.Second, func() error { // the worker connects to tk
				names, _, err := listAll(t.Context(), cs)
				if err != nil {
					return err
				}
				return hasAll(names, tc.tool)
			})
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"name": "proxy"}})
			if err != nil || res.IsError || !strings.Contains(text(res), "Hello, proxy!") {
				t.Fatalf("tools/call %s through the proxy: %+v, %v", tc.tool, res, err)
			}
		})
	}

	t.Run("streamable HTTP", func(t *testing.T) {
		cs := connect(t, front.URL+"/tools/mcp/tk", v2025, nil)
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "s"}})
		if err != nil || !strings.Contains(text(res), "Hello, s!") {
			t.Fatalf("tools/call: %+v, %v", res, err)
		}
	})

	t.Run("resource metadata", func(t *testing.T) {
		resp, err := httpClient.Get(front.URL + "/tools/.well-known/oauth-protected-resource/mcp/tk")
		if err != nil {
			t.Fatal(err)
		}
		var md oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if want := front.URL + "/tools/mcp/tk"; err != nil || md.Resource != want {
			t.Fatalf("resource %q, %v; want %s", md.Resource, err, want)
		}
	})
}
