package idp

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxBody bounds the request bodies of /register and /token.
const maxBody = 64 << 10

// serveMetadata serves the RFC 8414 document (also at the OpenID
// discovery path, which clients try second).
func (p *IdP) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	iss := p.Issuer()
	md := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/authorize",
		"token_endpoint":                                 iss + "/token",
		"jwks_uri":                                       p.JWKSURL(),
		"registration_endpoint":                          iss + "/register",
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "client_credentials", GrantTokenExchange},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		// OpenID discovery requires these two.
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	}
	if len(p.opts.Scopes) > 0 {
		md["scopes_supported"] = p.opts.Scopes
	}
	writeJSON(w, http.StatusOK, md)
}

// serveJWKS serves the public key set: the current key alone.
func (p *IdP) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	k := p.key
	p.mu.Unlock()
	set := jwk.NewSet()
	if err := set.AddKey(k.pub); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, set)
}

// serveRegister is RFC 7591 dynamic client registration: redirect_uris
// are required (absolute, no fragment); token_endpoint_auth_method is
// client_secret_basic (the default), client_secret_post or none (a
// public client, issued no secret); grant_types, if sent, may name only
// authorization_code and client_credentials. The response echoes the
// metadata with client_id (and client_secret) added.
func (p *IdP) serveRegister(w http.ResponseWriter, r *http.Request) {
	var md map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&md); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object")
		return
	}
	var c Client
	uris, _ := md["redirect_uris"].([]any)
	for _, u := range uris {
		s, _ := u.(string)
		if !absoluteURI(s) {
			oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris must be absolute URIs without a fragment")
			return
		}
		c.RedirectURIs = append(c.RedirectURIs, s)
	}
	if len(c.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	if gts, ok := md["grant_types"].([]any); ok {
		for _, g := range gts {
			if g != "authorization_code" && g != "client_credentials" {
				oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported grant type")
				return
			}
		}
	}
	method, _ := md["token_endpoint_auth_method"].(string)
	switch method {
	case "":
		method = "client_secret_basic"
	case "client_secret_basic", "client_secret_post", "none":
	default:
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported token_endpoint_auth_method")
		return
	}
	if method != "none" {
		c.Secret = rand.Text()
		md["client_secret"] = c.Secret
		md["client_secret_expires_at"] = 0
	}
	id := rand.Text()
	md["client_id"] = id
	md["client_id_issued_at"] = time.Now().Unix()
	md["token_endpoint_auth_method"] = method
	p.AddClient(id, c)
	writeJSON(w, http.StatusCreated, md)
}

// serveAuthorize approves every valid authorization request at once
// (RFC 6749 section 4.1.1 with OAuth 2.1's mandatory PKCE). A request
// with an unknown client or a redirect URI the client did not register is
// answered 400 here; any other error is redirected (section 4.1.2.1).
func (p *IdP) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, redirect := q.Get("client_id"), q.Get("redirect_uri")
	p.mu.Lock()
	c, known := p.clients[id]
	p.mu.Unlock()
	if !known {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	if redirect == "" || !slices.Contains(c.RedirectURIs, redirect) {
		http.Error(w, "redirect_uri is missing or not registered for the client", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	reply := back.Query()
	if s := q.Get("state"); s != "" {
		reply.Set("state", s)
	}
	reply.Set("iss", p.Issuer())
	fail := func(code, desc string) {
		reply.Set("error", code)
		reply.Set("error_description", desc)
		back.RawQuery = reply.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	}
	challenge := q.Get("code_challenge")
	resource := q.Get("resource")
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
		return
	case challenge == "" || q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "PKCE with code_challenge_method S256 is required")
		return
	case len(challenge) != 43 || !unreserved(challenge):
		fail("invalid_request", "code_challenge is not an S256 challenge")
		return
	case resource != "" && !absoluteURI(resource):
		fail("invalid_target", "resource must be an absolute URI without a fragment")
		return
	}
	sub := q.Get("login_hint")
	if sub == "" {
		sub = p.opts.Subject
	}
	code := rand.Text()
	p.mu.Lock()
	p.codes[code] = &grant{client: id, redirect: redirect, challenge: challenge, resource: resource,
		scope: q.Get("scope"), subject: sub, expires: time.Now().Add(CodeTTL)}
	p.mu.Unlock()
	reply.Set("code", code)
	back.RawQuery = reply.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// serveToken is the token endpoint (RFC 6749 sections 4.1.3 and 4.4,
// RFC 7636 section 4.6, RFC 8707 section 2.2).
func (p *IdP) serveToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return
	}
	id, ok := p.authenticateClient(r)
	if !ok {
		if _, _, basic := r.BasicAuth(); basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="idp"`)
		}
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	f := r.PostForm
	is := Issued{GrantType: f.Get("grant_type"), ClientID: id}
	switch is.GrantType {
	case "authorization_code":
		p.mu.Lock()
		g := p.codes[f.Get("code")]
		delete(p.codes, f.Get("code")) // single use, whatever happens next
		p.mu.Unlock()
		switch {
		case g == nil || time.Now().After(g.expires) || g.client != id:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, expired or used code, or another client's")
			return
		case f.Get("redirect_uri") != g.redirect:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match the authorization request")
			return
		case !validVerifier(f.Get("code_verifier")) ||
			subtle.ConstantTimeCompare([]byte(challengeS256(f.Get("code_verifier"))), []byte(g.challenge)) != 1:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
			return
		case f.Get("resource") != "" && f.Get("resource") != g.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
			return
		}
		is.Subject, is.Resource, is.Scope = g.subject, g.resource, g.scope
	case "client_credentials":
		p.mu.Lock()
		public := p.clients[id].Secret == ""
		p.mu.Unlock()
		if public {
			oauthError(w, http.StatusBadRequest, "unauthorized_client", "public clients may not use client_credentials")
			return
		}
		if res := f.Get("resource"); res != "" && !absoluteURI(res) {
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource must be an absolute URI without a fragment")
			return
		}
		is.Subject, is.Resource, is.Scope = id, f.Get("resource"), f.Get("scope")
	case GrantTokenExchange:
		// RFC 8693 section 2.1: the subject token must be one of this
		// IdP's, unexpired; the new token keeps its subject, is for the
		// audience or resource asked, and names the client as the actor.
		switch f.Get("subject_token_type") {
		case "urn:ietf:params:oauth:token-type:access_token", "urn:ietf:params:oauth:token-type:jwt":
		default:
			oauthError(w, http.StatusBadRequest, "invalid_request", "subject_token_type must be an access token or a JWT")
			return
		}
		sub, ok := p.subjectOf(f.Get("subject_token"))
		if !ok {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the subject token is not valid (unknown signer, expired or malformed)")
			return
		}
		if p.opts.RefuseExchange != nil && p.opts.RefuseExchange(sub, id) {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the exchange is not allowed for this subject")
			return
		}
		if res := f.Get("resource"); res != "" && !absoluteURI(res) {
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource must be an absolute URI without a fragment")
			return
		}
		is.Subject, is.Resource, is.Scope = sub, f.Get("resource"), f.Get("scope")
		if aud := f.Get("audience"); aud != "" {
			is.Resource = aud // the token's aud below
		}
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code, client_credentials or token-exchange")
		return
	}
	is.Audience = is.Resource
	if is.Audience == "" {
		is.Audience = p.opts.Audience
	}
	now := time.Now()
	claims := maps.Clone(p.opts.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	maps.Copy(claims, map[string]any{
		"iss": p.Issuer(), "sub": is.Subject, "aud": is.Audience, "iat": now, "exp": now.Add(p.opts.TTL),
		"jti": rand.Text(), "client_id": id,
	})
	if is.Scope != "" {
		claims["scope"] = is.Scope
	}
	p.mu.Lock()
	k := p.key
	p.mu.Unlock()
	tok, err := sign(k, claims)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	is.KeyID = k.kid
	p.mu.Lock()
	p.issued = append(p.issued, is)
	p.mu.Unlock()
	resp := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int64(p.opts.TTL / time.Second)}
	if is.GrantType == GrantTokenExchange {
		resp["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
	}
	if is.Scope != "" {
		resp["scope"] = is.Scope
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}

// authenticateClient returns the id of the client r authenticates as:
// client_secret_basic (RFC 6749 section 2.3.1: id and secret form-encoded
// inside Basic), client_secret_post, or a public client's client_id alone.
func (p *IdP) authenticateClient(r *http.Request) (string, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil || r.PostForm.Has("client_secret") {
			return "", false // one method per request (section 2.3)
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	p.mu.Lock()
	c, ok := p.clients[id]
	p.mu.Unlock()
	if !ok || id == "" {
		return "", false
	}
	if c.Secret == "" {
		return id, secret == ""
	}
	return id, subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) == 1
}

// validVerifier reports whether v is a PKCE code verifier: 43 to 128
// unreserved characters (RFC 7636 section 4.1).
func validVerifier(v string) bool {
	return len(v) >= 43 && len(v) <= 128 && unreserved(v)
}

func unreserved(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return false
		}
	}
	return true
}

// absoluteURI reports whether s is an absolute URI without a fragment.
func absoluteURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Fragment == "" && !strings.Contains(s, "#")
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
