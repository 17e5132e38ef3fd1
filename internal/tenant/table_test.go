package tenant

import (
	"errors"
	"fmt"
	"strings"
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

// tagCollisions counts the records a lookup of group g compares before it
// reaches g's record or an empty slot, because their tag is g's.
func tagCollisions(x *Index, g string) int {
	h := stringHash(x.t.hashString(g), kindGroup, 0)
	n := 0
	for i := h & x.t.mask; x.t.tags[i] != 0; i = (i + 1) & x.t.mask {
		if x.t.tags[i] == tagOf(h) {
			if int(i) == x.group(g) {
				break
			}
			n++
		}
	}
	return n
}

// TestTenantTagCollisions resolves groups whose lookup meets another
// record with the same tag before its own (or before an empty slot, for
// groups no selector names), the path a tag that matches by chance takes.
// With one byte of tag and thousands of records, the seed does not matter:
// some always do.
func TestTenantTagCollisions(t *testing.T) {
	const n = 3000
	ts := make([]TenantSelectors, n)
	for i := range ts {
		ts[i] = TenantSelectors{Tenant: fmt.Sprintf("tenant-%d", i), Selectors: []Selector{
			{Claim: "org_id", Value: fmt.Sprintf("org-%d", i)},
			{Group: fmt.Sprintf("tenant-%d-users", i)},
		}}
	}
	x, err := Build(ts)
	if err != nil {
		t.Fatal(err)
	}
	hits, misses := 0, 0
	for i := range 10 * n {
		g := fmt.Sprintf("tenant-%d-users", i)
		if tagCollisions(x, g) == 0 {
			continue
		}
		want, wantErr := "", ErrNoTenant
		if i < n {
			want, wantErr = fmt.Sprintf("tenant-%d", i), nil
			hits++
		} else {
			misses++
		}
		p := Principal{Groups: []string{g}}
		if got, err := x.Resolve(&p); got != want || !errors.Is(err, wantErr) {
			t.Fatalf("Resolve(group %q) = %q, %v; want %q, %v", g, got, err, want, wantErr)
		}
	}
	if hits == 0 || misses == 0 {
		t.Fatalf("%d hits and %d misses met a record with their tag; want some of each", hits, misses)
	}
	t.Logf("%d hits and %d misses met a record with their tag", hits, misses)
}

// TestTenantLongStrings covers keys and tenant names too long for an
// entry, which are stored after the entries.
func TestTenantLongStrings(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	tests := []struct {
		name, tenant, value string
	}{
		{"both fit", "t", "v"},
		{"both just fit", long("t", 18), long("w", entrySize-recInline-18)},
		{"name does not fit", long("t", 19), long("x", entrySize-recInline-18)},
		{"value does not fit", "t", long("y", entrySize-recInline+1)},
		{"neither fits", long("t", 100), long("z", 200)},
	}
	var ts []TenantSelectors
	for _, tt := range tests {
		ts = append(ts, TenantSelectors{Tenant: tt.name + "/" + tt.tenant, Selectors: []Selector{
			{Claim: "org", Value: tt.value},
			{Group: tt.name + "/" + tt.value},
		}})
	}
	x, err := Build(ts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.name + "/" + tt.tenant
			for _, p := range []Principal{
				{Claims: []Claim{{"org", tt.value}}},
				{Groups: []string{tt.name + "/" + tt.value}},
			} {
				if got, err := x.Resolve(&p); got != want || err != nil {
					t.Errorf("Resolve(%+v) = %q, %v; want %q", p, got, err, want)
				}
			}
			p := Principal{Claims: []Claim{{"org", tt.value + "x"}}}
			if got, err := x.Resolve(&p); !errors.Is(err, ErrNoTenant) {
				t.Errorf("Resolve(value and one more byte) = %q, %v; want ErrNoTenant", got, err)
			}
		})
	}
}
