package edge

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// AuthConfig configures how the edge authenticates requests (MCP
// authorization, 2025-11-25 "Authorization"; RFC 9728 protected resource
// metadata). Tenants, API keys and the anonymous tenant come from the
// tenancy state ([Config.Tenancy]); this holds what the edge itself
// needs.
type AuthConfig struct {
	// JWT, if set, verifies bearer tokens that are not API keys against
	// its issuers' JWKS (internal/jwtauth). Nil: only API keys (and
	// anonymous access where a tenant allows it) authenticate.
	JWT *jwtauth.Config
	// PublicURL is the URL clients reach the gateway at: scheme, host and
	// an optional path prefix ("https://gw.example.com", or
	// "https://gw.example.com/tools" behind a proxy that serves the
	// gateway under /tools and strips the prefix). Every URL and path the
	// edge hands out is under it: the protected resource metadata's
	// "resource" is PublicURL + the MCP path, the legacy SSE endpoint
	// event's path starts with the prefix. Empty: a trusted proxy's
	// forwarded headers, else the connection's own address (never an
	// arbitrary Host header; internal/publicurl).
	PublicURL string
	// AuthorizationServers are the issuer URLs the metadata document
	// lists ("authorization_servers"). Empty: the JWT issuers.
	AuthorizationServers []string
	// ScopesSupported, if set, is the metadata's "scopes_supported".
	ScopesSupported []string
}

// identity is who one request authenticated as. Principal is "" for an
// anonymous request; issuer is a JWT principal's issuer ("" for an API
// key). user keys the client sessions it may use (the SDK's
// TokenInfo.UserID): "" for anonymous requests, else the tenant, the
// credential kind and the principal.
type identity struct {
	tenant    string
	principal string
	issuer    string
	user      string
	policy    *policy.Policy
	// scopes are a JWT bearer's OAuth scopes (none for an API key): what
	// the policy's scope rules check (scopes.go).
	scopes []string
	// jwt is set for a JWT bearer: the only credential a passthrough
	// upstream may receive (an API key is the gateway's own secret).
	jwt bool
}

// passAuthorization returns the Authorization header to send toward
// passthrough upstreams for a request of id with headers h: the client's
// JWT bearer, never an API key.
func passAuthorization(id *identity, h http.Header) string {
	if id == nil || !id.jwt {
		return ""
	}
	return h.Get("Authorization")
}

type identityKey struct{}

// principalExtra is the TokenInfo.Extra key of the identity's principal,
// for the SDK path's calls.
const principalExtra = "switchyard.principal"

// issuerExtra is the TokenInfo.Extra key of the identity's issuer.
const issuerExtra = "switchyard.issuer"

// jwtExtra is the TokenInfo.Extra key saying the credential was a JWT.
const jwtExtra = "switchyard.jwt"

// identityOf returns the identity the handler stored in ctx, or nil.
func identityOf(ctx context.Context) *identity {
	id, _ := ctx.Value(identityKey{}).(*identity)
	return id
}

// authFailure is a request that did not authenticate: the HTTP status,
// the RFC 6750 error code for the WWW-Authenticate challenge ("" for a
// request that sent no credentials), and a description safe to show
// (never key or token material).
type authFailure struct {
	status int
	code   string
	desc   string
}

var principalPool = sync.Pool{New: func() any { return new(tenant.Principal) }}

// authenticate resolves the request's credentials to a tenant and
// principal against snap. A request without an Authorization header is
// the anonymous tenant's, if there is one.
func (s *Service) authenticate(r *http.Request, snap *tenancy.Snapshot) (*identity, *authFailure) {
	if s.watcher != nil && !s.watcher.Ready() {
		// Nothing is known yet, not even whether the request needs a
		// credential: 503 and a retry, not a 401 whose challenge sends
		// the client into a login flow.
		return nil, &authFailure{status: http.StatusServiceUnavailable, desc: "the gateway has not loaded its tenants yet, retry"}
	}
	vals := r.Header.Values("Authorization")
	if len(vals) > 1 {
		// A proxy in front could read another one than the edge does.
		return nil, &authFailure{status: http.StatusBadRequest, code: "invalid_request", desc: "more than one Authorization header"}
	}
	if len(vals) == 0 || vals[0] == "" {
		name, ok := snap.Anonymous()
		if !ok {
			return nil, &authFailure{status: http.StatusUnauthorized, desc: "authentication required"}
		}
		_, p, _ := snap.Tenant(name)
		return &identity{tenant: name, policy: p}, nil
	}
	scheme, token, _ := strings.Cut(vals[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme: a bare challenge (RFC 6750 section 3.1).
		return nil, &authFailure{status: http.StatusUnauthorized, desc: "a Bearer token is required"}
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return nil, &authFailure{status: http.StatusBadRequest, code: "invalid_request", desc: "the Authorization header must be Bearer and one token"}
	}
	if strings.HasPrefix(token, apikey.Prefix) {
		return s.authKey(token, snap)
	}
	if s.jwt == nil {
		return nil, &authFailure{status: http.StatusUnauthorized, code: "invalid_token", desc: "the bearer token is not a valid API key"}
	}
	return s.authJWT(r.Context(), token, s.public.Origin(r).URL(r.URL.EscapedPath()), snap)
}

// authKey authenticates an API key. Every failure reads the same to the
// client except expiry, so that a guess learns nothing about which ids
// exist.
func (s *Service) authKey(key string, snap *tenancy.Snapshot) (*identity, *authFailure) {
	name, principal, err := snap.ResolveKey(key, time.Now())
	if err != nil {
		desc := "the API key is not valid"
		if errors.Is(err, apikey.ErrExpired) {
			desc = "the API key has expired"
		}
		return nil, &authFailure{status: http.StatusUnauthorized, code: "invalid_token", desc: desc}
	}
	_, p, _ := snap.Tenant(name)
	return &identity{tenant: name, principal: principal, user: name + "\x00key\x00" + principal, policy: p}, nil
}

// authJWT verifies a JWT and resolves its principal's tenant.
// resource is the URL of the endpoint it was presented to, an audience
// the token may name (RFC 8707, as the protected resource metadata says).
func (s *Service) authJWT(ctx context.Context, token, resource string, snap *tenancy.Snapshot) (*identity, *authFailure) {
	now, keys := time.Now(), s.jwt.KeySetID()
	key := jwtCacheKey(resource, token)
	p := s.jwtCache.get(key, now, keys)
	if p == nil {
		p = principalPool.Get().(*tenant.Principal)
		defer func() { p.Reset(); principalPool.Put(p) }()
		exp, err := s.jwt.VerifyFor(ctx, token, resource, p)
		if err != nil {
			return nil, jwtFailure(err)
		}
		s.jwtCache.put(key, p, exp, now, keys)
	}
	sub := ""
	for _, c := range p.Claims {
		if c.Name == "sub" {
			sub = c.Value
			break
		}
	}
	if sub == "" {
		// Sessions and per-principal limits key on it (RFC 9068 requires
		// it in access tokens); tokens without one would share both.
		return nil, &authFailure{status: http.StatusUnauthorized, code: "invalid_token", desc: "the token has no sub claim"}
	}
	name, err := snap.ResolvePrincipal(p)
	if err != nil {
		desc := "the token's principal belongs to no tenant"
		if errors.Is(err, tenant.ErrAmbiguous) {
			desc = "the token's principal matches more than one tenant"
		}
		return nil, &authFailure{status: http.StatusForbidden, desc: desc}
	}
	_, pol, _ := snap.Tenant(name)
	return &identity{tenant: name, principal: sub, issuer: p.Issuer, user: name + "\x00jwt\x00" + p.Issuer + "\x00" + sub, policy: pol,
		scopes: slices.Clone(p.Scopes), jwt: true}, nil
}

// jwtFailure maps a verification error to its answer: a key set that
// cannot be fetched is the gateway's problem (503), everything else an
// invalid token.
func jwtFailure(err error) *authFailure {
	desc := "the token is not valid"
	switch {
	case errors.Is(err, jwtauth.ErrUnavailable):
		return &authFailure{status: http.StatusServiceUnavailable, desc: "the token issuer's keys are unavailable; retry later"}
	case errors.Is(err, jwtauth.ErrExpired):
		desc = "the token has expired or is not yet valid"
	case errors.Is(err, jwtauth.ErrAudience):
		desc = "the token's audience is not this resource"
	case errors.Is(err, jwtauth.ErrIssuer):
		desc = "the token's issuer is not trusted"
	case errors.Is(err, jwtauth.ErrSignature):
		desc = "the token's signature does not verify"
	case errors.Is(err, jwtauth.ErrMalformed):
		desc = "the token is malformed"
	}
	return &authFailure{status: http.StatusUnauthorized, code: "invalid_token", desc: desc}
}

// writeAuthFailure answers a request that did not authenticate: 401 (or
// 400 for a malformed request, RFC 6750 section 3.1) with a Bearer
// challenge naming the protected resource metadata (MCP authorization;
// RFC 9728 section 5.1), 403 or 503 without one.
func (s *Service) writeAuthFailure(w http.ResponseWriter, r *http.Request, f *authFailure) {
	// RFC 6750 section 3: the description's characters exclude '"' and '\'.
	s.met.AuthRefusal(f.status, authReason(f))
	f.desc = strings.NewReplacer(`"`, "'", `\`, "/").Replace(f.desc)
	if f.status == http.StatusUnauthorized || f.status == http.StatusBadRequest {
		c := `Bearer resource_metadata="` + s.resourceMetadataURL(r) + `"`
		if f.code != "" {
			c += `, error="` + f.code + `", error_description="` + f.desc + `"`
		}
		w.Header().Set("WWW-Authenticate", c)
	}
	if f.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	httpError(w, r, http.StatusText(f.status)+": "+f.desc, f.status)
}

// bindSessions wraps an SDK handler so that a request with credentials
// carries the SDK's TokenInfo, with UserID the identity's user: the SDK
// then binds a new client session to that user and refuses the session
// to anyone else (go-sdk streamable: "session user mismatch", 403).
// Requests without credentials must not reach it (it would answer 401).
func bindSessions(next http.Handler) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id := identityOf(r.Context())
		if id == nil || id.user == "" {
			return nil, auth.ErrInvalidToken // unreachable: see view.ServeHTTP
		}
		return &auth.TokenInfo{UserID: id.user, Extra: map[string]any{principalExtra: id.principal, issuerExtra: id.issuer, jwtExtra: id.jwt}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}
