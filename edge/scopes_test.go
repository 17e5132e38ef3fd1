package edge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/testutil/idp"
)

// TestEdgeRequiredScopes: a JWT that authenticates but lacks a scope its
// tenant's policy requires (for everything, for an upstream, for a tool)
// gets 403 with a Bearer challenge naming the scopes (error=
// "insufficient_scope", RFC 6750 section 3.1), and nothing reaches the
// bus; with them (the scope claim or scp, a string or an array) the
// request goes on. An API key, which has no scopes, is refused the same.
// The fast path and the SDK path.
func TestEdgeRequiredScopes(t *testing.T) {
	scoped := tenancy.Tenant{Name: "sco", Selectors: []tenant.Selector{{Claim: "org", Value: "sco"}},
		Policy: policy.Spec{AllUpstreams: true, Default: policy.Allow, RequiredScopes: []policy.ScopeRule{
			{Scopes: []string{"mcp"}},
			{Upstream: "up", Scopes: []string{"up:use"}},
			{Kind: policy.KindTools, Pattern: "up__danger*", Scopes: []string{"up:admin"}},
		}}}
	for _, sdkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("noFastPath=%v", sdkOnly), func(t *testing.T) {
			p := idp.Start(t, idp.Options{Audience: authAudience})
			key, rec, err := apikey.Generate()
			if err != nil {
				t.Fatal(err)
			}
			rec.Tenant, rec.Principal = "sco", "svc"
			snap := tenancy.NewSnapshot(append(authTenants(false), scoped), []apikey.Record{rec})
			c := &capture{}
			g := newRigWith(t, c.handle, &rigOpts{noFastPath: sdkOnly, tenancy: tenancy.Static{Snap: snap},
				auth: AuthConfig{JWT: jwtConfig(p, authAudience)}})
			c.mu.Lock()
			c.nc = g.nc
			c.mu.Unlock()
			e := &authEnv{g: g, c: c, idp: p, base: strings.TrimSuffix(g.url, "/mcp")}
			bearer := func(scope any) string {
				claims := map[string]any{"sub": "u1", "org": "sco"}
				switch s := scope.(type) {
				case string:
					claims["scope"] = s
				case []any:
					claims["scp"] = s
				}
				return "Bearer " + p.Token(t, claims)
			}
			// challenged checks a 403 scope challenge naming scope.
			challenged := func(what string, code int, h http.Header, body, scope string) {
				t.Helper()
				ch := h.Get("WWW-Authenticate")
				if code != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) ||
					!strings.Contains(ch, `scope="`+scope+`"`) || !strings.Contains(ch, "resource_metadata=") ||
					!strings.Contains(body, `"code":-32600`) {
					t.Errorf("%s: %d %q %s; want 403 challenging for %q", what, code, ch, body, scope)
				}
			}
			code, h, body := e.do(t, http.MethodPost, "/mcp", bearer(nil), "", initBody)
			challenged("no scope at all", code, h, body, "mcp")
			code, h, body = e.do(t, http.MethodPost, "/mcp", "Bearer "+key, "", initBody)
			challenged("an API key", code, h, body, "mcp")
			code, h, body = e.do(t, http.MethodPost, "/mcp/up", bearer("mcp"), "", initBody)
			challenged("the upstream's endpoint without its scope", code, h, body, "mcp up:use")

			tok := bearer("mcp")
			sid := e.initialize(t, "/mcp", tok)
			call := func(auth, name string) (int, http.Header, string) {
				return e.do(t, http.MethodPost, "/mcp", auth, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"`+name+`"}}`)
			}
			before := len(c.msgs)
			code, h, body = call(tok, "up__echo")
			challenged("the upstream's tool without its scope", code, h, body, "mcp up:use")
			c.mu.Lock()
			if len(c.msgs) != before {
				t.Errorf("a refused call reached the bus: %+v", c.msgs[before:])
			}
			c.mu.Unlock()
			// A session outlives a token: the next request's token decides.
			if code, _, body := call(bearer("mcp up:use"), "up__echo"); code != http.StatusOK {
				t.Errorf("with the scopes: %d %s", code, body)
			}
			code, h, body = call(bearer("mcp up:use"), "up__danger_delete")
			challenged("a guarded tool", code, h, body, "mcp up:use up:admin")
			// Another member of an unexpected type does not hide the name.
			code, h, body = e.do(t, http.MethodPost, "/mcp", bearer("mcp up:use"), sid,
				`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__danger_delete","uri":0,"ref":1}}`)
			challenged("a guarded tool with odd members", code, h, body, "mcp up:use up:admin")
			// Nor does a batch (2025-03-26 has them).
			code, h, body = e.do(t, http.MethodPost, "/mcp", bearer("mcp up:use"), sid,
				`[{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__danger_delete"}}]`, "Mcp-Protocol-Version", "2025-03-26")
			challenged("a guarded tool in a batch", code, h, body, "mcp up:use up:admin")
			c.mu.Lock()
			for _, msg := range c.msgs[before:] {
				if msg.req.Name == "up__danger_delete" {
					// Only the call made with every scope below may reach it.
					t.Errorf("a refused guarded call reached the bus")
				}
			}
			c.mu.Unlock()
			if code, _, body := call(bearer([]any{"mcp", "up:use", "up:admin"}), "up__danger_delete"); code != http.StatusOK {
				t.Errorf("with scp as an array: %d %s", code, body)
			}
			// Another tenant's policy has no scope rules: nothing required.
			if code, _, body := e.do(t, http.MethodPost, "/mcp", "Bearer "+p.Token(t, map[string]any{"sub": "u2", "org": "acme"}), "", initBody); code != http.StatusOK {
				t.Errorf("a tenant without scope rules: %d %s", code, body)
			}
		})
	}
}
