package tenancy

// The admin surface of tenancy-svc: a NATS micro service (nats.go/micro)
// named [AdminService], discoverable with $SRV.PING/INFO/STATS, whose
// endpoints live under [AdminGroup]. Requests and replies are JSON. An
// error reply carries the micro error headers (Nats-Service-Error-Code:
// one of the AdminCode* values; Nats-Service-Error: the message) and an
// [AdminError] as its JSON body.
//
// Admin authority is NATS access: whoever may publish to AdminGroup.> may
// change tenants and keys, so restrict those subjects with NATS accounts
// and permissions (docs/tenancy.md).

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// AdminService is the micro service name of tenancy-svc's admin surface.
const AdminService = proto.ServiceTenancy

// AdminGroup is the subject prefix of the admin endpoints.
const AdminGroup = proto.SubjTenancyAdmin

// Admin endpoint subjects. Each takes the XRequest and answers the XReply
// of the same name (tenant.get answers a [TenantInfo], key.revoke and
// key.delete a [KeyInfo]).
const (
	SubjTenantPut    = AdminGroup + ".tenant.put"
	SubjTenantGet    = AdminGroup + ".tenant.get"
	SubjTenantList   = AdminGroup + ".tenant.list"
	SubjTenantDelete = AdminGroup + ".tenant.delete"
	SubjKeyCreate    = AdminGroup + ".key.create"
	SubjKeyRevoke    = AdminGroup + ".key.revoke"
	SubjKeyList      = AdminGroup + ".key.list"
	SubjKeyDelete    = AdminGroup + ".key.delete"
)

// Admin error codes, sent in micro's Nats-Service-Error-Code header and in
// [AdminError.Code]. They follow HTTP status codes, the micro convention.
const (
	// AdminCodeBadRequest: the request does not decode or fails validation.
	AdminCodeBadRequest = "400"
	// AdminCodeNotFound: the tenant or key does not exist.
	AdminCodeNotFound = "404"
	// AdminCodeConflict: the change clashes with the current state: the
	// tenant or key is managed by the configuration file, a second
	// anonymous tenant, a stale revision, a key record that does not
	// decode (key.revoke: delete it instead).
	AdminCodeConflict = "409"
	// AdminCodeInternal: the KV store failed.
	AdminCodeInternal = "500"
	// AdminCodeUnavailable: the service is shutting down or overloaded;
	// retry.
	AdminCodeUnavailable = "503"
)

// Provenance of a tenant or key record ([TenantInfo.Source], [KeyInfo.Source]).
const (
	// SourceConfig: seeded from the configuration file, which owns it.
	SourceConfig = "config"
	// SourceAdmin: created through the admin endpoints.
	SourceAdmin = "admin"
)

// AdminError is the JSON body of an admin error reply. Errors compare by
// Code, so errors.Is(err, &AdminError{Code: AdminCodeNotFound}) matches any
// not-found reply.
type AdminError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error returns the message and code.
func (e *AdminError) Error() string {
	return fmt.Sprintf("tenancy admin: %s (code %s)", e.Message, e.Code)
}

// Is reports whether target is an *AdminError with the same Code.
func (e *AdminError) Is(target error) bool {
	t, ok := target.(*AdminError)
	return ok && t.Code == e.Code
}

// TenantPutRequest creates or replaces a tenant (subject [SubjTenantPut]).
// Revision, when nonzero, makes the put conditional: it succeeds only if
// the tenant's current revision is Revision (from [TenantInfo]); zero
// writes unconditionally.
type TenantPutRequest struct {
	Tenant   Tenant `json:"tenant"`
	Revision uint64 `json:"revision,omitempty"`
}

// TenantPutReply is the stored tenant; Created is true if it did not exist.
type TenantPutReply struct {
	TenantInfo
	Created bool `json:"created"`
}

// TenantInfo is one stored tenant with its KV revision and [SourceConfig]
// or [SourceAdmin]. It is the reply of tenant.get.
type TenantInfo struct {
	Tenant   Tenant `json:"tenant"`
	Revision uint64 `json:"revision"`
	Source   string `json:"source"`
}

// TenantGetRequest names one tenant (subject [SubjTenantGet]).
type TenantGetRequest struct {
	Name string `json:"name"`
}

// TenantListRequest lists every tenant (subject [SubjTenantList]); it has
// no fields yet.
type TenantListRequest struct{}

// TenantListReply lists the tenants, sorted by name.
type TenantListReply struct {
	Tenants []TenantInfo `json:"tenants"`
}

// TenantDeleteRequest deletes a tenant and every API key of it (subject
// [SubjTenantDelete]).
type TenantDeleteRequest struct {
	Name string `json:"name"`
}

// TenantDeleteReply says what was deleted.
type TenantDeleteReply struct {
	Name        string `json:"name"`
	KeysDeleted int    `json:"keys_deleted"`
}

// KeyCreateRequest mints an API key (subject [SubjKeyCreate]) for a
// principal of an existing tenant. ExpiresUnixMs is when it stops
// verifying, Unix milliseconds; zero means never.
type KeyCreateRequest struct {
	Tenant        string `json:"tenant"`
	Principal     string `json:"principal"`
	ExpiresUnixMs int64  `json:"expires_unix_ms,omitempty"`
}

// KeyCreateReply carries the new key in plaintext, the only time it is
// ever shown (only its hash is stored), and its record without the hash.
type KeyCreateReply struct {
	Key string `json:"key"`
	KeyInfo
}

// KeyRevokeRequest revokes one key by id (subject [SubjKeyRevoke]). The
// reply is the revoked key's [KeyInfo].
type KeyRevokeRequest struct {
	ID string `json:"id"`
}

// KeyDeleteRequest deletes one key record by id (subject
// [SubjKeyDelete]), whether or not it decodes; a key the configuration
// file owns is refused ([AdminCodeConflict]). The reply is the deleted
// key's [KeyInfo]. A revocation outlives the record: a configured key
// with that id would be seeded revoked.
type KeyDeleteRequest struct {
	ID string `json:"id"`
}

// KeyListRequest lists the keys of Tenant, or of every tenant when it is
// empty (subject [SubjKeyList]). Records that do not decode are listed
// too, whatever Tenant is (theirs cannot be told), as [KeyInfo.Undecodable].
type KeyListRequest struct {
	Tenant string `json:"tenant,omitempty"`
}

// KeyListReply lists keys sorted by tenant, principal and id.
type KeyListReply struct {
	Keys []KeyInfo `json:"keys"`
}

// KeyInfo is an API key record as the admin surface shows it: never the
// hash, never the key. Undecodable marks a stored record that does not
// decode: only ID (the KV key) and Source are known. Such a record
// authenticates nothing; key.delete removes it.
type KeyInfo struct {
	ID            string `json:"id"`
	Tenant        string `json:"tenant"`
	Principal     string `json:"principal"`
	CreatedUnixMs int64  `json:"created_unix_ms,omitempty"`
	ExpiresUnixMs int64  `json:"expires_unix_ms,omitempty"`
	Revoked       bool   `json:"revoked,omitempty"`
	Source        string `json:"source"`
	Undecodable   bool   `json:"undecodable,omitempty"`
}

// KeyInfoOf is r without its hash, with source.
func KeyInfoOf(r *apikey.Record, source string) KeyInfo {
	return KeyInfo{
		ID: r.ID, Tenant: r.Tenant, Principal: r.Principal,
		CreatedUnixMs: r.CreatedUnixMs, ExpiresUnixMs: r.ExpiresUnixMs,
		Revoked: r.Revoked, Source: source,
	}
}

// MaxPrincipalLen bounds a principal name in bytes.
const MaxPrincipalLen = 256

// CheckPrincipal reports whether p can name a principal: 1 to
// [MaxPrincipalLen] bytes of valid UTF-8 without control characters.
func CheckPrincipal(p string) error {
	switch {
	case p == "":
		return errors.New("principal: required")
	case len(p) > MaxPrincipalLen:
		return fmt.Errorf("principal: longer than %d bytes", MaxPrincipalLen)
	case !utf8.ValidString(p):
		return errors.New("principal: not valid UTF-8")
	case strings.ContainsFunc(p, unicode.IsControl):
		return errors.New("principal: contains a control character")
	}
	return nil
}

// CheckTenant reports every problem with one tenant record, joined: the
// name is not a slug (proto.ValidSlug), the policy does not compile
// (policy.Compile) or names an upstream that is not a slug, a selector
// has no valid shape (tenant.Build), a limit is negative or not finite.
// It does not look at other tenants: see [CheckTenants].
func CheckTenant(t *Tenant) error {
	var errs []error
	if !proto.ValidSlug(t.Name) {
		errs = append(errs, fmt.Errorf("name: %q is not a slug ([a-z0-9-], 1-63 characters)", t.Name))
	}
	if _, err := policy.Compile(t.Policy); err != nil {
		errs = append(errs, prefixLines("policy", err))
	}
	for _, u := range t.Policy.Upstreams {
		if u != "" && !proto.ValidSlug(u) {
			errs = append(errs, fmt.Errorf("policy: upstream %q is not a slug", u))
		}
	}
	if len(t.Selectors) > 0 {
		if _, err := tenant.Build([]tenant.TenantSelectors{{Tenant: t.Name, Selectors: t.Selectors}}); err != nil {
			errs = append(errs, prefixLines("selectors", err))
		}
	}
	l := t.Limits
	for _, r := range []struct {
		name string
		v    float64
	}{{"rate", l.Rate}, {"principal_rate", l.PrincipalRate}} {
		if r.v < 0 || math.IsNaN(r.v) || math.IsInf(r.v, 0) {
			errs = append(errs, fmt.Errorf("limits.%s: must be a finite number >= 0, got %v", r.name, r.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"burst", l.Burst}, {"principal_burst", l.PrincipalBurst}, {"max_in_flight", l.MaxInFlight}, {"max_sessions", l.MaxSessions}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("limits.%s: must not be negative, got %d", n.name, n.v))
		}
	}
	return errors.Join(errs...)
}

// CheckTenants checks a set of tenants meant to coexist: each with
// [CheckTenant], names unique, at most one anonymous. Each problem names
// the tenant's index and name.
func CheckTenants(ts []Tenant) error {
	var errs []error
	seen := make(map[string]bool, len(ts))
	anon := ""
	for i := range ts {
		t := &ts[i]
		where := fmt.Sprintf("tenants[%d] (%s)", i, t.Name)
		if err := CheckTenant(t); err != nil {
			errs = append(errs, prefixLines(where, err))
		}
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("%s: name: duplicate", where))
		}
		seen[t.Name] = true
		if t.Anonymous {
			if anon != "" {
				errs = append(errs, fmt.Errorf("%s: anonymous: %q is anonymous already; at most one tenant may be", where, anon))
			} else {
				anon = t.Name
			}
		}
	}
	return errors.Join(errs...)
}

// prefixLines puts prefix before every line of err's message: an
// errors.Join error holds one problem a line, and each line must say
// whose problem it is. The result wraps err.
func prefixLines(prefix string, err error) error { return &prefixedError{prefix, err} }

type prefixedError struct {
	prefix string
	err    error
}

func (e *prefixedError) Error() string {
	p := e.prefix + ": "
	return p + strings.ReplaceAll(e.err.Error(), "\n", "\n"+p)
}

func (e *prefixedError) Unwrap() error { return e.err }
