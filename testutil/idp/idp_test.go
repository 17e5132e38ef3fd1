package idp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

const redirect = "http://127.0.0.1:1/callback"

// noRedirect returns redirects to the caller instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// verify parses tok against the IdP's published JWKS and checks iss, aud
// and the time claims.
func verify(t *testing.T, p *IdP, tok, aud string) (jwt.Token, error) {
	t.Helper()
	set, err := jwk.Fetch(context.Background(), p.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	return jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithIssuer(p.Issuer()), jwt.WithAudience(aud))
}

func register(t *testing.T, p *IdP, md string) map[string]any {
	t.Helper()
	resp, err := http.Post(p.Issuer()+"/register", "application/json", strings.NewReader(md))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v", resp.StatusCode, out)
	}
	return out
}

// authorize runs /authorize with q and returns the redirect's query.
func authorize(t *testing.T, p *IdP, q url.Values) (int, url.Values) {
	t.Helper()
	resp, err := noRedirect.Get(p.Issuer() + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return resp.StatusCode, nil
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc.String(), redirect+"?") {
		t.Fatalf("redirected to %s", loc)
	}
	return resp.StatusCode, loc.Query()
}

func token(t *testing.T, p *IdP, form url.Values, basicID, basicSecret string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.Issuer()+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicID != "" {
		req.SetBasicAuth(url.QueryEscape(basicID), url.QueryEscape(basicSecret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("token: %d %s", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func pkce() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	return verifier, challengeS256(verifier)
}

func authQuery(client, challenge string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirect},
		"state": {"st"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
		"resource": {"http://127.0.0.1:2/mcp"}, "scope": {"mcp"}}
}

func TestMetadata(t *testing.T) {
	p := Start(t, Options{Scopes: []string{"mcp"}})
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		var md map[string]any
		getJSON(t, p.Issuer()+path, &md)
		if md["issuer"] != p.Issuer() || md["jwks_uri"] != p.JWKSURL() || md["token_endpoint"] != p.Issuer()+"/token" ||
			md["authorization_response_iss_parameter_supported"] != true {
			t.Fatalf("%s: %v", path, md)
		}
		if m, _ := md["code_challenge_methods_supported"].([]any); len(m) != 1 || m[0] != "S256" {
			t.Fatalf("%s: code_challenge_methods_supported %v", path, md["code_challenge_methods_supported"])
		}
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	getJSON(t, p.JWKSURL(), &set)
	if len(set.Keys) != 1 || set.Keys[0]["kid"] != p.KeyID() || set.Keys[0]["kty"] != "RSA" || set.Keys[0]["d"] != nil {
		t.Fatalf("jwks %v", set)
	}
}

// TestAuthorizationCodeFlow registers a public and a confidential client
// and runs the flow for each: the token verifies against the JWKS, its aud
// is the resource, sub the login hint or the default subject.
func TestAuthorizationCodeFlow(t *testing.T) {
	p := Start(t, Options{Claims: map[string]any{"org": "acme", "groups": []string{"eng"}}})
	for _, tc := range []struct {
		name, md, hint, wantSub string
	}{
		{"public", `{"redirect_uris":["` + redirect + `"],"token_endpoint_auth_method":"none"}`, "", DefaultSubject},
		{"basic", `{"redirect_uris":["` + redirect + `"]}`, "alice", "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := register(t, p, tc.md)
			id, _ := reg["client_id"].(string)
			secret, _ := reg["client_secret"].(string)
			if (tc.name == "public") != (secret == "") {
				t.Fatalf("registration %v", reg)
			}
			verifier, challenge := pkce()
			q := authQuery(id, challenge)
			if tc.hint != "" {
				q.Set("login_hint", tc.hint)
			}
			code, back := authorize(t, p, q)
			if code != http.StatusFound || back.Get("state") != "st" || back.Get("iss") != p.Issuer() || back.Get("code") == "" {
				t.Fatalf("authorize: %d %v", code, back)
			}
			form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {redirect},
				"code_verifier": {verifier}, "resource": {"http://127.0.0.1:2/mcp"}}
			basicID := ""
			if secret == "" {
				form.Set("client_id", id)
			} else {
				basicID = id
			}
			status, out := token(t, p, form, basicID, secret)
			if status != 200 || out["token_type"] != "Bearer" || out["scope"] != "mcp" {
				t.Fatalf("token: %d %v", status, out)
			}
			tok, err := verify(t, p, out["access_token"].(string), "http://127.0.0.1:2/mcp")
			if err != nil {
				t.Fatal(err)
			}
			var org string
			var groups []any
			_ = tok.Get("org", &org)
			_ = tok.Get("groups", &groups)
			if sub, _ := tok.Subject(); sub != tc.wantSub || org != "acme" || len(groups) != 1 || groups[0] != "eng" {
				t.Fatalf("claims sub=%q org=%q groups=%v", sub, org, groups)
			}
			// A code is good once.
			if status, out := token(t, p, form, basicID, secret); status != 400 || out["error"] != "invalid_grant" {
				t.Fatalf("reused code: %d %v", status, out)
			}
		})
	}
	if is := p.Issued(); len(is) != 2 || is[1].Subject != "alice" || is[1].Resource != "http://127.0.0.1:2/mcp" || is[1].KeyID != p.KeyID() {
		t.Fatalf("issued %+v", is)
	}
}

func TestAuthorizeRefuses(t *testing.T) {
	p := Start(t, Options{Clients: map[string]Client{"c": {RedirectURIs: []string{redirect}}}})
	_, challenge := pkce()
	for _, tc := range []struct {
		name    string
		edit    func(url.Values)
		status  int
		errCode string
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "nope") }, 400, ""},
		{"unregistered redirect", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:1/other") }, 400, ""},
		{"no pkce", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, 302, "invalid_request"},
		{"plain pkce", func(q url.Values) { q.Set("code_challenge_method", "plain") }, 302, "invalid_request"},
		{"short challenge", func(q url.Values) { q.Set("code_challenge", "abc") }, 302, "invalid_request"},
		{"token response type", func(q url.Values) { q.Set("response_type", "token") }, 302, "unsupported_response_type"},
		{"relative resource", func(q url.Values) { q.Set("resource", "/mcp") }, 302, "invalid_target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := authQuery("c", challenge)
			tc.edit(q)
			status, back := authorize(t, p, q)
			if status != tc.status || back.Get("error") != tc.errCode || back.Get("code") != "" {
				t.Fatalf("got %d %v", status, back)
			}
		})
	}
}

func TestTokenRefuses(t *testing.T) {
	p := Start(t, Options{Clients: map[string]Client{"c": {Secret: "s", RedirectURIs: []string{redirect}}}})
	codeFor := func() (string, string) {
		verifier, challenge := pkce()
		_, back := authorize(t, p, authQuery("c", challenge))
		return back.Get("code"), verifier
	}
	for _, tc := range []struct {
		name          string
		edit          func(url.Values)
		secret        string
		status        int
		errCode       string
		verifierNoise bool
	}{
		{"wrong verifier", nil, "s", 400, "invalid_grant", true},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, "s", 400, "invalid_grant", false},
		{"wrong secret", nil, "x", 401, "invalid_client", false},
		{"other redirect", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:1/other") }, "s", 400, "invalid_grant", false},
		{"other resource", func(f url.Values) { f.Set("resource", "http://127.0.0.1:3/mcp") }, "s", 400, "invalid_target", false},
		{"unknown grant", func(f url.Values) { f.Set("grant_type", "password") }, "s", 400, "unsupported_grant_type", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, verifier := codeFor()
			if tc.verifierNoise {
				verifier, _ = pkce()
			}
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
			if tc.edit != nil {
				tc.edit(form)
			}
			if status, out := token(t, p, form, "c", tc.secret); status != tc.status || out["error"] != tc.errCode {
				t.Fatalf("got %d %v", status, out)
			}
		})
	}
	if len(p.Issued()) != 0 {
		t.Fatalf("issued %+v", p.Issued())
	}
}

func TestClientCredentials(t *testing.T) {
	p := Start(t, Options{Audience: "aud-default", Clients: map[string]Client{"svc": {Secret: "s"}, "pub": {}}})
	status, out := token(t, p, url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc"}, "client_secret": {"s"}}, "", "")
	if status != 200 {
		t.Fatalf("%d %v", status, out)
	}
	tok, err := verify(t, p, out["access_token"].(string), "aud-default")
	if err != nil {
		t.Fatal(err)
	}
	if sub, _ := tok.Subject(); sub != "svc" {
		t.Fatalf("sub %q", sub)
	}
	if status, out := token(t, p, url.Values{"grant_type": {"client_credentials"}, "client_id": {"pub"}}, "", ""); status != 400 || out["error"] != "unauthorized_client" {
		t.Fatalf("public client: %d %v", status, out)
	}
}

func TestMintedTokens(t *testing.T) {
	p := Start(t, Options{Audience: "a", Claims: map[string]any{"org": "acme"}})
	if _, err := verify(t, p, p.Token(t, nil), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, p, p.Token(t, map[string]any{"aud": "b"}), "a"); err == nil {
		t.Fatal("a token for another audience verified")
	}
	if _, err := verify(t, p, p.Token(t, map[string]any{"exp": time.Now().Add(-time.Hour)}), "a"); err == nil {
		t.Fatal("an expired token verified")
	}
	noExp := p.Token(t, map[string]any{"exp": nil})
	tok, err := jwt.ParseInsecure([]byte(noExp))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.Expiration(); ok || !tok.Has("org") {
		t.Fatalf("exp removed? claims %v", tok.Keys())
	}
	if _, err := verify(t, p, p.TokenSignedBy(t, NewKey(t), nil), "a"); err == nil {
		t.Fatal("a token signed by an unpublished key verified")
	}
	h, _, _ := strings.Cut(p.Unsigned(t, nil), ".")
	if hb, _ := base64.RawURLEncoding.DecodeString(h); string(hb) != `{"alg":"none","typ":"JWT"}` {
		t.Fatalf("unsigned header %s", hb)
	}
}

func TestRotate(t *testing.T) {
	p := Start(t, Options{})
	old := p.Token(t, nil)
	oldKid := p.KeyID()
	k := p.Rotate(t)
	if k.ID() == oldKid || p.KeyID() != k.ID() {
		t.Fatalf("kid %q after rotating from %q", p.KeyID(), oldKid)
	}
	if _, err := verify(t, p, p.Token(t, nil), DefaultAudience); err != nil {
		t.Fatalf("new key: %v", err)
	}
	if _, err := verify(t, p, old, DefaultAudience); err == nil {
		t.Fatal("a token of the dropped key verified")
	}
}
