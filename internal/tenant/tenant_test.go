package tenant

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

const idp = "https://idp.example.com/"

func testIndex(t *testing.T) *Index {
	t.Helper()
	x, err := Build([]TenantSelectors{
		{Tenant: "acme", Selectors: []Selector{
			{Claim: "org", Value: "acme"},
			{Group: "acme-staff"},
		}},
		{Tenant: "acme", Selectors: []Selector{{Claim: "org", Value: "acme"}}}, // duplicate
		{Tenant: "globex", Selectors: []Selector{
			{Claim: "org", Value: "globex"},
			{Issuer: idp, Claim: "dept", Value: "ops", Group: "admins"},
		}},
		{Tenant: "initech", Selectors: []Selector{
			{Group: "initech"},
			{Issuer: idp, Claim: "dept", Value: "ops", Group: "initech-admins"},
		}},
		{Tenant: "shared-a", Selectors: []Selector{{Claim: "org", Value: "shared"}}},
		{Tenant: "shared-b", Selectors: []Selector{{Claim: "org", Value: "shared"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestTenantResolve(t *testing.T) {
	x := testIndex(t)
	tests := []struct {
		name    string
		p       Principal
		want    string
		wantErr error
	}{
		{"empty principal", Principal{}, "", ErrNoTenant},
		{"claim", Principal{Claims: []Claim{{"sub", "u1"}, {"org", "acme"}}}, "acme", nil},
		{"claim value of another name", Principal{Claims: []Claim{{"team", "acme"}}}, "", ErrNoTenant},
		{"claim in a multi-valued claim", Principal{Claims: []Claim{{"org", "x"}, {"org", "globex"}}}, "globex", nil},
		{"group", Principal{Groups: []string{"eng", "initech"}}, "initech", nil},
		{"claim and group of one tenant", Principal{Claims: []Claim{{"org", "acme"}}, Groups: []string{"acme-staff"}}, "acme", nil},
		{"same selector twice", Principal{Claims: []Claim{{"org", "acme"}, {"org", "acme"}}}, "acme", nil},
		{"ambiguous claims", Principal{Claims: []Claim{{"org", "acme"}, {"org", "globex"}}}, "", ErrAmbiguous},
		{"ambiguous claim and group", Principal{Claims: []Claim{{"org", "acme"}}, Groups: []string{"initech"}}, "", ErrAmbiguous},
		{"ambiguous group and later claim", Principal{Groups: []string{"initech"}, Claims: []Claim{{"org", "globex"}}}, "", ErrAmbiguous},
		{"selector listed by two tenants", Principal{Claims: []Claim{{"org", "shared"}}}, "", ErrAmbiguous},
		{"compound", Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins"}}, "globex", nil},
		{"compound other group", Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"initech-admins"}}, "initech", nil},
		{"compound two tenants", Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins", "initech-admins"}}, "", ErrAmbiguous},
		{"compound and claim of one tenant", Principal{Issuer: idp, Claims: []Claim{{"org", "globex"}, {"dept", "ops"}}, Groups: []string{"admins"}}, "globex", nil},
		{"compound and claim of two tenants", Principal{Issuer: idp, Claims: []Claim{{"org", "acme"}, {"dept", "ops"}}, Groups: []string{"admins"}}, "", ErrAmbiguous},
		{"compound and group of two tenants", Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins", "initech"}}, "", ErrAmbiguous},
		{"compound issuer mismatch", Principal{Issuer: "https://evil.example.com/", Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins"}}, "", ErrNoTenant},
		{"compound no issuer", Principal{Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins"}}, "", ErrNoTenant},
		{"compound no group", Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"eng"}}, "", ErrNoTenant},
		{"compound wrong value", Principal{Issuer: idp, Claims: []Claim{{"dept", "dev"}}, Groups: []string{"admins"}}, "", ErrNoTenant},
		{"compound value under another claim", Principal{Issuer: idp, Claims: []Claim{{"team", "ops"}}, Groups: []string{"admins"}}, "", ErrNoTenant},
		{"issuer ignored by claim shape", Principal{Issuer: "https://other.example.com/", Claims: []Claim{{"org", "acme"}}}, "acme", nil},
		{"case sensitive", Principal{Claims: []Claim{{"org", "ACME"}}, Groups: []string{"Initech"}}, "", ErrNoTenant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := x.Resolve(&tc.p)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resolve = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestTenantBuildRejects(t *testing.T) {
	ok := []Selector{{Group: "g"}}
	tests := []struct {
		name string
		in   []TenantSelectors
	}{
		{"empty tenant name", []TenantSelectors{{Selectors: ok}}},
		{"no selectors", []TenantSelectors{{Tenant: "a"}}},
		{"empty selector", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{}}}}},
		{"claim without value", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Claim: "org"}}}}},
		{"value without claim", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Value: "x"}}}}},
		{"issuer only", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Issuer: idp}}}}},
		{"issuer and claim", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Issuer: idp, Claim: "org", Value: "x"}}}}},
		{"issuer and group", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Issuer: idp, Group: "g"}}}}},
		{"claim and group without issuer", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Claim: "org", Value: "x", Group: "g"}}}}},
		{"compound without value", []TenantSelectors{{Tenant: "a", Selectors: []Selector{{Issuer: idp, Claim: "org", Group: "g"}}}}},
		{"one bad among good", []TenantSelectors{{Tenant: "a", Selectors: ok}, {Tenant: "b", Selectors: []Selector{{Group: "g"}, {Claim: "c"}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Build(tc.in)
			if x != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Build = %v, %v; want nil, ErrInvalid", x, err)
			}
		})
	}
}

func TestTenantBuildReportsEveryProblem(t *testing.T) {
	_, err := Build([]TenantSelectors{{}, {Tenant: "a", Selectors: []Selector{{Claim: "c"}, {Value: "v"}}}})
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Fatalf("Build error %v: want 4 problems", err)
	}
}

func TestTenantBuildEmpty(t *testing.T) {
	x, err := Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Resolve(&Principal{Issuer: idp, Claims: []Claim{{"org", "a"}}, Groups: []string{"g"}}); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("Resolve on empty index: %v, want ErrNoTenant", err)
	}
}

// TestTenantManyClaimNames covers indexes naming more claims than a
// nameSet scans.
func TestTenantManyClaimNames(t *testing.T) {
	var ts []TenantSelectors
	for i := range 3 * smallSet {
		name := fmt.Sprintf("c%d", i)
		ts = append(ts, TenantSelectors{Tenant: name, Selectors: []Selector{
			{Claim: name, Value: "v"},
			{Issuer: idp, Claim: name, Value: "w", Group: "g"},
		}})
	}
	x, err := Build(ts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * smallSet {
		name := fmt.Sprintf("c%d", i)
		for _, p := range []Principal{
			{Claims: []Claim{{"sub", "v"}, {name, "v"}}},
			{Issuer: idp, Claims: []Claim{{name, "w"}}, Groups: []string{"g"}},
		} {
			if got, err := x.Resolve(&p); got != name || err != nil {
				t.Fatalf("Resolve(%+v) = %q, %v; want %q", p, got, err, name)
			}
		}
	}
}

func TestTenantZeroIndex(t *testing.T) {
	var x Index
	if _, err := x.Resolve(&Principal{Issuer: idp, Claims: []Claim{{"org", "a"}}, Groups: []string{"g"}}); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("Resolve on the zero Index: %v, want ErrNoTenant", err)
	}
}

func TestTenantPrincipalReset(t *testing.T) {
	var p Principal
	p.Issuer = idp
	p.AddClaim("roles", "a", "b")
	p.Groups = append(p.Groups, "g")
	c := cap(p.Claims)
	p.Reset()
	if p.Issuer != "" || len(p.Claims) != 0 || len(p.Groups) != 0 || cap(p.Claims) != c {
		t.Fatalf("after Reset: %+v (cap %d, want %d)", p, cap(p.Claims), c)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		p.Reset()
		p.AddClaim("roles", "a", "b")
	}); allocs != 0 {
		t.Fatalf("refilling a reset Principal: %v allocs, want 0", allocs)
	}
}

func TestTenantResolveAllocs(t *testing.T) {
	x := testIndex(t)
	ps := []Principal{
		{Claims: []Claim{{"org", "acme"}}},
		{Groups: []string{"initech"}},
		{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins"}},
		{Issuer: idp, Claims: []Claim{{"org", "acme"}, {"dept", "ops"}}, Groups: []string{"admins"}},
		{Issuer: idp, Claims: []Claim{{"org", "nobody"}}, Groups: []string{"nobody"}},
	}
	for i := range ps {
		if allocs := testing.AllocsPerRun(100, func() { _, _ = x.Resolve(&ps[i]) }); allocs != 0 {
			t.Errorf("Resolve(%+v): %v allocs, want 0", ps[i], allocs)
		}
	}
}

// TestTenantResolveConcurrent lets the race detector watch concurrent
// readers of one Index.
func TestTenantResolveConcurrent(t *testing.T) {
	x := testIndex(t)
	p := Principal{Issuer: idp, Claims: []Claim{{"dept", "ops"}}, Groups: []string{"admins"}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if got, err := x.Resolve(&p); got != "globex" || err != nil {
					t.Errorf("Resolve = %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
