package tenant

import (
	"errors"
	"fmt"
	"testing"
)

// TestTenantCompoundManyGroups covers a principal with more groups than
// Resolve keeps on its stack: a compound selector's group past them still
// matches, and still counts toward ambiguity.
func TestTenantCompoundManyGroups(t *testing.T) {
	x, err := Build([]TenantSelectors{
		{Tenant: "a", Selectors: []Selector{{Issuer: idp, Claim: "dept", Value: "ops", Group: "late"}}},
		{Tenant: "b", Selectors: []Selector{{Group: "later"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}}
	for i := range keptGroups + 2 {
		p.Groups = append(p.Groups, fmt.Sprintf("g%d", i))
	}
	p.Groups = append(p.Groups, "late")
	if got, err := x.Resolve(&p); got != "a" || err != nil {
		t.Fatalf("Resolve = %q, %v; want a", got, err)
	}
	p.Groups = append(p.Groups, "later")
	if got, err := x.Resolve(&p); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Resolve = %q, %v; want ErrAmbiguous", got, err)
	}
}

// TestTenantResolveEveryTenant builds an index large enough for long probe
// sequences and resolves a principal of every tenant and of every pair of
// neighbours.
func TestTenantResolveEveryTenant(t *testing.T) {
	const n = 3000
	ts := make([]TenantSelectors, n)
	for i := range ts {
		ts[i] = TenantSelectors{Tenant: fmt.Sprintf("tenant-%d", i), Selectors: []Selector{
			{Claim: "org_id", Value: fmt.Sprintf("org-%d", i)},
			{Group: fmt.Sprintf("tenant-%d-users", i)},
			{Issuer: benchIssuer(i), Claim: "project", Value: fmt.Sprintf("proj-%d", i), Group: "admins"},
		}}
	}
	x, err := Build(ts)
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != n {
		t.Fatalf("Len = %d, want %d", x.Len(), n)
	}
	for i := range n {
		want := fmt.Sprintf("tenant-%d", i)
		for _, shape := range []string{"claim", "group", "compound"} {
			if got, err := x.Resolve(benchPrincipal(shape, i)); got != want || err != nil {
				t.Fatalf("Resolve(%s of %d) = %q, %v; want %q", shape, i, got, err, want)
			}
		}
		p := benchPrincipal("claim", i)
		p.Groups = append(p.Groups, fmt.Sprintf("tenant-%d-users", (i+1)%n))
		if got, err := x.Resolve(p); !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("Resolve(claim of %d, group of %d) = %q, %v; want ErrAmbiguous", i, (i+1)%n, got, err)
		}
	}
}
