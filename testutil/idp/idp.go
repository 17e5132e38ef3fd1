// Package idp is an in-process OAuth 2.1 authorization server for tests:
// it issues RS256 JWT access tokens that a resource server (the edge, via
// internal/jwtauth) verifies against its JWKS, and it serves enough of the
// protocol for an MCP client's authorization code flow (the go-sdk's
// auth.AuthorizationCodeHandler) to run end to end.
//
// It serves, on a loopback httptest server (plain HTTP, so verifiers need
// their AllowHTTP switch):
//
//   - GET /.well-known/oauth-authorization-server and
//     /.well-known/openid-configuration: RFC 8414 metadata (issuer = [IdP.Issuer],
//     PKCE S256 only, RFC 9207 iss in authorization responses);
//   - GET /jwks: the public JWK set (RSA, kid, use "sig", alg RS256);
//   - POST /register: RFC 7591 dynamic client registration;
//   - GET /authorize: approves every valid request at once, as
//     [Options.Subject] (or the login_hint parameter, when sent), and
//     redirects to redirect_uri with code, state and iss; PKCE S256 is
//     required;
//   - POST /token: grant types authorization_code (with the PKCE
//     code_verifier) and client_credentials; client authentication by
//     client_secret_basic, client_secret_post, or none for public clients.
//
// Access tokens carry iss, sub, aud, iat, exp, jti, client_id, scope (when
// one was requested) and [Options.Claims]. aud is the RFC 8707 resource
// parameter when the client sent one, else [Options.Audience].
//
// Tests may also mint tokens directly ([IdP.Token]), sign them with a key
// the IdP does not publish ([IdP.TokenSignedBy]), build unsigned
// ("alg":"none") ones ([IdP.Unsigned]) and rotate the signing key
// ([IdP.Rotate]).
//
// Everything an IdP holds is in memory and guarded by one mutex: its
// methods are safe for concurrent use, including while the server runs.
package idp

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Defaults for the zero values of [Options].
const (
	DefaultSubject  = "user"
	DefaultAudience = "switchyard-test"
	DefaultTTL      = time.Hour
	// CodeTTL is how long an authorization code can be redeemed.
	CodeTTL = time.Minute
)

// Options configure an [IdP]. The zero value is usable.
type Options struct {
	// Audience is the aud of tokens issued without an RFC 8707 resource
	// parameter, and of [IdP.Token]'s tokens. Default [DefaultAudience].
	Audience string
	// Subject is the sub of tokens issued through /authorize (unless the
	// request carries login_hint) and of [IdP.Token]'s tokens. Default
	// [DefaultSubject]. client_credentials tokens have the client id as sub.
	Subject string
	// Claims are added to every token, issued or minted (for example
	// "org": "acme" or "groups": []string{"eng"}). They may not override
	// iss, sub, aud, iat or exp of issued tokens; [IdP.Token]'s claims
	// argument overrides them.
	Claims map[string]any
	// TTL is the lifetime of issued and minted tokens. Default [DefaultTTL].
	TTL time.Duration
	// Scopes is the metadata's scopes_supported. Requested scopes are
	// granted whatever they are.
	Scopes []string
	// Clients are pre-registered clients by client id.
	Clients map[string]Client
	// RefuseExchange, if set, refuses a token exchange (RFC 8693) of the
	// subject token of sub by client with invalid_grant when it returns
	// true.
	RefuseExchange func(sub, client string) bool
}

// GrantTokenExchange is the RFC 8693 grant type the token endpoint
// takes: a client exchanges a subject token this IdP issued (its
// subject_token) for a new one with the same sub, for the audience or
// resource it asks.
const GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

// subjectOf verifies a token this IdP signed with its current key, and
// unexpired, and returns its sub.
func (p *IdP) subjectOf(token string) (string, bool) {
	p.mu.Lock()
	k := p.key
	p.mu.Unlock()
	tok, err := jwt.Parse([]byte(token), jwt.WithKey(jwa.RS256(), k.pub), jwt.WithValidate(true))
	if err != nil {
		return "", false
	}
	sub, ok := tok.Subject()
	return sub, ok && sub != ""
}

// Client is a registered OAuth client.
type Client struct {
	// Secret is the client secret; "" makes a public client, which
	// authenticates at the token endpoint with its client_id alone
	// (token_endpoint_auth_method "none").
	Secret string
	// RedirectURIs are the exact redirect URIs /authorize accepts.
	RedirectURIs []string
}

// Key is an RSA signing key with its key id.
type Key struct {
	kid  string
	priv jwk.Key // private, kid and alg set
	pub  jwk.Key // public, kid, alg and use set
}

// NewKey generates a 2048-bit RSA key with a random kid. An IdP publishes
// only its own keys: sign with [IdP.TokenSignedBy] and a key from here to
// get a token no JWKS vouches for.
func NewKey(t testing.TB) *Key {
	t.Helper()
	k, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKey() (*Key, error) {
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("idp: generate key: %w", err)
	}
	kid := rand.Text()[:16]
	priv, err := jwk.Import(raw)
	if err != nil {
		return nil, fmt.Errorf("idp: import key: %w", err)
	}
	pub, err := jwk.Import(&raw.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("idp: import key: %w", err)
	}
	for _, k := range []jwk.Key{priv, pub} {
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			return nil, err
		}
		if err := k.Set(jwk.AlgorithmKey, jwa.RS256()); err != nil {
			return nil, err
		}
	}
	if err := pub.Set(jwk.KeyUsageKey, "sig"); err != nil {
		return nil, err
	}
	return &Key{kid: kid, priv: priv, pub: pub}, nil
}

// ID returns the key's kid.
func (k *Key) ID() string { return k.kid }

// IdP is a running authorization server. Create it with [Start].
type IdP struct {
	srv  *httptest.Server
	opts Options

	mu      sync.Mutex
	key     *Key              // guarded by mu: signs and is published
	clients map[string]Client // guarded by mu
	codes   map[string]*grant // guarded by mu: unredeemed authorization codes
	issued  []Issued          // guarded by mu
}

// grant is one authorization code's request.
type grant struct {
	client, redirect, challenge, resource, scope, subject string
	expires                                               time.Time
}

// Issued describes one token the /token endpoint issued.
type Issued struct {
	GrantType string
	ClientID  string
	Subject   string
	// Resource is the RFC 8707 resource parameter ("" if none was sent);
	// the token's aud is it, or Options.Audience.
	Resource string
	Audience string
	Scope    string
	KeyID    string
}

// Start runs an IdP on a loopback httptest server until the test ends.
func Start(t testing.TB, o Options) *IdP {
	t.Helper()
	if o.Audience == "" {
		o.Audience = DefaultAudience
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	o.Claims = maps.Clone(o.Claims)
	key := NewKey(t)
	p := &IdP{opts: o, key: key, clients: maps.Clone(o.Clients), codes: map[string]*grant{}}
	if p.clients == nil {
		p.clients = map[string]Client{}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.serveMetadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", p.serveMetadata)
	mux.HandleFunc("GET /jwks", p.serveJWKS)
	mux.HandleFunc("POST /register", p.serveRegister)
	mux.HandleFunc("GET /authorize", p.serveAuthorize)
	mux.HandleFunc("POST /token", p.serveToken)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// Issuer returns the issuer identifier, the server's base URL
// ("http://127.0.0.1:<port>", no trailing slash): the iss of its tokens
// and the authorization server URL of protected resource metadata.
func (p *IdP) Issuer() string { return p.srv.URL }

// JWKSURL returns the URL of the JWK set.
func (p *IdP) JWKSURL() string { return p.srv.URL + "/jwks" }

// KeyID returns the kid of the current signing key.
func (p *IdP) KeyID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key.kid
}

// Rotate replaces the signing key with a new one and returns it: the
// JWKS publishes only the new key from now on, so tokens signed by the old
// one stop verifying once a verifier refetches the set.
func (p *IdP) Rotate(t testing.TB) *Key {
	t.Helper()
	k := NewKey(t)
	p.mu.Lock()
	p.key = k
	p.mu.Unlock()
	return k
}

// AddClient registers a client (replacing one with the same id).
func (p *IdP) AddClient(id string, c Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[id] = c
}

// Issued returns the tokens /token has issued so far, oldest first.
func (p *IdP) Issued() []Issued {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Issued(nil), p.issued...)
}

// Token mints an access token signed by the current key. Its claims are
// iss, sub (Options.Subject), aud (Options.Audience), iat (now), exp (now
// + TTL) and Options.Claims, then claims: an entry there replaces the
// default of that name, and a nil value removes it (for example "exp":
// nil for a token without expiry). time.Time values are written as
// NumericDate (Unix seconds).
func (p *IdP) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	k := p.key
	p.mu.Unlock()
	return p.TokenSignedBy(t, k, claims)
}

// TokenSignedBy is [IdP.Token] signed by k, which need not be published.
func (p *IdP) TokenSignedBy(t testing.TB, k *Key, claims map[string]any) string {
	t.Helper()
	tok, err := sign(k, p.claims(claims))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Unsigned returns [IdP.Token]'s claims as an unsecured JWT: header
// {"alg":"none","typ":"JWT"} and an empty signature (RFC 7519 section 6).
// Verifiers must refuse it.
func (p *IdP) Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(p.claims(claims))
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
}

// claims returns the default claims overlaid with over.
func (p *IdP) claims(over map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{}
	maps.Copy(c, p.opts.Claims)
	c["iss"] = p.Issuer()
	c["sub"] = p.opts.Subject
	c["aud"] = p.opts.Audience
	c["iat"] = now
	c["exp"] = now.Add(p.opts.TTL)
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// sign encodes claims (time.Time as NumericDate) and signs them with k
// (RS256, kid in the header, typ "at+jwt" as RFC 9068 has it).
func sign(k *Key, claims map[string]any) (string, error) {
	enc := make(map[string]any, len(claims))
	for n, v := range claims {
		if tv, ok := v.(time.Time); ok {
			v = tv.Unix()
		}
		enc[n] = v
	}
	payload, err := json.Marshal(enc)
	if err != nil {
		return "", fmt.Errorf("idp: encode claims: %w", err)
	}
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, k.kid); err != nil {
		return "", err
	}
	if err := h.Set(jws.TypeKey, "at+jwt"); err != nil {
		return "", err
	}
	out, err := jws.Sign(payload, jws.WithKey(jwa.RS256(), k.priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		return "", fmt.Errorf("idp: sign: %w", err)
	}
	return string(out), nil
}

// challengeS256 is the PKCE S256 code challenge of verifier (RFC 7636
// section 4.2).
func challengeS256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
