package tenancy

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// resolveFunc answers one resolve request from snap.
type resolveFunc func(snap *tenancy.Snapshot, data []byte) (any, error)

// resolveEndpoints are the resolve micro endpoints: name, subject under
// tenancy.ResolveGroup, and handler.
var resolveEndpoints = []struct {
	name, subject string
	fn            resolveFunc
}{
	{"resolve_key", "key", resolveKey},
	{"resolve_principal", "principal", resolvePrincipal},
	{"resolve_access", "access", resolveAccess},
}

// addResolve adds the resolve endpoints to svc.
func (s *Service) addResolve(svc micro.Service) error {
	g := svc.AddGroup(tenancy.ResolveGroup)
	for _, ep := range resolveEndpoints {
		if err := g.AddEndpoint(ep.name, s.resolver(ep.fn, tenancy.ResolveGroup+"."+ep.subject), micro.WithEndpointSubject(ep.subject)); err != nil {
			return fmt.Errorf("endpoint %s: %w", ep.name, err)
		}
	}
	return nil
}

// resolver is the micro handler of fn. Resolving reads the watcher's
// snapshot and does no I/O, so it answers on the NATS callback goroutine,
// through the micro.Request, which also keeps $SRV.STATS' error counts
// right. It never touches the admin mailbox: lookups are not queued
// behind admin writes or reconciliation.
func (s *Service) resolver(fn resolveFunc, subject string) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if req.Subject() != subject {
			return // a JetStream delivery, not a request (see bus.Guard)
		}
		var (
			out any
			err error
		)
		switch data := req.Data(); {
		case len(data) > maxRequestBytes:
			err = badRequest("request larger than %d bytes", maxRequestBytes)
		case !s.watch.Ready():
			err = adminErr(tenancy.AdminCodeUnavailable, "the tenancy snapshot is not loaded yet, retry")
		default:
			out, err = fn(s.watch.Current(), data)
		}
		s.answer(req, out, err)
	})
}

// Messages of resolve.key's refusals. Every failure but expiry reads the
// same, as at the edge, so that a guess learns nothing about which ids
// exist or which check failed.
const (
	msgKeyInvalid = "not a valid key"
	msgKeyExpired = "the key has expired"
)

func resolveKey(snap *tenancy.Snapshot, data []byte) (any, error) {
	var req tenancy.ResolveKeyRequest
	// Not decode: a decoder error may quote the request (an unknown field
	// is named), and the request holds a key.
	if decodeStrict(data, &req) != nil {
		return nil, badRequest(`decode request: want {"key": "syk_..."} and nothing else`)
	}
	if req.Key == "" {
		return nil, badRequest("key required")
	}
	name, principal, err := snap.ResolveKey(req.Key, time.Now())
	switch {
	case errors.Is(err, apikey.ErrExpired):
		return nil, adminErr(tenancy.AdminCodeNotFound, msgKeyExpired)
	case err != nil:
		return nil, adminErr(tenancy.AdminCodeNotFound, msgKeyInvalid)
	}
	id, _, _ := apikey.Parse(req.Key) // it parsed in ResolveKey
	return tenancy.ResolveKeyReply{Tenant: name, Principal: principal, KeyID: id}, nil
}

func resolvePrincipal(snap *tenancy.Snapshot, data []byte) (any, error) {
	var req tenancy.ResolvePrincipalRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	p := &tenant.Principal{Issuer: req.Issuer, Groups: req.Groups}
	for name, values := range req.Claims {
		if name == "" {
			return nil, badRequest("claims: a claim has an empty name")
		}
		p.AddClaim(name, values...)
	}
	if len(p.Claims) == 0 && len(p.Groups) == 0 {
		return nil, badRequest("claims or groups required: a principal without either matches no selector")
	}
	name, err := snap.ResolvePrincipal(p)
	switch {
	case errors.Is(err, tenant.ErrAmbiguous):
		return nil, adminErr(tenancy.AdminCodeConflict, "the principal matches selectors of more than one tenant")
	case err != nil:
		return nil, adminErr(tenancy.AdminCodeNotFound, "no tenant's selectors match the principal")
	}
	return tenancy.ResolvePrincipalReply{Tenant: name}, nil
}

func resolveAccess(snap *tenancy.Snapshot, data []byte) (any, error) {
	var req tenancy.ResolveAccessRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkName(req.Tenant); err != nil {
		return nil, err
	}
	switch k := policy.Kind(req.Kind); k {
	case policy.KindTools, policy.KindPrompts, policy.KindResources, policy.KindResourceTemplates:
	default:
		return nil, badRequest("kind %q is not one of tools, prompts, resources, resource_templates", req.Kind)
	}
	if !proto.ValidSlug(req.Upstream) {
		return nil, badRequest("upstream %q is not an upstream name (a slug)", req.Upstream)
	}
	if req.Subject == "" {
		return nil, badRequest("subject required: the federated name (tools, prompts), the URI (resources) or the URI template (resource_templates)")
	}
	_, pol, ok := snap.Tenant(req.Tenant)
	if !ok {
		return nil, adminErr(tenancy.AdminCodeNotFound, "tenant %q not found", req.Tenant)
	}
	return tenancy.ResolveAccessReply{
		Allowed:         pol.Allowed(policy.Kind(req.Kind), req.Upstream, req.Subject),
		UpstreamVisible: pol.Upstream(req.Upstream),
	}, nil
}
