package edge

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/testutil/idp"
)

// oauthEnv is an edge behind a reverse proxy whose URL is the edge's
// PublicURL, with an IdP as its JWT issuer. The proxy exists because the
// audience (the /mcp URL) must be configured before the edge picks its
// port; it also stands for the usual deployment behind a load balancer.
type oauthEnv struct {
	g      *rig
	c      *capture
	idp    *idp.IdP
	public string // the proxy's base URL
}

// newOAuthEnv starts it; the IdP's tokens carry claims, and the edge
// accepts the audiences public URL + each of audPaths (default "/mcp").
func newOAuthEnv(t *testing.T, claims map[string]any, audPaths ...string) *oauthEnv {
	t.Helper()
	var target atomic.Pointer[url.URL]
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target.Load())
		pr.Out.Host = pr.In.Host
	}})
	t.Cleanup(front.Close)
	p := idp.Start(t, idp.Options{Subject: "alice", Claims: claims})
	snap := tenancy.NewSnapshot(authTenants(false), nil)
	if len(audPaths) == 0 {
		audPaths = []string{"/mcp"}
	}
	jc := jwtConfig(p, front.URL+audPaths[0])
	for _, a := range audPaths[1:] {
		jc.Issuers[0].Audiences = append(jc.Issuers[0].Audiences, front.URL+a)
	}
	c := &capture{}
	g := newRigWith(t, c.handle, &rigOpts{tenancy: tenancy.Static{Snap: snap}, auth: AuthConfig{JWT: jc, PublicURL: front.URL}})
	c.mu.Lock()
	c.nc = g.nc
	c.mu.Unlock()
	u, _ := url.Parse("http://" + g.e.Addr())
	target.Store(u)
	return &oauthEnv{g: g, c: c, idp: p, public: front.URL}
}

// followAuthorize is an AuthorizationCodeFetcher that plays the user's
// browser: it opens the authorization URL (the test IdP approves at once)
// and reads code, state and iss off the redirect.
func followAuthorize(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("authorize answered %d without a redirect: %w", resp.StatusCode, err)
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("authorize: %s: %s", e, q.Get("error_description"))
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

func newCodeHandler(t *testing.T, authMethod string) *auth.AuthorizationCodeHandler {
	t.Helper()
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{"http://127.0.0.1:1/callback"},
			TokenEndpointAuthMethod: authMethod,
			ClientName:              "switchyard edge test",
		}},
		AuthorizationCodeFetcher: followAuthorize,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOAuthClientConnects runs the go-sdk client's authorization: its
// first request gets 401 with resource_metadata; it reads the edge's
// protected resource metadata, the IdP's authorization server metadata,
// registers itself, authorizes with PKCE and the resource, exchanges the
// code and retries with the token, which the edge verifies and resolves
// to the tenant its org claim selects.
func TestOAuthClientConnects(t *testing.T) {
	for _, method := range []string{"client_secret_basic", "none"} {
		t.Run(method, func(t *testing.T) {
			e := newOAuthEnv(t, map[string]any{"org": "acme"})
			client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
				Endpoint: e.public + "/mcp", OAuthHandler: newCodeHandler(t, method),
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != 1 || res.Tools[0].Name != "up__echo" {
				t.Fatalf("tools %+v", res.Tools)
			}
			checkRouted(t, e.c.last(t, "tools/list"), "acme", "alice")
			is := e.idp.Issued()
			if len(is) != 1 || is[0].GrantType != "authorization_code" || is[0].Resource != e.public+"/mcp" || is[0].Audience != e.public+"/mcp" {
				t.Fatalf("issued %+v, want one token for %s/mcp", is, e.public)
			}
		})
	}
}

// TestOAuthClientNoTenant: a token that verifies but whose principal no
// tenant selects is 403 without a challenge, and the client's connect
// fails instead of authorizing again and again.
func TestOAuthClientNoTenant(t *testing.T) {
	e := newOAuthEnv(t, map[string]any{"org": "nobody"})
	client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
	_, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: e.public + "/mcp", OAuthHandler: newCodeHandler(t, "none"),
	}, nil)
	// The SDK reports the status by its text.
	if err == nil || !strings.Contains(err.Error(), http.StatusText(http.StatusForbidden)) {
		t.Fatalf("connect: %v, want a 403", err)
	}
	if n := len(e.idp.Issued()); n != 1 {
		t.Fatalf("the client fetched %d tokens, want 1", n)
	}
}

// TestOAuthClientUpstreamEndpoint connects the client to a per-upstream
// endpoint. Its metadata names /mcp/up as the resource (RFC 9728 requires
// the exact URL), so the client asks the IdP for a token for /mcp/up (RFC
// 8707), and the edge must accept it there. "listed" configures that
// audience; "documented" only the /mcp URL, as docs and config show it.
func TestOAuthClientUpstreamEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		audPaths []string
	}{
		{"listed", []string{"/mcp", "/mcp/up"}},
		{"documented", []string{"/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOAuthEnv(t, map[string]any{"org": "acme"}, tc.audPaths...)
			client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
				Endpoint: e.public + "/mcp/up", OAuthHandler: newCodeHandler(t, "none"),
			}, nil)
			if err != nil {
				t.Fatalf("connect: %v (tokens issued: %+v)", err, e.idp.Issued())
			}
			defer cs.Close()
			if _, err := cs.ListTools(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			got := e.c.last(t, "tools/list")
			checkRouted(t, got, "acme", "alice")
			if got.req.View != "up" {
				t.Fatalf("view %q", got.req.View)
			}
		})
	}
}
