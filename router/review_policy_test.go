package router

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Adversarial review of issue 5 at the router: each test failed while its
// defect was open, and guards its fix since.

// TestReviewDeniedTemplateCompletionLeaks: completion/complete of a
// resource template the tenant's policy denies (a kind resource_templates
// deny rule) is answered by the router ("Resource not found"), while the
// twin naming a template nobody has, under the same deny glob, falls to
// catalog.ResourceUpstream's last branch ("the only upstream the tenant
// sees with resources"), is decided there as kind resources, which the
// rule does not cover, and goes to the upstream, which answers with its
// own result or error. The two answers differ, so a tenant learns which
// denied templates exist (policy.md: "denied == unknown").
func TestReviewDeniedTemplateCompletionLeaks(t *testing.T) {
	g := tenantRig(t)
	tr := tenancy.Tenant{Name: "tr", Policy: policy.Spec{Upstreams: []string{"a"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "a://item/*"},
	}}}
	g.src.set(t, tenantA(), tenantB(), tr)
	complete := func(uri string) *proto.Request {
		return &proto.Request{Method: "completion/complete", Params: []byte(`{"ref":{"type":"ref/resource","uri":"` + uri + `"},"argument":{"name":"id","value":"1"}}`)}
	}
	_, denied := g.callAs("tr", proto.OpCompletionComplete, complete("a://item/{id}"))
	sameError(t, denied, resourceNotFound("a://item/{id}"))
	got, err := g.callAs("tr", proto.OpCompletionComplete, complete("a://item/{nope}"))
	if err == nil {
		t.Fatalf("a denied template is refused by the router, a nonexistent one under the same deny rule reached worker %q", got["worker"])
	}
	sameError(t, err, resourceNotFound("a://item/{nope}"))
}

// TestReviewDeniedTemplateStillRoutesReads: docs/policy.md says "A
// template the tenant may not see routes nothing", yet a concrete URI that
// only a denied template expands to is read anyway: ResourceUpstream skips
// the denied template, then its fallback ("the only resource upstream the
// tenant sees") routes the URI to that upstream, decided as kind resources,
// which a resource_templates deny rule does not cover. A tenant denied
// the template a://item/{id} reads a://item/7 from the upstream.
func TestReviewDeniedTemplateStillRoutesReads(t *testing.T) {
	g := tenantRig(t)
	tr := tenancy.Tenant{Name: "tr", Policy: policy.Spec{Upstreams: []string{"a"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "a://item/*"},
	}}}
	g.src.set(t, tenantA(), tenantB(), tr)
	got, err := g.callAs("tr", proto.OpResourcesRead, &proto.Request{Method: "resources/read", Name: "a://item/7"})
	if err == nil {
		t.Fatalf("a URI of the denied template a://item/{id} was routed to worker %q", got["worker"])
	}
	sameError(t, err, resourceNotFound("a://item/7"))
}
