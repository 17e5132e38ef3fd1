package catalog

import (
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
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
	if snap.PassthroughResource("b", "b://item/{id}", noTemplates) || !snap.PassthroughResource("b", "b://other", noTemplates) {
		t.Fatal("passthrough resource decisions")
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
