package policy

import (
	"errors"
	"slices"
	"testing"
)

func TestRequiredScopes(t *testing.T) {
	p, err := Compile(Spec{AllUpstreams: true, Default: Allow, RequiredScopes: []ScopeRule{
		{Scopes: []string{"mcp"}},
		{Upstream: "gh", Scopes: []string{"gh:read"}},
		{Upstream: "gh", Kind: KindTools, Pattern: "gh__delete_*", Scopes: []string{"gh:admin", "gh:read"}},
		{Kind: KindResources, Pattern: "file:///secret/*", Scopes: []string{"files:secret"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Call
		want []string
	}{
		{Call{}, []string{"mcp"}},
		{Call{Upstream: "other", Kind: KindTools, Subject: "other__x"}, []string{"mcp"}},
		{Call{Upstream: "gh", Kind: KindTools, Subject: "gh__list"}, []string{"mcp", "gh:read"}},
		{Call{Upstream: "gh", Kind: KindTools, Subject: "gh__delete_repo"}, []string{"mcp", "gh:read", "gh:admin"}},
		{Call{Upstream: "gh", Kind: KindPrompts, Subject: "gh__delete_repo"}, []string{"mcp", "gh:read"}},
		{Call{Kind: KindResources, Subject: "file:///secret/a/b"}, []string{"mcp", "files:secret"}},
		{Call{Kind: KindResourceTemplates, Subject: "file:///secret/{x}"}, []string{"mcp", "files:secret"}},
	} {
		if got := p.RequiredScopes(tc.c); !slices.Equal(got, tc.want) {
			t.Errorf("RequiredScopes(%+v) = %v, want %v", tc.c, got, tc.want)
		}
	}
	if m := Missing([]string{"a", "b", "c"}, []string{"b"}); !slices.Equal(m, []string{"a", "c"}) {
		t.Errorf("Missing = %v", m)
	}
	var none *Policy
	if none.RequiredScopes(Call{}) != nil || none.HasScopeRules() {
		t.Error("a nil policy requires scopes")
	}
	for _, bad := range []ScopeRule{
		{},                     // no scopes
		{Scopes: []string{""}}, // an empty scope
		{Kind: "bogus", Pattern: "x", Scopes: []string{"a"}},
		{Kind: KindTools, Scopes: []string{"a"}}, // a kind without a pattern
		{Pattern: `x\`, Scopes: []string{"a"}},   // a malformed pattern
	} {
		if _, err := Compile(Spec{AllUpstreams: true, RequiredScopes: []ScopeRule{bad}}); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Compile with %+v: %v", bad, err)
		}
	}
}
