//go:build !race

package catalog

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
)

// TestCatalogResourceDecisionAllocs pins the resource routing decisions
// of a call (the race detector's instrumentation may allocate, hence the
// build tag): the federated lookup down to the only-upstream fallback and
// its denied-template check, the passthrough decision, and a completion
// reference.
func TestCatalogResourceDecisionAllocs(t *testing.T) {
	snap := kindsState(t).Build(func(string) bool { return true })
	pol := compile(t, policy.Spec{Upstreams: []string{"b"}, Default: policy.Allow, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindResourceTemplates, Pattern: "b://item/*"},
	}})
	for name, fn := range map[string]func(){
		"fallback, denied template": func() { snap.ResourceUpstream("b://item/7", pol) },
		"fallback":                  func() { snap.ResourceUpstream("b://other", pol) },
		"passthrough":               func() { snap.PassthroughResource("b", "b://item/7", pol) },
		"completion":                func() { snap.CompletionUpstream("", "shared://r", pol) },
	} {
		fn()
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
