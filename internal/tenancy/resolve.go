package tenancy

// The resolve surface of tenancy-svc: read-only lookups answered from
// tenancy-svc's own [Watcher] snapshot, for operators and other services
// ("which tenant does this key or this principal belong to, and what may
// it see?"). Edges do not use it: they resolve credentials from their own
// snapshot on every request. The endpoints belong to the same micro
// service as the admin endpoints ([AdminService], queue group
// [AdminService]), in their own group [ResolveGroup]; requests and replies
// are JSON, and errors are [AdminError]s with the AdminCode* codes, in
// micro's error headers and as the body.
//
// Whoever may publish to ResolveGroup.> may test API keys for validity and
// read every tenant's selectors and policy decisions: restrict those
// subjects with NATS permissions like the admin ones (docs/tenancy.md).

import (
	"fmt"
	"log/slog"

	"github.com/switchyard-mcp/switchyard/proto"
)

// ResolveGroup is the subject prefix of the resolve endpoints.
const ResolveGroup = proto.SubjTenancyResolve

// Resolve endpoint subjects. Each takes the ResolveXRequest and answers
// the ResolveXReply of the same name.
const (
	SubjResolveKey       = ResolveGroup + ".key"
	SubjResolvePrincipal = ResolveGroup + ".principal"
	SubjResolveAccess    = ResolveGroup + ".access"
)

// ResolveKeyRequest asks which tenant and principal an API key
// authenticates as, now (subject [SubjResolveKey]). Key is the whole
// plaintext key (syk_...). The request prints (every fmt verb) and logs
// (slog) with the key redacted; only JSON encoding carries it.
//
// Errors: [AdminCodeBadRequest] for an empty key; [AdminCodeNotFound]
// with the message "not a valid key" when the key is malformed, unknown,
// does not match its record, is revoked, or its tenant is gone (the same
// answer for all, as at the edge), or "the key has expired" when it
// matches a record past its expiry. No reply or log line holds the key.
type ResolveKeyRequest struct {
	Key string `json:"key"`
}

// String returns the request with the key redacted.
func (r ResolveKeyRequest) String() string {
	return fmt.Sprintf("{key: %s (%d bytes)}", redactedKey, len(r.Key))
}

// GoString returns the request with the key redacted.
func (r ResolveKeyRequest) GoString() string { return "tenancy.ResolveKeyRequest" + r.String() }

// Format prints the request with the key redacted, for every verb.
func (r ResolveKeyRequest) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// LogValue logs the request with the key redacted.
func (r ResolveKeyRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("key", redactedKey), slog.Int("key_bytes", len(r.Key)))
}

const redactedKey = "[redacted]"

// ResolveKeyReply is the key's tenant, principal and key id (the id is
// not secret: key.list and key.revoke use it).
type ResolveKeyReply struct {
	Tenant    string `json:"tenant"`
	Principal string `json:"principal"`
	KeyID     string `json:"key_id"`
}

// ResolvePrincipalRequest asks which tenant an authenticated principal
// belongs to through the tenants' selectors (subject
// [SubjResolvePrincipal]), as the edge resolves a verified JWT: Issuer is
// its iss, Claims its claim values by claim name (a claim with several
// values lists them all), Groups its groups. At least one claim value or
// group is required ([AdminCodeBadRequest]).
//
// Errors: [AdminCodeNotFound] when no tenant's selector matches,
// [AdminCodeConflict] when selectors of two or more tenants match (the
// edge refuses such a principal; it never guesses).
type ResolvePrincipalRequest struct {
	Issuer string              `json:"issuer,omitempty"`
	Claims map[string][]string `json:"claims,omitempty"`
	Groups []string            `json:"groups,omitempty"`
}

// ResolvePrincipalReply names the principal's tenant.
type ResolvePrincipalReply struct {
	Tenant string `json:"tenant"`
}

// ResolveAccessRequest asks what Tenant's policy decides for one item
// (subject [SubjResolveAccess]): Kind is tools, prompts, resources or
// resource_templates (policy.Kind); Upstream the upstream serving it;
// Subject what the policy matches for that kind (docs/policy.md): for
// tools and prompts the federated name clients see,
// <upstream>__<name> (or its short form), for resources the URI, for
// resource templates the URI template. All four are required
// ([AdminCodeBadRequest]); a tenant not in the snapshot is
// [AdminCodeNotFound]. The upstream need not exist in the catalog: the
// answer is what the policy would decide.
type ResolveAccessRequest struct {
	Tenant   string `json:"tenant"`
	Kind     string `json:"kind"`
	Upstream string `json:"upstream"`
	Subject  string `json:"subject"`
}

// ResolveAccessReply is the decision: UpstreamVisible is whether the
// tenant sees Upstream at all (policy.Policy.Upstream); Allowed whether
// it may see and use the item (policy.Policy.Allowed), never true when
// UpstreamVisible is false.
type ResolveAccessReply struct {
	Allowed         bool `json:"allowed"`
	UpstreamVisible bool `json:"upstream_visible"`
}
