package router

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// TestRouterDeniedTemplatePassthroughAndCompletion: a tenant denied the
// template a://item/{id} (kind resource_templates) gets the router's
// "Resource not found" for the URIs only it expands to and for completion
// of it, in the passthrough view as in the federated one, byte for byte
// as for a template that does not exist; completion of a template nobody
// lists is refused even for a tenant allowed everything, and completion
// of an allowed, listed template still reaches its upstream.
func TestRouterDeniedTemplatePassthroughAndCompletion(t *testing.T) {
	g := tenantRig(t)
	tr := tenancy.Tenant{Name: "tr", Policy: policy.Spec{Upstreams: []string{"a"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "a://item/*"},
	}}}
	open := tenancy.Tenant{Name: "open", Policy: policy.Spec{Upstreams: []string{"a"}, Default: policy.Allow}}
	g.src.set(t, tenantA(), tenantB(), tr, open)
	complete := func(view, uri string) *proto.Request {
		return &proto.Request{Method: "completion/complete", View: view,
			Params: []byte(`{"ref":{"type":"ref/resource","uri":"` + uri + `"},"argument":{"name":"id","value":"1"}}`)}
	}
	for _, c := range []struct {
		name, tenant, op string
		req              *proto.Request
		uri              string
	}{
		{"read, passthrough", "tr", proto.OpResourcesRead, &proto.Request{Method: "resources/read", View: "a", Name: "a://item/7"}, "a://item/7"},
		{"subscribe, federated", "tr", proto.OpResourcesSubscribe, &proto.Request{Method: "resources/subscribe", Name: "a://item/7"}, "a://item/7"},
		{"denied template, passthrough", "tr", proto.OpCompletionComplete, complete("a", "a://item/{id}"), "a://item/{id}"},
		{"nonexistent template, passthrough", "tr", proto.OpCompletionComplete, complete("a", "a://item/{nope}"), "a://item/{nope}"},
		{"unlisted template, allowed", "open", proto.OpCompletionComplete, complete("", "a://other/{x}/{y}"), "a://other/{x}/{y}"},
		{"unlisted template, allowed, passthrough", "open", proto.OpCompletionComplete, complete("a", "a://other/{x}/{y}"), "a://other/{x}/{y}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.callAs(c.tenant, c.op, c.req)
			if err == nil {
				t.Fatalf("forwarded to worker %q", got["worker"])
			}
			sameError(t, err, resourceNotFound(c.uri))
		})
	}
	for _, c := range []struct {
		name, tenant, op string
		req              *proto.Request
	}{
		{"allowed template completion", "open", proto.OpCompletionComplete, complete("", "a://item/{id}")},
		{"allowed template completion, passthrough", "open", proto.OpCompletionComplete, complete("a", "a://item/{id}")},
		{"listed resource completion", "tr", proto.OpCompletionComplete, complete("", "a://doc")},
		{"unlisted URI no denied template matches", "tr", proto.OpResourcesRead, &proto.Request{Method: "resources/read", Name: "a://other/7"}},
		{"unlisted URI no denied template matches, passthrough", "tr", proto.OpResourcesRead, &proto.Request{Method: "resources/read", View: "a", Name: "a://other/7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.callAs(c.tenant, c.op, c.req)
			if err != nil || got["worker"] != "w-a" {
				t.Fatalf("got %v, %v; want it forwarded to w-a", got, err)
			}
		})
	}
}
