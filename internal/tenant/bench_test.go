package tenant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchIndex gives each of n tenants one selector of every shape (only
// set: one selector of that shape), so every lookup path runs against n
// entries whichever shape the principal matches.
func benchIndex(b *testing.B, n int, only string) *Index {
	ts := make([]TenantSelectors, n)
	for i := range ts {
		all := []Selector{
			{Claim: "org_id", Value: fmt.Sprintf("org-%d", i)},
			{Group: fmt.Sprintf("tenant-%d-users", i)},
			{Issuer: benchIssuer(i), Claim: "project", Value: fmt.Sprintf("proj-%d", i), Group: "admins"},
		}
		switch only {
		case "claim":
			all = all[:1]
		case "group":
			all = all[1:2]
		case "compound":
			all = all[2:]
		}
		ts[i] = TenantSelectors{Tenant: fmt.Sprintf("tenant-%d", i), Selectors: all}
	}
	x, err := Build(ts)
	if err != nil {
		b.Fatal(err)
	}
	return x
}

func benchIssuer(i int) string { return fmt.Sprintf("https://idp%d.example.com/", i%8) }

// benchPrincipal is a realistic caller of tenant i: five claims (one of
// them two-valued) and three groups, of which only the attributes of one
// shape match tenant i's selector. The others carry values no selector
// lists, so every lookup still runs.
func benchPrincipal(shape string, i int) *Principal {
	org, project, group := "org-none", "proj-none", "everyone"
	switch shape {
	case "claim":
		org = fmt.Sprintf("org-%d", i)
	case "group":
		group = fmt.Sprintf("tenant-%d-users", i)
	case "compound":
		project = fmt.Sprintf("proj-%d", i)
	}
	p := &Principal{Issuer: benchIssuer(i), Groups: []string{"staff", group, "admins"}}
	p.AddClaim("sub", fmt.Sprintf("user-%d", i))
	p.AddClaim("email", fmt.Sprintf("user-%d@example.com", i))
	p.AddClaim("org_id", org)
	p.AddClaim("project", project)
	p.AddClaim("roles", "reader", "writer")
	return p
}

// BenchmarkResolveTenant: selectors=all gives every tenant a selector of
// each shape (every lookup path runs); selectors=one gives every tenant
// only a selector of the benchmarked shape, the deployment where tenants
// are told apart by one claim, or one group.
func BenchmarkResolveTenant(b *testing.B) {
	for _, sel := range []string{"all", "one"} {
		for _, shape := range []string{"claim", "group", "compound"} {
			for _, n := range []int{10, 100, 1000, 10000} {
				b.Run(fmt.Sprintf("selectors=%s/shape=%s/tenants=%d", sel, shape, n), func(b *testing.B) {
					only := ""
					if sel == "one" {
						only = shape
					}
					benchResolve(b, shape, n, only)
				})
			}
		}
	}
}

func benchResolve(b *testing.B, shape string, n int, only string) {
	x := benchIndex(b, n, only)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	// Principals of random tenants, cycled, so that the index is read at
	// scattered places as under real traffic, not at one hot entry.
	ps := make([]*Principal, 1024)
	want := make([]string, len(ps))
	for j := range ps {
		i := r.IntN(n)
		ps[j], want[j] = benchPrincipal(shape, i), fmt.Sprintf("tenant-%d", i)
	}
	b.ReportAllocs()
	j := 0
	for b.Loop() {
		if got, err := x.Resolve(ps[j]); err != nil || got != want[j] {
			b.Fatalf("Resolve = %q, %v; want %q", got, err, want[j])
		}
		j = (j + 1) & (len(ps) - 1)
	}
}
