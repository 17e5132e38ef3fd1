package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// Scope is a set of grants on the admin listener. A credential carries
// one or more; [ScopeAdmin] includes every other.
type Scope uint8

// Scopes, as config's admin.keys[].scope and admin.jwt_claim name them.
const (
	// ScopeMetrics may scrape /metrics.
	ScopeMetrics Scope = 1 << iota
	// ScopeAudit may read the audit search (/audit/).
	ScopeAudit
	// ScopeAdmin may do everything.
	ScopeAdmin
)

// ParseScope returns the scope named s: "admin", "audit" or "metrics".
func ParseScope(s string) (Scope, bool) {
	switch s {
	case "admin":
		return ScopeAdmin, true
	case "audit":
		return ScopeAudit, true
	case "metrics":
		return ScopeMetrics, true
	}
	return 0, false
}

// Allows reports whether a credential granting s may use an endpoint
// that needs need: s holds need, or s holds admin.
func (s Scope) Allows(need Scope) bool {
	return s&ScopeAdmin != 0 || (need != 0 && s&need == need)
}

// String names the scopes of s, joined with "+" ("" for none).
func (s Scope) String() string {
	var names []string
	for _, c := range []struct {
		s    Scope
		name string
	}{{ScopeAdmin, "admin"}, {ScopeAudit, "audit"}, {ScopeMetrics, "metrics"}} {
		if s&c.s != 0 {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, "+")
}

// Rule is what an endpoint requires of a request.
type Rule struct {
	// Scope a credential must grant (or admin). 0: open to everyone.
	Scope Scope
	// Always requires the credential on a trusted listener (loopback or
	// insecure) too; without it a trusted listener serves the endpoint to
	// everyone.
	Always bool
}

// Rules of the endpoints the admin listener serves itself, and of the
// audit search other packages mount.
var (
	// RuleOpen: /healthz and /readyz (container health checks probe them
	// without credentials).
	RuleOpen = Rule{}
	// RuleMetrics: /metrics, open on a trusted listener, else scope
	// metrics or admin.
	RuleMetrics = Rule{Scope: ScopeMetrics}
	// RuleAudit: the audit search reads every tenant's calls: scope audit
	// or admin everywhere, loopback included.
	RuleAudit = Rule{Scope: ScopeAudit, Always: true}
)

// Credential is what a request's Authorization header proved.
type Credential struct {
	// Presented: the request sent an Authorization header.
	Presented bool
	// Valid: it was "Bearer <token>" and the token is a configured key
	// or a JWT that verified with a configured issuer.
	Valid bool
	// Scope is what a valid credential grants (0: none, e.g. a JWT
	// without an admin claim value).
	Scope Scope
	// Who names it for logs, never with key material: "key <id>" or
	// "jwt <issuer> <sub>".
	Who string
	// Reason says why an invalid credential was refused (never quoting
	// it), for logs.
	Reason string
}

// Policy is the access rule of one admin listener.
type Policy struct {
	// Loopback: the listener is bound to a loopback address only.
	Loopback bool
	// Insecure: admin.insecure, the network is trusted as loopback is.
	Insecure bool
	// Configured: at least one credential (key or JWT claim) is
	// configured.
	Configured bool
}

// ErrNoCredential is returned (wrapped, with what to do) by
// [Policy.StartError], [Server.Listen] and [Server.Serve] for a listener
// that is not on loopback, has no credential and is not insecure.
var ErrNoCredential = errors.New("admin: listener is not on loopback and has no credential configured")

// NewPolicy returns the policy of a listener bound to addr (host:port,
// as net.Listener.Addr reports it). Only an IP literal in 127.0.0.0/8 or
// ::1 is loopback: "0.0.0.0", "::", an empty host (every interface), any
// other address and any host name are not, since a name may resolve
// anywhere (Server.Serve decides on the address actually bound).
func NewPolicy(addr string, configured, insecure bool) Policy {
	return Policy{Loopback: IsLoopback(addr), Insecure: insecure, Configured: configured}
}

// IsLoopback reports whether addr (host:port or a bare host) is an IP
// literal of the loopback range.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host, _, _ = strings.Cut(host, "%") // a zone
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Trusted reports whether the listener serves RuleMetrics endpoints and
// readiness details without a credential: on loopback, or insecure.
func (p Policy) Trusted() bool { return p.Loopback || p.Insecure }

// StartError returns nil when a listener with policy p may serve, or an
// error wrapping [ErrNoCredential] that says how to configure one.
func (p Policy) StartError() error {
	if p.Loopback || p.Configured || p.Insecure {
		return nil
	}
	return fmt.Errorf("%w: set admin.keys (e.g. SWITCHYARD_ADMIN_KEY=$(switchyard keygen), or "+
		"admin: {listen: ..., keys: [{key_file: /run/secrets/admin_key, scope: admin}]}) or admin.jwt_claim, "+
		"bind it to 127.0.0.1, or set admin.insecure: true (SWITCHYARD_ADMIN_INSECURE=true) on a trusted network "+
		"(docs/observability.md)", ErrNoCredential)
}

// Decision is the answer to one request: Status 0 lets it through;
// otherwise Status (401 or 403) and Message (which scope is needed, never
// the credential) are the refusal.
type Decision struct {
	Status  int
	Message string
	// Challenge is the WWW-Authenticate value of a 401.
	Challenge string
}

// Allowed reports whether d lets the request through.
func (d Decision) Allowed() bool { return d.Status == 0 }

// Decide applies p to a request for an endpoint with rule r (what is
// named endpoint in messages) that presented c:
//
//   - an open rule, or a trusted listener for a rule that is not Always:
//     allowed, whatever the credential;
//   - no credential configured at all: 403, saying to configure one of
//     the scope needed;
//   - no credential, or one that does not verify: 401 with
//     WWW-Authenticate: Bearer;
//   - a valid credential without the scope (nor admin): 403;
//   - else allowed.
func (p Policy) Decide(endpoint string, r Rule, c Credential) Decision {
	if r.Scope == 0 || (p.Trusted() && !r.Always) {
		return Decision{}
	}
	need := r.Scope.String()
	if r.Scope != ScopeAdmin {
		need += " or admin"
	}
	switch {
	case !p.Configured:
		return Decision{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"%s needs a credential with scope %s, and this admin listener has none configured: "+
				"configure admin.keys (key_env or key_file, scope %s; e.g. SWITCHYARD_ADMIN_KEY) or admin.jwt_claim",
			endpoint, need, need)}
	case !c.Presented:
		return Decision{Status: http.StatusUnauthorized, Challenge: challenge(""), Message: fmt.Sprintf(
			"%s needs a credential with scope %s: send Authorization: Bearer <admin key or JWT>", endpoint, need)}
	case !c.Valid:
		return Decision{Status: http.StatusUnauthorized, Challenge: challenge("invalid_token"), Message: fmt.Sprintf(
			"the credential is not valid (not a configured admin key, or a JWT that did not verify); %s needs scope %s",
			endpoint, need)}
	case !c.Scope.Allows(r.Scope):
		return Decision{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"the credential does not grant scope %s, which %s needs", need, endpoint)}
	}
	return Decision{}
}

// challenge is the WWW-Authenticate value of a 401 (RFC 6750).
func challenge(errCode string) string {
	if errCode == "" {
		return `Bearer realm="switchyard-admin"`
	}
	return `Bearer realm="switchyard-admin", error="` + errCode + `"`
}

// TokenVerifier verifies a JWT and fills p with its issuer and claims: a
// *jwtauth.Verifier. Errors never quote the token.
type TokenVerifier interface {
	Verify(ctx context.Context, token string, p *tenant.Principal) error
}

// Key is one configured admin key: its record (id and hash only, never
// the key) and the scope it grants.
type Key struct {
	Record apikey.Record
	Scope  Scope
}

// JWTClaim maps the values of one claim of verified JWTs to scopes.
type JWTClaim struct {
	// Verifier checks the token (config auth.jwt's issuers).
	Verifier TokenVerifier
	// Name is the claim (a string or an array of strings); the Verifier
	// must copy it into the Principal's claims.
	Name string
	// Values maps a claim value to the scopes it grants; a token with
	// several mapped values gets them all.
	Values map[string]Scope
}

// Auth verifies the bearer credentials of admin requests. It holds only
// the hashes of keys. Create it with [NewAuth]; safe for concurrent use.
type Auth struct {
	keys map[string]Key // by key id; read-only after NewAuth
	jwt  *JWTClaim
	now  func() time.Time
}

// NewAuth returns an Auth for keys and the JWT claim jwt (nil: keys
// only). It fails on two keys with one id, a key without a scope, a claim
// without a name, verifier or value, and when there is nothing to verify
// (no key, no claim): a nil *Auth means no credential is configured.
func NewAuth(keys []Key, jwt *JWTClaim) (*Auth, error) {
	a := &Auth{keys: make(map[string]Key, len(keys)), now: time.Now}
	var errs []error
	for i, k := range keys {
		switch {
		case !apikey.ValidID(k.Record.ID) || len(k.Record.Hash) != apikey.HashLen:
			errs = append(errs, fmt.Errorf("admin: keys[%d]: not a key record", i))
		case k.Scope == 0:
			errs = append(errs, fmt.Errorf("admin: keys[%d] (%s): no scope", i, k.Record.ID))
		}
		if _, dup := a.keys[k.Record.ID]; dup {
			errs = append(errs, fmt.Errorf("admin: keys[%d]: key id %s given twice", i, k.Record.ID))
		}
		a.keys[k.Record.ID] = k
	}
	if jwt != nil {
		if jwt.Verifier == nil || jwt.Name == "" || len(jwt.Values) == 0 {
			errs = append(errs, errors.New("admin: jwt claim: needs a verifier, a claim name and at least one value"))
		}
		a.jwt = jwt
	}
	if len(keys) == 0 && jwt == nil {
		errs = append(errs, errors.New("admin: no key and no jwt claim"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// Authenticate checks r's Authorization header. A token that parses as
// an API key (syk_...) is looked up among the keys by its id and its hash
// compared in constant time (apikey.Verify); any other token is a JWT
// when a claim is configured. Never an error: an unusable header is an
// invalid Credential with a Reason.
func (a *Auth) Authenticate(r *http.Request) Credential {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Credential{}
	}
	c := Credential{Presented: true}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		c.Reason = "not a Bearer credential"
		return c
	}
	if a == nil {
		c.Reason = "no credential configured"
		return c
	}
	if id, _, isKey := apikey.Parse(token); isKey {
		k, found := a.keys[id]
		var rec *apikey.Record
		if found {
			rec = &k.Record
		}
		if err := apikey.Verify(token, rec, a.now()); err != nil {
			c.Reason, c.Who = err.Error(), "key "+id
			return c
		}
		return Credential{Presented: true, Valid: true, Scope: k.Scope, Who: "key " + id}
	}
	if a.jwt == nil {
		c.Reason = "not an admin key, and no JWT claim is configured"
		return c
	}
	var p tenant.Principal
	if err := a.jwt.Verifier.Verify(r.Context(), token, &p); err != nil {
		c.Reason = err.Error()
		return c
	}
	c.Valid, c.Who = true, "jwt "+p.Issuer
	for _, cl := range p.Claims {
		switch cl.Name {
		case a.jwt.Name:
			c.Scope |= a.jwt.Values[cl.Value]
		case "sub":
			c.Who = "jwt " + p.Issuer + " " + cl.Value
		}
	}
	return c
}

// refuse writes d as a JSON error body ({"error": "..."}, as the audit
// API's own errors), with the challenge of a 401.
func refuse(w http.ResponseWriter, d Decision) {
	if d.Challenge != "" {
		w.Header().Set("WWW-Authenticate", d.Challenge)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(d.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": d.Message})
}
