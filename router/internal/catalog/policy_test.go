package catalog

import (
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/proto"
)

func compile(t *testing.T, spec policy.Spec) *policy.Policy {
	t.Helper()
	p, err := policy.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCatalogPolicyResourceUpstream: resources are routed as if what the
// policy denies did not exist, and a URI the policy denies routes nowhere.
func TestCatalogPolicyResourceUpstream(t *testing.T) {
	snap := kindsState(t).Build(func(string) bool { return true })
	onlyB := compile(t, policy.Spec{Upstreams: []string{"b"}, Default: policy.Allow})
	noTemplates := compile(t, policy.Spec{AllUpstreams: true, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "*"},
		{Effect: policy.Deny, Kind: policy.KindResources, Pattern: "*://doc"},
	}})
	for _, c := range []struct {
		name string
		pol  *policy.Policy
		uri  string
		want string
		ok   bool
	}{
		{"listed by an unseen upstream", onlyB, "a://doc", "b", true}, // b is the only resource upstream B sees
		{"listed, seen", onlyB, "b://doc", "b", true},
		{"template of an unseen upstream", onlyB, "a://item/1", "b", true},
		{"denied URI", noTemplates, "b://doc", "", false},
		{"template denied: no template match", noTemplates, "b://item/1", "", false}, // two resource upstreams: ambiguous
		{"template ref denied", noTemplates, "a://item/{id}", "", false},
		{"nil policy", nil, "a://doc", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := snap.ResourceUpstream(c.uri, c.pol)
			if ok != c.ok || (ok && got != c.want) {
				t.Fatalf("ResourceUpstream(%q) = %q, %v; want %q, %v", c.uri, got, ok, c.want, c.ok)
			}
		})
	}
	if snap.PassthroughResource("a", "a://x", onlyB) {
		t.Fatal("passthrough resource of an unseen upstream allowed")
	}
	if snap.PassthroughResource("b", "b://item/{id}", noTemplates) || !snap.PassthroughResource("b", "b://other", onlyB) {
		t.Fatal("passthrough resource decisions")
	}
	// An unlisted URI under a policy that restricts resources: no
	// fallback (only the upstream knows whether it exists).
	if snap.PassthroughResource("b", "b://other", noTemplates) {
		t.Fatal("unlisted URI forwarded under a policy with resource rules")
	}
}

// TestCatalogPolicySubjects: every view's entries carry the federated
// name as their policy subject (shortened names included), UpstreamOf
// skips upstreams the policy does not see, and passthrough flags follow
// the catalog.
func TestCatalogPolicySubjects(t *testing.T) {
	s := NewState("__")
	long := strings.Repeat("x", 70)
	for _, u := range []string{"a", "a__b"} {
		s.SetUpstream(u, true)
		if err := s.SetTools(u, [][]byte{toolJSON("t"), toolJSON(long)}); err != nil {
			t.Fatal(err)
		}
	}
	s.SetPassthrough("a", true)
	snap := s.Build(func(string) bool { return true })
	for _, e := range snap.Pass["a"].Listed() {
		fe, ok := snap.Federated.Lookup(e.Subject)
		if !ok || fe.Orig != e.Orig || fe.Upstream != "a" {
			t.Errorf("passthrough %q: subject %q is not its federated name", e.Name, e.Subject)
		}
	}
	if e, _ := snap.Federated.Lookup("a__t"); e.Subject != "a__t" {
		t.Errorf("federated subject %q", e.Subject)
	}
	all := compile(t, policy.Spec{AllUpstreams: true})
	onlyA := compile(t, policy.Spec{Upstreams: []string{"a"}})
	if got := snap.UpstreamOf("a__b__t", all); got != "a__b" {
		t.Errorf("UpstreamOf, all: %q", got)
	}
	if got := snap.UpstreamOf("a__b__t", onlyA); got != "a" {
		t.Errorf("UpstreamOf, only a: %q", got)
	}
	if got := snap.UpstreamOf("zz__t", all); got != "" {
		t.Errorf("UpstreamOf, unknown: %q", got)
	}
	if !snap.Passthrough("a") || snap.Passthrough("a__b") {
		t.Error("passthrough flags")
	}
	s.SetUpstream("a", false)
	s.SetUpstream("a", true)
	if s.Build(func(string) bool { return true }).Passthrough("a") {
		t.Error("passthrough flag survived the upstream's removal")
	}
}

// TestCatalogPolicyDeniedTemplates: a resource template the policy denies
// routes nothing. The only-upstream fallback refuses the URIs it matches
// (also while its upstream is down, and in the passthrough view) unless a
// template the policy allows matches them too.
func TestCatalogPolicyDeniedTemplates(t *testing.T) {
	s := kindsState(t)
	s.SetUpstream("c", true)
	if err := s.SetList(proto.KindResourceTemplates, "c", itemsJSON("uriTemplate", "c://item/{id}", "c://{+path}")); err != nil {
		t.Fatal(err)
	}
	pol := compile(t, policy.Spec{Upstreams: []string{"b"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "*://item/*"},
	}})
	onlyC := compile(t, policy.Spec{Upstreams: []string{"c"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "*://item/*"},
	}})
	for _, up := range []bool{true, false} {
		snap := s.Build(func(u string) bool { return up || u != "b" })
		for _, c := range []struct {
			pol  *policy.Policy
			uri  string
			want string
			ok   bool
		}{
			{pol, "b://item/7", "", false}, // only the denied template expands to it
			{pol, "b://doc", "b", true},    // listed
			{pol, "b://other", "b", true},  // no template matches: the only upstream answers for itself
			{pol, "b://item/{id}", "b", false},
			{onlyC, "c://item/7", "c", true}, // the allowed c://{+path} matches it too
		} {
			got, ok := snap.ResourceUpstream(c.uri, c.pol)
			if ok != c.ok || (ok && got != c.want) {
				t.Errorf("b up %v: ResourceUpstream(%q) = %q, %v; want %q, %v", up, c.uri, got, ok, c.want, c.ok)
			}
			view := c.want
			if view == "" {
				view = "b"
			}
			if pass := snap.PassthroughResource(view, c.uri, c.pol); pass != c.ok {
				t.Errorf("b up %v: PassthroughResource(%q, %q) = %v, want %v", up, view, c.uri, pass, c.ok)
			}
		}
	}
}

// TestCatalogCompletionUpstream: a completion ref/resource goes only to an
// upstream the policy sees that lists it (a template, decided as
// resource_templates, or a resource), so that a denied template and a
// nonexistent one under the same rule are both refused.
func TestCatalogCompletionUpstream(t *testing.T) {
	snap := kindsState(t).Build(func(string) bool { return true })
	all := allowAll(t)
	onlyB := compile(t, policy.Spec{Upstreams: []string{"b"}, Default: policy.Allow})
	deny := compile(t, policy.Spec{Upstreams: []string{"b"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "b://item/*"},
	}})
	for _, c := range []struct {
		name      string
		pol       *policy.Policy
		view, ref string
		want      string
		ok        bool
	}{
		{"listed template", all, "", "a://item/{id}", "a", true},
		{"listed template, passthrough", all, "b", "b://item/{id}", "b", true},
		{"listed resource", all, "", "b://doc", "b", true},
		{"unlisted template", all, "", "a://item/{nope}", "", false},
		{"unlisted URI a template matches", all, "", "b://item/7", "", false},
		{"template of another view", all, "a", "b://item/{id}", "", false},
		{"shared, first upstream unseen", onlyB, "", "shared://r", "b", true},
		{"template of an unseen upstream", onlyB, "", "a://item/{id}", "", false},
		{"unseen passthrough view", onlyB, "a", "a://item/{id}", "", false},
		{"denied template", deny, "", "b://item/{id}", "b", false},
		{"denied template, passthrough", deny, "b", "b://item/{id}", "b", false},
		{"nonexistent template under the deny rule", deny, "", "b://item/{nope}", "", false},
		{"nonexistent, passthrough", deny, "b", "b://item/{nope}", "", false},
		{"nil policy", nil, "", "a://item/{id}", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := snap.CompletionUpstream(c.view, c.ref, c.pol)
			if ok != c.ok || (ok && got != c.want) {
				t.Fatalf("CompletionUpstream(%q, %q) = %q, %v; want %q, %v", c.view, c.ref, got, ok, c.want, c.ok)
			}
		})
	}
}
