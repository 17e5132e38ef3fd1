package upstream

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/idp"
)

// TestUpstreamTokenExchange: on an upstream with token_exchange, a
// client's call carries a token the authorization server minted for the
// upstream in exchange for the client's (RFC 8693: same subject, the
// configured audience and scope), never the client's own; it is cached
// per principal until shortly before it expires, then exchanged again. A
// refused exchange, an expired client token and a call without a client
// token fail with a clear error, and nothing is sent upstream; no token
// or secret is in any error.
func TestUpstreamTokenExchange(t *testing.T) {
	p := idp.Start(t, idp.Options{
		TTL:            2 * time.Second, // the exchanged tokens'
		Clients:        map[string]idp.Client{"sy-worker": {Secret: "s3cr3t-client"}},
		RefuseExchange: func(sub, _ string) bool { return sub == "mallory" },
	})
	t.Setenv("SY_TEST_EXCHANGE_SECRET", "s3cr3t-client")
	s := newTestServer(t, "sse", nil)
	const audience = "https://upstream.example/mcp"
	u := startUpstream(t, s.url(), false, func(o *Options) {
		o.Spec.Auth = &proto.UpstreamAuth{TokenExchange: &proto.TokenExchange{
			TokenURL: p.Issuer() + "/token", ClientID: "sy-worker", ClientSecretEnv: "SY_TEST_EXCHANGE_SECRET",
			Audience: audience, Scope: "tools:run",
		}}
	})
	clientToken := func(sub string, exp time.Time) string {
		return p.Token(t, map[string]any{"sub": sub, "exp": exp})
	}
	later := time.Now().Add(time.Hour)
	alice := clientToken("alice", later)
	callAs := func(principal, auth string) ([]byte, *proto.Error) {
		req := call("echo", "", `{"arguments":{"text":"x"}}`)
		req.Principal, req.Issuer = principal, p.Issuer()
		ctx := t.Context()
		if auth != "" {
			ctx = WithAuthorization(ctx, auth)
		}
		return u.Call(ctx, req)
	}
	upstreamAuth := func() []string {
		var out []string
		for _, r := range s.recorded(func(r *posted) bool { return r.toolName == "echo" }) {
			out = append(out, r.header.Get("Authorization"))
		}
		return out
	}
	exchanges := func() int {
		n := 0
		for _, is := range p.Issued() {
			if is.GrantType == idp.GrantTokenExchange {
				n++
			}
		}
		return n
	}

	if _, perr := callAs("alice", "Bearer "+alice); perr != nil {
		t.Fatal(perr)
	}
	got := upstreamAuth()
	if len(got) != 1 || got[0] == "Bearer "+alice || !strings.HasPrefix(got[0], "Bearer ") {
		t.Fatalf("the upstream got Authorization %q, want an exchanged token", got)
	}
	claims := jwtClaims(t, strings.TrimPrefix(got[0], "Bearer "))
	if claims["sub"] != "alice" || claims["aud"] != audience || claims["scope"] != "tools:run" || claims["client_id"] != "sy-worker" {
		t.Errorf("exchanged token's claims %v", claims)
	}
	if _, perr := callAs("alice", "Bearer "+alice); perr != nil {
		t.Fatal(perr)
	}
	if n := exchanges(); n != 1 {
		t.Errorf("%d exchanges for two calls, want 1 (cached)", n)
	}
	time.Sleep(1200 * time.Millisecond) // past the cached token's use-by
	if _, perr := callAs("alice", "Bearer "+alice); perr != nil {
		t.Fatal(perr)
	}
	if n := exchanges(); n != 2 {
		t.Errorf("%d exchanges after the exchanged token's expiry, want 2", n)
	}

	before := len(upstreamAuth())
	for _, tc := range []struct {
		name, principal, auth string
		code                  int32
		msg                   string
	}{
		{"refused", "mallory", "Bearer " + clientToken("mallory", later), proto.CodeUpstreamUnavailable, "token exchange refused by the authorization server (HTTP 400, invalid_grant"},
		{"expired client token", "bob", "Bearer " + clientToken("bob", time.Now().Add(-time.Minute)), proto.CodeUpstreamUnavailable, "invalid_grant"},
		{"no client token", "svc", "", proto.CodeInvalidRequest, "presented no token to exchange"},
	} {
		_, perr := callAs(tc.principal, tc.auth)
		if perr == nil || perr.Code != tc.code || !strings.Contains(perr.Msg, tc.msg) {
			t.Errorf("%s: %v, want code %d with %q", tc.name, perr, tc.code, tc.msg)
			continue
		}
		if strings.Contains(perr.Msg, "s3cr3t") || strings.Contains(perr.Msg, "eyJ") {
			t.Errorf("%s: the error carries a secret or a token: %s", tc.name, perr.Msg)
		}
	}
	if n := len(upstreamAuth()); n != before {
		t.Errorf("%d calls reached the upstream after failed exchanges", n-before)
	}
}

// jwtClaims decodes a JWT's claims without verifying it.
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
