package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/idp"
)

// routed is one message the rig's router received.
type routed struct {
	subject string
	req     proto.Request
}

// capture is a router that answers tools/list with one tool and every
// other request with an empty result, and records what it received.
type capture struct {
	nc   *nats.Conn
	mu   sync.Mutex
	msgs []routed
}

func (c *capture) handle(m *nats.Msg) {
	var req proto.Request
	if err := proto.Unmarshal(m.Data, &req); err != nil {
		return
	}
	req.Params = append([]byte(nil), req.Params...) // Unmarshal may alias m.Data
	c.mu.Lock()
	c.msgs = append(c.msgs, routed{subject: m.Subject, req: req})
	nc := c.nc
	c.mu.Unlock()
	r := &proto.Reply{Result: []byte(`{"content":[]}`)}
	if req.Method == "tools/list" {
		r.Result = []byte(`{"tools":[{"name":"up__echo","inputSchema":{"type":"object"}}]}`)
	}
	reply(nc, m, r)
}

// last returns the last message received with method.
func (c *capture) last(t *testing.T, method string) routed {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if c.msgs[i].req.Method == method {
			return c.msgs[i]
		}
	}
	t.Fatalf("the router received no %s", method)
	return routed{}
}

// authEnv is a rig whose edge authenticates: tenants acme (org=acme, every
// upstream), beta (org=beta, sees only upstream "zzz"), dup1 and dup2 (both
// select group "shared"), API keys minted for them, and an IdP as the
// only JWT issuer.
type authEnv struct {
	g    *rig
	c    *capture
	idp  *idp.IdP
	base string            // http://127.0.0.1:<port>
	keys map[string]string // by name: plaintext API keys
}

// authAudience is the audience the edge accepts from the IdP in these
// tests (the OAuth test uses the endpoint URL instead).
const authAudience = "switchyard-test"

func authTenants(anonymous bool) []tenancy.Tenant {
	all := policy.Spec{AllUpstreams: true, Default: policy.Allow}
	ts := []tenancy.Tenant{
		{Name: "acme", Selectors: []tenant.Selector{{Claim: "org", Value: "acme"}}, Policy: all},
		{Name: "beta", Selectors: []tenant.Selector{{Claim: "org", Value: "beta"}},
			Policy: policy.Spec{Upstreams: []string{"zzz"}, Default: policy.Allow}},
		{Name: "dup1", Selectors: []tenant.Selector{{Group: "shared"}}, Policy: all},
		{Name: "dup2", Selectors: []tenant.Selector{{Group: "shared"}}, Policy: all},
	}
	if anonymous {
		ts = append(ts, tenancy.Tenant{Name: "pub", Anonymous: true, Policy: all})
	}
	return ts
}

// mintKeys makes API keys: alice and bob (acme), carol (beta), revoked and
// expired (acme), ghost (of a tenant that does not exist) and unknown
// (valid shape, no record). It returns the plaintext keys by name and the
// records the snapshot holds.
func mintKeys(t *testing.T) (map[string]string, []apikey.Record) {
	t.Helper()
	keys := map[string]string{}
	var recs []apikey.Record
	for _, k := range []struct {
		name, tenant, principal  string
		revoked, expired, absent bool
	}{
		{name: "alice", tenant: "acme", principal: "alice"},
		{name: "bob", tenant: "acme", principal: "bob"},
		{name: "carol", tenant: "beta", principal: "carol"},
		{name: "revoked", tenant: "acme", principal: "dave", revoked: true},
		{name: "expired", tenant: "acme", principal: "erin", expired: true},
		{name: "ghost", tenant: "gone", principal: "gus"},
		{name: "unknown", tenant: "acme", principal: "ursula", absent: true},
	} {
		key, rec, err := apikey.Generate()
		if err != nil {
			t.Fatal(err)
		}
		rec.Tenant, rec.Principal, rec.Revoked = k.tenant, k.principal, k.revoked
		if k.expired {
			rec.ExpiresUnixMs = time.Now().Add(-time.Minute).UnixMilli()
		}
		keys[k.name] = key
		if !k.absent {
			recs = append(recs, rec)
		}
	}
	return keys, recs
}

func jwtConfig(p *idp.IdP, audience string) *jwtauth.Config {
	return &jwtauth.Config{
		Issuers: []jwtauth.Issuer{{Issuer: p.Issuer(), JWKSURL: p.JWKSURL(), Audiences: []string{audience}, AllowHTTP: true}},
		// Tests refetch the key set right after a rotation or an unknown kid.
		MinRefreshInterval: time.Millisecond,
	}
}

// newAuthEnv starts an IdP and an edge that authenticates against it and
// the tenants of authTenants(anonymous). tweak, if set, may change the
// rig's options (its auth field already set) before the edge starts.
func newAuthEnv(t *testing.T, anonymous bool, tweak func(*rigOpts)) *authEnv {
	t.Helper()
	p := idp.Start(t, idp.Options{Audience: authAudience})
	keys, recs := mintKeys(t)
	snap := tenancy.NewSnapshot(authTenants(anonymous), recs)
	if probs := snap.Problems(); len(probs) > 0 {
		t.Fatalf("snapshot problems: %v", probs)
	}
	o := &rigOpts{tenancy: tenancy.Static{Snap: snap}, auth: AuthConfig{JWT: jwtConfig(p, authAudience)}}
	if tweak != nil {
		tweak(o)
	}
	c := &capture{}
	g := newRigWith(t, c.handle, o)
	c.mu.Lock()
	c.nc = g.nc
	c.mu.Unlock()
	return &authEnv{g: g, c: c, idp: p, base: strings.TrimSuffix(g.url, "/mcp"), keys: keys}
}

// do sends one request to path. auth is the whole Authorization header
// ("" for none); sid the session, if any; hdr more headers, name then
// value.
func (e *authEnv) do(t *testing.T, method, path, auth, sid, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// initialize opens a session at path as auth and waits until the edge
// has it ready, so that later requests may take the fast path.
func (e *authEnv) initialize(t *testing.T, path, auth string) string {
	t.Helper()
	code, h, body := e.do(t, http.MethodPost, path, auth, "", initBody)
	if code != http.StatusOK {
		t.Fatalf("initialize %s: %d %s", path, code, body)
	}
	sid := h.Get("Mcp-Session-Id")
	if code, _, body := e.do(t, http.MethodPost, path, auth, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cs := e.g.e.sessions.get(sid); cs == nil || !cs.ready.Load(); cs = e.g.e.sessions.get(sid) {
		if time.Now().After(deadline) {
			t.Fatal("session not ready")
		}
		time.Sleep(time.Millisecond)
	}
	return sid
}

// listTools sends tools/list on the session and returns what the router
// received for it.
func (e *authEnv) listTools(t *testing.T, path, auth, sid string) routed {
	t.Helper()
	code, _, body := e.do(t, http.MethodPost, path, auth, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	if code != http.StatusOK || !strings.Contains(body, "up__echo") {
		t.Fatalf("tools/list: %d %s", code, body)
	}
	return e.c.last(t, "tools/list")
}

// checkRouted checks that a request was routed for tenant as principal.
func checkRouted(t *testing.T, got routed, tenant, principal string) {
	t.Helper()
	if !strings.HasPrefix(got.subject, "switchyard.v1.route."+tenant+".") || got.req.Tenant != tenant || got.req.Principal != principal {
		t.Fatalf("routed on %s as tenant %q principal %q; want tenant %q principal %q", got.subject, got.req.Tenant, got.req.Principal, tenant, principal)
	}
}

// challenge returns the parameters of the response's Bearer challenge.
func challenge(t *testing.T, h http.Header) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %+v %v", h.Values("WWW-Authenticate"), cs, err)
	}
	return cs[0].Params
}

// check401 checks a 401 with a Bearer challenge that names path's
// metadata and has error code errCode ("" for none).
func check401(t *testing.T, e *authEnv, path string, code int, h http.Header, body, errCode string) {
	t.Helper()
	if code != http.StatusUnauthorized {
		t.Fatalf("got %d %s, want 401", code, body)
	}
	p := challenge(t, h)
	if want := e.base + "/.well-known/oauth-protected-resource" + path; p["resource_metadata"] != want {
		t.Fatalf("resource_metadata %q, want %q", p["resource_metadata"], want)
	}
	if p["error"] != errCode {
		t.Fatalf("error %q, want %q (challenge %v)", p["error"], errCode, p)
	}
}

func TestAuthNoCredentialsChallenge(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	for _, path := range []string{"/mcp", "/mcp/up", "/mcp/nope", "/sse"} {
		t.Run(path, func(t *testing.T) {
			method, body := http.MethodPost, initBody
			if path == "/sse" {
				method, body = http.MethodGet, ""
			}
			code, h, b := e.do(t, method, path, "", "", body)
			check401(t, e, path, code, h, b, "")
		})
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if len(e.c.msgs) != 0 {
		t.Fatalf("the router received %d messages", len(e.c.msgs))
	}
}

func TestAuthMalformedCredentials(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	for _, tc := range []struct {
		name, auth, errCode string
	}{
		{"basic scheme", "Basic YWxpY2U6c2VjcmV0", ""},
		{"bearer without token", "Bearer", "invalid_request"},
		{"bearer with blank token", "Bearer   ", "invalid_request"},
		{"two tokens", "Bearer a b", "invalid_request"},
		{"token not a JWT", "Bearer not-a-jwt", "invalid_token"},
		{"three garbage segments", "Bearer a.b.c", "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, b := e.do(t, http.MethodPost, "/mcp", tc.auth, "", initBody)
			// RFC 6750 section 3.1: another scheme gets a bare 401
			// challenge, a malformed Bearer request 400 invalid_request.
			if tc.errCode != "invalid_request" {
				check401(t, e, "/mcp", code, h, b, tc.errCode)
				return
			}
			// Read without a parser: TestAuthChallengeSyntax holds the
			// parse of this challenge.
			c := h.Get("WWW-Authenticate")
			if code != http.StatusBadRequest || !strings.HasPrefix(c, `Bearer resource_metadata="`+e.base+`/.well-known/oauth-protected-resource/mcp", `) ||
				!strings.Contains(c, `error="invalid_request"`) {
				t.Fatalf("got %d, WWW-Authenticate %q", code, c)
			}
		})
	}
	t.Run("scheme is case-insensitive", func(t *testing.T) {
		if code, _, b := e.do(t, http.MethodPost, "/mcp", "bearer "+e.keys["alice"], "", initBody); code != http.StatusOK {
			t.Fatalf("got %d %s", code, b)
		}
	})
}

// TestAuthChallengeSyntax parses every kind of challenge the edge sends
// as the go-sdk client does (RFC 9110 section 11.6.1), and checks that
// error_description keeps to RFC 6750 section 3's characters (no quote or
// backslash), so that a client can read the resource_metadata beside it.
func TestAuthChallengeSyntax(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	// Every challenge must parse (oauthex.ParseWWWAuthenticate): a
	// description with '"' would end its quoted-string early.
	for _, tc := range []struct{ name, auth, errCode string }{
		{"no credentials", "", ""},
		{"basic scheme", "Basic YWxpY2U6c2VjcmV0", ""},
		{"bearer without token", "Bearer", "invalid_request"},
		{"unknown key", "Bearer " + e.keys["unknown"], "invalid_token"},
		{"expired key", "Bearer " + e.keys["expired"], "invalid_token"},
		{"bad JWT", "Bearer a.b.c", "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, b := e.do(t, http.MethodPost, "/mcp", tc.auth, "", initBody)
			if tc.errCode == "invalid_request" && code == http.StatusBadRequest {
				code = http.StatusUnauthorized // 400 carries the same challenge
			}
			check401(t, e, "/mcp", code, h, b, tc.errCode)
			d := challenge(t, h)["error_description"]
			for i := 0; i < len(d); i++ {
				if c := d[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
					t.Fatalf("error_description %q has %q, outside RFC 6750's characters", d, c)
				}
			}
		})
	}
}

func TestAuthResourceMetadata(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	for _, tc := range []struct{ path, resource string }{
		{"", e.base},
		{"/mcp", e.base + "/mcp"},
		{"/mcp/up", e.base + "/mcp/up"},
		{"/sse", e.base + "/sse"},
	} {
		t.Run("path="+tc.path, func(t *testing.T) {
			// The SDK client's own fetch checks the resource (RFC 9728
			// section 3.3) and the authorization server URLs.
			md, err := oauthex.GetProtectedResourceMetadata(t.Context(), e.base+"/.well-known/oauth-protected-resource"+tc.path, tc.resource, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != e.idp.Issuer() {
				t.Fatalf("authorization_servers %v, want the JWT issuer %s", md.AuthorizationServers, e.idp.Issuer())
			}
			if len(md.BearerMethodsSupported) != 1 || md.BearerMethodsSupported[0] != "header" {
				t.Fatalf("bearer_methods_supported %v", md.BearerMethodsSupported)
			}
		})
	}
	for _, path := range []string{"/other", "/mcp/a/b", "/mcpx"} {
		t.Run("unknown "+path, func(t *testing.T) {
			if code, _, b := e.do(t, http.MethodGet, "/.well-known/oauth-protected-resource"+path, "", "", ""); code != http.StatusNotFound {
				t.Fatalf("got %d %s", code, b)
			}
		})
	}
	// The challenge of each endpoint leads to a document whose resource is
	// that endpoint's URL.
	for _, path := range []string{"/mcp", "/mcp/up"} {
		_, h, _ := e.do(t, http.MethodPost, path, "", "", initBody)
		u := challenge(t, h)["resource_metadata"]
		if _, err := oauthex.GetProtectedResourceMetadata(t.Context(), u, e.base+path, nil); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

func TestAuthResourceMetadataConfigured(t *testing.T) {
	e := newAuthEnv(t, false, func(o *rigOpts) {
		o.auth.PublicURL = "https://gw.example.test/"
		o.auth.AuthorizationServers = []string{"https://login.example.test"}
		o.auth.ScopesSupported = []string{"mcp:tools"}
	})
	code, _, body := e.do(t, http.MethodGet, "/.well-known/oauth-protected-resource/mcp/up", "", "", "")
	var md oauthex.ProtectedResourceMetadata
	if code != http.StatusOK || json.Unmarshal([]byte(body), &md) != nil {
		t.Fatalf("got %d %s", code, body)
	}
	if md.Resource != "https://gw.example.test/mcp/up" || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != "https://login.example.test" ||
		len(md.ScopesSupported) != 1 || md.ScopesSupported[0] != "mcp:tools" {
		t.Fatalf("metadata %+v", md)
	}
	_, h, _ := e.do(t, http.MethodPost, "/mcp", "", "", initBody)
	if got := challenge(t, h)["resource_metadata"]; got != "https://gw.example.test/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("resource_metadata %q", got)
	}
}

func TestAuthAnonymousTenant(t *testing.T) {
	e := newAuthEnv(t, true, nil)
	sid := e.initialize(t, "/mcp", "")
	checkRouted(t, e.listTools(t, "/mcp", "", sid), "pub", "")
	// Credentials still choose their own tenant.
	key := "Bearer " + e.keys["alice"]
	sid = e.initialize(t, "/mcp", key)
	checkRouted(t, e.listTools(t, "/mcp", key, sid), "acme", "alice")
	// Bad credentials are refused, not downgraded to anonymous.
	code, h, b := e.do(t, http.MethodPost, "/mcp", "Bearer "+e.keys["revoked"], "", initBody)
	check401(t, e, "/mcp", code, h, b, "invalid_token")
}

func TestAuthAPIKeys(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	t.Run("valid", func(t *testing.T) {
		auth := "Bearer " + e.keys["alice"]
		sid := e.initialize(t, "/mcp", auth)
		checkRouted(t, e.listTools(t, "/mcp", auth, sid), "acme", "alice")
		code, _, body := e.do(t, http.MethodPost, "/mcp", auth, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
		if code != http.StatusOK {
			t.Fatalf("tools/call: %d %s", code, body)
		}
		checkRouted(t, e.c.last(t, "tools/call"), "acme", "alice")
		// The upstream view routes for the tenant too.
		sid = e.initialize(t, "/mcp/up", auth)
		got := e.listTools(t, "/mcp/up", auth, sid)
		checkRouted(t, got, "acme", "alice")
		if got.req.View != "up" {
			t.Fatalf("view %q", got.req.View)
		}
	})
	for _, tc := range []struct{ name, key, desc string }{
		{"unknown", e.keys["unknown"], "not valid"},
		{"malformed", "syk_abc", "not valid"},
		{"bad checksum", badChecksum(e.keys["alice"]), "not valid"},
		{"revoked", e.keys["revoked"], "not valid"},
		{"expired", e.keys["expired"], "expired"},
		{"tenant gone", e.keys["ghost"], "not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, b := e.do(t, http.MethodPost, "/mcp", "Bearer "+tc.key, "", initBody)
			check401(t, e, "/mcp", code, h, b, "invalid_token")
			if !strings.Contains(challenge(t, h)["error_description"], tc.desc) {
				t.Fatalf("error_description %q, want %q in it", challenge(t, h)["error_description"], tc.desc)
			}
			if strings.Contains(b, tc.key) || strings.Contains(h.Get("WWW-Authenticate"), tc.key) {
				t.Fatal("the answer quotes the key")
			}
		})
	}
}

// badChecksum returns key with its checksum changed. It changes the
// second-to-last character, all five bits of which are checksum bits: the
// last one holds two checksum bits and three of padding, so changing it
// ('a' to 'b', 1 key in 4) would leave the checksum as it was and test
// non-canonical padding instead.
func badChecksum(key string) string {
	i := len(key) - 2
	c := byte('a')
	if key[i] == c {
		c = 'b'
	}
	return key[:i] + string(c) + key[i+1:]
}

func TestAuthJWT(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	now := time.Now()
	t.Run("valid", func(t *testing.T) {
		auth := "Bearer " + e.idp.Token(t, map[string]any{"sub": "alice@acme", "org": "acme"})
		sid := e.initialize(t, "/mcp", auth)
		checkRouted(t, e.listTools(t, "/mcp", auth, sid), "acme", "alice@acme")
	})
	t.Run("nbf and iat in the past", func(t *testing.T) {
		auth := "Bearer " + e.idp.Token(t, map[string]any{"org": "beta", "nbf": now.Add(-time.Second), "iat": now.Add(-time.Second)})
		sid := e.initialize(t, "/mcp", auth)
		checkRouted(t, e.listTools(t, "/mcp", auth, sid), "beta", idp.DefaultSubject)
	})
	for _, tc := range []struct {
		name   string
		token  func(t *testing.T) string
		status int
	}{
		{"missing exp", func(t *testing.T) string { return e.idp.Token(t, map[string]any{"org": "acme", "exp": nil}) }, 401},
		{"expired", func(t *testing.T) string {
			return e.idp.Token(t, map[string]any{"org": "acme", "iat": now.Add(-2 * time.Hour), "exp": now.Add(-time.Hour)})
		}, 401},
		{"not yet valid", func(t *testing.T) string {
			return e.idp.Token(t, map[string]any{"org": "acme", "nbf": now.Add(time.Hour)})
		}, 401},
		{"issued in the future", func(t *testing.T) string {
			return e.idp.Token(t, map[string]any{"org": "acme", "iat": now.Add(time.Hour)})
		}, 401},
		{"wrong audience", func(t *testing.T) string { return e.idp.Token(t, map[string]any{"org": "acme", "aud": "someone-else"}) }, 401},
		{"wrong issuer", func(t *testing.T) string {
			return e.idp.Token(t, map[string]any{"org": "acme", "iss": "http://127.0.0.1:1"})
		}, 401},
		{"no issuer", func(t *testing.T) string { return e.idp.Token(t, map[string]any{"org": "acme", "iss": nil}) }, 401},
		{"key not in the JWKS", func(t *testing.T) string {
			return e.idp.TokenSignedBy(t, idp.NewKey(t), map[string]any{"org": "acme"})
		}, 401},
		{"alg none", func(t *testing.T) string { return e.idp.Unsigned(t, map[string]any{"org": "acme"}) }, 401},
		{"signature of another token", func(t *testing.T) string {
			a := strings.Split(e.idp.Token(t, map[string]any{"org": "beta"}), ".")
			b := strings.Split(e.idp.Token(t, map[string]any{"org": "acme"}), ".")
			return a[0] + "." + b[1] + "." + a[2]
		}, 401},
		{"no tenant matches", func(t *testing.T) string { return e.idp.Token(t, map[string]any{"org": "nobody"}) }, 403},
		{"two tenants match", func(t *testing.T) string { return e.idp.Token(t, map[string]any{"groups": []string{"shared"}}) }, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, b := e.do(t, http.MethodPost, "/mcp", "Bearer "+tc.token(t), "", initBody)
			if tc.status == 401 {
				check401(t, e, "/mcp", code, h, b, "invalid_token")
				return
			}
			if code != tc.status || h.Get("WWW-Authenticate") != "" {
				t.Fatalf("got %d (WWW-Authenticate %q) %s, want %d without a challenge", code, h.Get("WWW-Authenticate"), b, tc.status)
			}
		})
	}
	// Only the two valid tokens' tools/list reached the router.
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if len(e.c.msgs) != 2 {
		t.Fatalf("the router received %d messages, want 2", len(e.c.msgs))
	}
}

func TestAuthJWTRotation(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	claims := map[string]any{"org": "acme"}
	old := "Bearer " + e.idp.Token(t, claims)
	if code, _, b := e.do(t, http.MethodPost, "/mcp", old, "", initBody); code != http.StatusOK {
		t.Fatalf("before rotation: %d %s", code, b)
	}
	e.idp.Rotate(t)
	// The new kid is unknown to the cached set: the edge fetches it again.
	fresh := "Bearer " + e.idp.Token(t, claims)
	if code, _, b := e.do(t, http.MethodPost, "/mcp", fresh, "", initBody); code != http.StatusOK {
		t.Fatalf("after rotation: %d %s", code, b)
	}
	// That fetch dropped the old key.
	code, h, b := e.do(t, http.MethodPost, "/mcp", old, "", initBody)
	check401(t, e, "/mcp", code, h, b, "invalid_token")
}

func TestAuthSessionBinding(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	alice, bob, carol := "Bearer "+e.keys["alice"], "Bearer "+e.keys["bob"], "Bearer "+e.keys["carol"]
	aliceJWT := "Bearer " + e.idp.Token(t, map[string]any{"sub": "alice", "org": "acme"})
	sid := e.initialize(t, "/mcp", alice)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`
	for _, tc := range []struct{ name, auth string }{
		{"bob, same tenant", bob},
		{"carol, other tenant", carol},
		{"alice's subject by JWT", aliceJWT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, body := range []string{list, call} {
				if code, _, b := e.do(t, http.MethodPost, "/mcp", tc.auth, sid, body); code != http.StatusNotFound {
					t.Fatalf("POST: got %d %s, want 404", code, b)
				}
			}
			if code, _, b := e.do(t, http.MethodGet, "/mcp", tc.auth, sid, ""); code != http.StatusNotFound {
				t.Fatalf("GET: got %d %s, want 404", code, b)
			}
			if code, _, b := e.do(t, http.MethodDelete, "/mcp", tc.auth, sid, ""); code != http.StatusNotFound {
				t.Fatalf("DELETE: got %d %s, want 404", code, b)
			}
		})
	}
	t.Run("no credentials", func(t *testing.T) {
		code, h, b := e.do(t, http.MethodPost, "/mcp", "", sid, list)
		check401(t, e, "/mcp", code, h, b, "")
	})
	t.Run("another view", func(t *testing.T) {
		if code, _, b := e.do(t, http.MethodPost, "/mcp/up", alice, sid, list); code != http.StatusNotFound {
			t.Fatalf("got %d %s, want 404", code, b)
		}
	})
	// Nothing above reached the router or ended the session.
	e.c.mu.Lock()
	n := len(e.c.msgs)
	e.c.mu.Unlock()
	if n != 0 {
		t.Fatalf("the router received %d messages", n)
	}
	checkRouted(t, e.listTools(t, "/mcp", alice, sid), "acme", "alice")
}

func TestAuthUpstreamHiddenByPolicy(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	carol := "Bearer " + e.keys["carol"] // beta sees only "zzz"
	hidden, hh, hb := e.do(t, http.MethodPost, "/mcp/up", carol, "", initBody)
	unknown, uh, ub := e.do(t, http.MethodPost, "/mcp/nope", carol, "", initBody)
	if hidden != http.StatusNotFound || unknown != http.StatusNotFound {
		t.Fatalf("hidden %d %s, unknown %d %s", hidden, hb, unknown, ub)
	}
	if strings.ReplaceAll(hb, `\"up\"`, `\"nope\"`) != ub || hh.Get("Content-Type") != uh.Get("Content-Type") {
		t.Fatalf("a hidden upstream reads %q, an unknown one %q", hb, ub)
	}
	// The metadata document does not tell them apart either: both exist.
	for _, path := range []string{"/mcp/up", "/mcp/nope"} {
		if code, _, b := e.do(t, http.MethodGet, "/.well-known/oauth-protected-resource"+path, "", "", ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, b)
		}
	}
	// acme sees it.
	alice := "Bearer " + e.keys["alice"]
	sid := e.initialize(t, "/mcp/up", alice)
	checkRouted(t, e.listTools(t, "/mcp/up", alice, sid), "acme", "alice")
	// beta's federated view is there.
	e.initialize(t, "/mcp", carol)
}

// TestAuthPrincipalOnEveryPath checks the tenant and principal (and a
// JWT principal's issuer, which task ids are sealed to) of calls served by
// the fast path, by the SDK (the principal travels in the SDK's
// TokenInfo) and statelessly (2026-07-28), for an API key and a JWT.
func TestAuthPrincipalOnEveryPath(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`
	call2026 := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__echo","arguments":{},` + meta2026 + `}}`
	for _, sdkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("noFastPath=%v", sdkOnly), func(t *testing.T) {
			e := newAuthEnv(t, false, func(o *rigOpts) { o.noFastPath = sdkOnly })
			for _, who := range []struct{ name, auth, tenant, principal, issuer string }{
				{"key", "Bearer " + e.keys["carol"], "beta", "carol", ""},
				{"jwt", "Bearer " + e.idp.Token(t, map[string]any{"sub": "zed", "org": "acme"}), "acme", "zed", e.idp.Issuer()},
			} {
				t.Run(who.name, func(t *testing.T) {
					sid := e.initialize(t, "/mcp", who.auth)
					if code, _, b := e.do(t, http.MethodPost, "/mcp", who.auth, sid, call); code != http.StatusOK {
						t.Fatalf("stateful: %d %s", code, b)
					}
					got := e.c.last(t, "tools/call")
					checkRouted(t, got, who.tenant, who.principal)
					if got.req.Issuer != who.issuer {
						t.Fatalf("stateful: issuer %q, want %q", got.req.Issuer, who.issuer)
					}
					if code, _, b := e.do(t, http.MethodPost, "/mcp", who.auth, "", call2026, hdr2026("tools/call", "up__echo")...); code != http.StatusOK {
						t.Fatalf("2026: %d %s", code, b)
					}
					got = e.c.last(t, "tools/call")
					checkRouted(t, got, who.tenant, who.principal)
					if got.req.Protocol != protocol2026 || got.req.Session != "" || got.req.Issuer != who.issuer {
						t.Fatalf("2026 call routed as %+v", got.req)
					}
				})
			}
			// Without credentials the stateless path is refused too.
			code, h, b := e.do(t, http.MethodPost, "/mcp", "", "", call2026, hdr2026("tools/call", "up__echo")...)
			check401(t, e, "/mcp", code, h, b, "")
		})
	}
}

// TestAuthJWKSUnavailable: a token of an issuer whose key set has never
// been fetched is the gateway's failure, 503 with Retry-After, not the
// client's (no challenge that would send it to authorize again).
func TestAuthJWKSUnavailable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	e := newAuthEnv(t, false, func(o *rigOpts) {
		o.auth.JWT.Issuers[0].JWKSURL = dead.URL + "/jwks"
	})
	code, h, b := e.do(t, http.MethodPost, "/mcp", "Bearer "+e.idp.Token(t, map[string]any{"org": "acme"}), "", initBody)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || h.Get("WWW-Authenticate") != "" {
		t.Fatalf("got %d (Retry-After %q, WWW-Authenticate %q) %s", code, h.Get("Retry-After"), h.Get("WWW-Authenticate"), b)
	}
	// API keys do not depend on it.
	if code, _, b := e.do(t, http.MethodPost, "/mcp", "Bearer "+e.keys["alice"], "", initBody); code != http.StatusOK {
		t.Fatalf("API key: %d %s", code, b)
	}
}

// swapSource is a tenancy.Source whose snapshot a test replaces, as a
// Watcher's changes when tenancy-svc revokes a key or deletes a tenant.
type swapSource struct {
	p atomic.Pointer[tenancy.Snapshot]
}

func (s *swapSource) Current() *tenancy.Snapshot { return s.p.Load() }

// TestAuthRevokedMidSession: every request authenticates again, so a key
// revoked, or a tenant deleted, while its session is open stops the very
// next request.
func TestAuthRevokedMidSession(t *testing.T) {
	keys, recs := mintKeys(t)
	src := &swapSource{}
	src.p.Store(tenancy.NewSnapshot(authTenants(false), recs))
	e := newAuthEnv(t, false, func(o *rigOpts) { o.tenancy = src })
	e.keys = keys // the snapshot's keys, not the ones newAuthEnv minted
	alice, carol := "Bearer "+keys["alice"], "Bearer "+keys["carol"]
	aliceSID := e.initialize(t, "/mcp", alice)
	carolSID := e.initialize(t, "/mcp", carol)
	checkRouted(t, e.listTools(t, "/mcp", alice, aliceSID), "acme", "alice")

	// alice's key is revoked.
	revoked := slices.Clone(recs)
	for i := range revoked {
		if revoked[i].Principal == "alice" {
			revoked[i].Revoked = true
		}
	}
	src.p.Store(tenancy.NewSnapshot(authTenants(false), revoked))
	code, h, b := e.do(t, http.MethodPost, "/mcp", alice, aliceSID, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	check401(t, e, "/mcp", code, h, b, "invalid_token")
	checkRouted(t, e.listTools(t, "/mcp", carol, carolSID), "beta", "carol")

	// Tenant beta is deleted: carol's key names a tenant that is gone.
	var rest []tenancy.Tenant
	for _, tn := range authTenants(false) {
		if tn.Name != "beta" {
			rest = append(rest, tn)
		}
	}
	src.p.Store(tenancy.NewSnapshot(rest, revoked))
	code, h, b = e.do(t, http.MethodPost, "/mcp", carol, carolSID, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	check401(t, e, "/mcp", code, h, b, "invalid_token")
}
