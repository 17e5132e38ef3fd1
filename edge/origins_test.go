package edge

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/publicurl"
)

// TestEdgeOriginRule: a request without an Origin is served; with one,
// edge.allowed_origins decides when set; when not, a loopback listener
// serves loopback origins only and any other listener only
// auth.public_url's origin, never what the Host header names (a rebound
// name controls it). Requests are built in place (no traffic).
func TestEdgeOriginRule(t *testing.T) {
	allowed, err := publicurl.ParseOrigins([]string{"https://app.example.com", "https://*.corp.example"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publicurl.ParsePublicURL("https://gw.example.com/tools")
	if err != nil {
		t.Fatal(err)
	}
	pub443, err := publicurl.ParsePublicURL("https://gw.example.com:443")
	if err != nil {
		t.Fatal(err)
	}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	external := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}
	tests := []struct {
		name    string
		origins *publicurl.Origins
		public  *publicurl.Origin
		local   net.Addr
		origin  string
		host    string
		want    bool
	}{
		{"no Origin, external", nil, nil, external, "", "gw", true},
		{"loopback origin, loopback listener", nil, nil, loopback, "http://localhost:3000", "localhost:8080", true},
		{"foreign origin, loopback listener", nil, nil, loopback, "https://evil.example", "localhost:8080", false},
		{"foreign origin, external listener", nil, nil, external, "https://evil.example", "gw", false},
		{"rebound Host, external listener", nil, nil, external, "http://evil.example", "evil.example", false},
		{"public_url's origin", nil, &pub, external, "https://gw.example.com", "gw", true},
		{"public_url's host, other scheme", nil, &pub, external, "http://gw.example.com", "gw", false},
		{"public_url's origin with its default port", nil, &pub443, external, "https://gw.example.com", "gw", true},
		{"public_url's host, another port", nil, &pub443, external, "https://gw.example.com:8443", "gw", false},
		{"configured origin", allowed, nil, external, "https://app.example.com", "gw", true},
		{"configured pattern", allowed, nil, external, "https://ci.corp.example", "gw", true},
		{"not configured", allowed, nil, external, "https://evil.example", "gw", false},
		{"configured list replaces the loopback default", allowed, nil, loopback, "http://localhost:3000", "localhost", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Service{cfg: Config{AllowedOrigins: tc.origins}, public: publicurl.NewResolver(tc.public, nil, "127.0.0.1:8080")}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			if got := s.originOK(r); got != tc.want {
				t.Errorf("originOK = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEdgeCORSPreflight: a preflight from an allowed origin is answered
// 204 with the methods and headers an MCP client sends (its SEP-2243
// Mcp-Param-* headers too), and every answer to that origin exposes the
// MCP headers; a preflight from another origin gets 403 and no CORS
// header; the protected resource metadata is readable from any origin.
func TestEdgeCORSPreflight(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) {
		c.AllowedOrigins, _ = publicurl.ParseOrigins([]string{"https://app.example.com"})
	}})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, g.url, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, mcp-session-id, Mcp-Param-Region")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight("https://app.example.com")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		resp.Header.Get("Access-Control-Allow-Methods") != corsMethods {
		t.Fatalf("allowed preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if h := resp.Header.Get("Access-Control-Allow-Headers"); h != corsHeaders+", Mcp-Param-Region" {
		t.Errorf("allowed headers %q", h)
	}
	resp = preflight("https://evil.example")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign preflight: %d %v", resp.StatusCode, resp.Header)
	}
	_, _, h := g.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		"Origin", "https://app.example.com")
	if h.Get("Access-Control-Allow-Origin") != "https://app.example.com" || h.Get("Access-Control-Expose-Headers") != corsExpose || h.Get("Mcp-Session-Id") == "" {
		t.Errorf("initialize from the allowed origin: %v", h)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url[:len(g.url)-len("/mcp")]+wellKnownPRM+"/mcp", nil)
	req.Header.Set("Origin", "https://anyone.example")
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mresp.Body.Close()
	if mresp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("metadata: %d %v", mresp.StatusCode, mresp.Header)
	}
}
