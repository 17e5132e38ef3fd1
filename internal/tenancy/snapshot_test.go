package tenancy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// newKey mints a key for tenantName/principal.
func newKey(t testing.TB, tenantName, principal string) (string, apikey.Record) {
	t.Helper()
	key, rec, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	rec.Tenant, rec.Principal = tenantName, principal
	return key, rec
}

// claimTenant is a valid tenant claimed by org_id=<name>, seeing every
// upstream and denying tools named *__delete_*.
func claimTenant(name string) Tenant {
	return Tenant{
		Name:      name,
		Selectors: []tenant.Selector{{Claim: "org_id", Value: name}},
		Policy: policy.Spec{
			AllUpstreams: true,
			Default:      policy.Allow,
			Rules:        []policy.Rule{{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "*__delete_*"}},
		},
	}
}

func orgPrincipal(org string) *tenant.Principal {
	p := &tenant.Principal{Issuer: "https://idp.example.com/"}
	p.AddClaim("sub", "someone")
	p.AddClaim("org_id", org)
	return p
}

func TestTenancySnapshotResolveKey(t *testing.T) {
	now := time.Now()
	okKey, okRec := newKey(t, "acme", "alice")
	revKey, revRec := newKey(t, "acme", "bob")
	revRec.Revoked = true
	expKey, expRec := newKey(t, "acme", "carol")
	expRec.ExpiresUnixMs = now.Add(-time.Minute).UnixMilli()
	goneKey, goneRec := newKey(t, "gone", "dave")
	badKey, badRec := newKey(t, "broken", "erin")
	unknownKey, _ := newKey(t, "acme", "frank")
	// A record under okRec's id with another key's hash.
	_, otherRec := newKey(t, "acme", "mallory")
	mismatchKey := okKey
	otherRec.ID = okRec.ID

	broken := claimTenant("broken")
	broken.Policy.Default = "maybe"
	s := NewSnapshot(
		[]Tenant{claimTenant("acme"), broken},
		[]apikey.Record{okRec, revRec, expRec, goneRec, badRec},
	)
	mismatch := NewSnapshot([]Tenant{claimTenant("acme")}, []apikey.Record{otherRec})

	tests := []struct {
		name          string
		s             *Snapshot
		key           string
		wantTenant    string
		wantPrincipal string
		wantErr       error
	}{
		{name: "valid", s: s, key: okKey, wantTenant: "acme", wantPrincipal: "alice"},
		{name: "malformed", s: s, key: "syk_nope", wantErr: apikey.ErrMalformed},
		{name: "empty", s: s, key: "", wantErr: apikey.ErrMalformed},
		{name: "unknown id", s: s, key: unknownKey, wantErr: apikey.ErrUnknown},
		{name: "mismatch", s: mismatch, key: mismatchKey, wantErr: apikey.ErrMismatch},
		{name: "revoked", s: s, key: revKey, wantErr: apikey.ErrRevoked},
		{name: "expired", s: s, key: expKey, wantErr: apikey.ErrExpired},
		{name: "tenant absent", s: s, key: goneKey, wantErr: ErrUnknownTenant},
		{name: "tenant left out", s: s, key: badKey, wantErr: ErrUnknownTenant},
		{name: "empty snapshot", s: emptySnapshot(), key: okKey, wantErr: apikey.ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ten, prin, err := tt.s.ResolveKey(tt.key, now)
			if err != tt.wantErr { // sentinels come back unwrapped
				t.Fatalf("ResolveKey err = %v, want %v", err, tt.wantErr)
			}
			if ten != tt.wantTenant || prin != tt.wantPrincipal {
				t.Errorf("ResolveKey = %q, %q; want %q, %q", ten, prin, tt.wantTenant, tt.wantPrincipal)
			}
		})
	}
}

func TestTenancySnapshotTenantAndPrincipal(t *testing.T) {
	group := Tenant{Name: "beta", Selectors: []tenant.Selector{{Group: "beta-users"}}, Policy: policy.Spec{Upstreams: []string{"github"}}}
	keyOnly := Tenant{Name: "keys-only"}
	s := NewSnapshot([]Tenant{claimTenant("acme"), group, keyOnly, claimTenant("acme2")}, nil)

	ten, p, ok := s.Tenant("acme")
	if !ok || ten.Name != "acme" {
		t.Fatalf("Tenant(acme) = %v, %v", ten, ok)
	}
	if !p.Allowed(policy.KindTools, "github", "github__get_issue") || p.Allowed(policy.KindTools, "github", "github__delete_repo") {
		t.Error("acme's compiled policy does not match its spec")
	}
	if _, _, ok := s.Tenant("nobody"); ok {
		t.Error("Tenant(nobody) found")
	}
	if _, _, ok := s.Tenant("keys-only"); !ok {
		t.Error("a tenant without selectors was left out")
	}
	if s.Len() != 4 {
		t.Errorf("Len = %d, want 4", s.Len())
	}
	var names []string
	for ten := range s.All() {
		names = append(names, ten.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"acme", "acme2", "beta", "keys-only"}, names); diff != "" {
		t.Errorf("All (-want +got):\n%s", diff)
	}

	both := orgPrincipal("acme")
	both.AddClaim("org_id", "acme2")
	betaUser := orgPrincipal("none")
	betaUser.Groups = []string{"beta-users"}
	tests := []struct {
		name    string
		p       *tenant.Principal
		want    string
		wantErr error
	}{
		{name: "claim", p: orgPrincipal("acme"), want: "acme"},
		{name: "group", p: betaUser, want: "beta"},
		{name: "none", p: orgPrincipal("none"), wantErr: tenant.ErrNoTenant},
		{name: "ambiguous", p: both, wantErr: tenant.ErrAmbiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ResolvePrincipal(tt.p)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("ResolvePrincipal = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, ok := s.Anonymous(); ok {
		t.Error("Anonymous found without an anonymous tenant")
	}
}

func TestTenancySnapshotAnonymous(t *testing.T) {
	anon := func(name string) Tenant { x := claimTenant(name); x.Anonymous = true; return x }
	tests := []struct {
		name     string
		tenants  []Tenant
		want     string
		problems int
	}{
		{name: "none", tenants: []Tenant{claimTenant("a")}},
		{name: "one", tenants: []Tenant{claimTenant("a"), anon("public")}, want: "public"},
		{name: "two fail closed", tenants: []Tenant{anon("a"), anon("b")}, problems: 1},
		{name: "invalid anonymous tenant", tenants: []Tenant{func() Tenant { x := anon("a"); x.Policy.Default = "x"; return x }()}, problems: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSnapshot(tt.tenants, nil)
			got, ok := s.Anonymous()
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("Anonymous = %q, %v; want %q", got, ok, tt.want)
			}
			if n := len(s.Problems()); n != tt.problems {
				t.Errorf("problems = %q, want %d", s.Problems(), tt.problems)
			}
		})
	}
}

// TestTenancySnapshotInvalidLeftOut: invalid records are reported and
// resolve to nothing, and do not disturb the valid ones.
func TestTenancySnapshotInvalidLeftOut(t *testing.T) {
	now := time.Now()
	badPolicy := claimTenant("bad-policy")
	badPolicy.Policy.Rules = append(badPolicy.Policy.Rules, policy.Rule{Effect: "allow", Pattern: ""})
	badSelector := claimTenant("bad-selector")
	badSelector.Selectors = append(badSelector.Selectors, tenant.Selector{Issuer: "x", Group: "g"})
	badName := claimTenant("Bad_Name")
	goodKey, goodRec := newKey(t, "acme", "alice")
	badPolicyKey, badPolicyRec := newKey(t, "bad-policy", "bob")
	_, noTenant := newKey(t, "", "carol")
	_, shortHash := newKey(t, "acme", "dave")
	shortHash.Hash = shortHash.Hash[:8]
	_, dupKey2 := newKey(t, "acme", "x")
	dupKey2.ID = "aaaaaaaaaaaaaaaa"
	dupKey3 := dupKey2

	s := NewSnapshot(
		[]Tenant{claimTenant("acme"), badPolicy, badSelector, badName, claimTenant("twice"), claimTenant("twice")},
		[]apikey.Record{goodRec, badPolicyRec, noTenant, shortHash, dupKey2, dupKey3, {ID: "syk_whole_key_by_mistake"}},
	)
	probs := s.Problems()
	wantSubstrings := []string{
		`tenant "bad-policy": policy: policy: invalid spec`,
		`tenant "bad-selector": selectors: tenant "bad-selector" selector 1`,
		`tenant "Bad_Name": name: "Bad_Name" is not a slug`,
		`tenant "twice": listed twice`,
		`api key "` + noTenant.ID + `": tenant: required`,
		`api key "` + shortHash.ID + `": hash: 8 bytes`,
		`api key "aaaaaaaaaaaaaaaa": listed twice`,
		`api key (24-byte key, not shown): not a key id`,
	}
	if len(probs) != len(wantSubstrings) {
		t.Errorf("got %d problems, want %d:\n%s", len(probs), len(wantSubstrings), strings.Join(probs, "\n"))
	}
	for _, w := range wantSubstrings {
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem mentions %q in:\n%s", w, strings.Join(probs, "\n"))
		}
	}
	if !slices.IsSorted(probs) {
		t.Error("problems not sorted")
	}
	for _, p := range probs {
		if strings.Contains(p, "syk_whole") {
			t.Errorf("problem shows a non-id KV key: %q", p)
		}
	}
	// The valid records are served.
	if ten, _, err := s.ResolveKey(goodKey, now); err != nil || ten != "acme" {
		t.Errorf("valid key = %q, %v", ten, err)
	}
	// Left-out tenants fail closed.
	for _, name := range []string{"bad-policy", "bad-selector", "Bad_Name", "twice"} {
		if _, _, ok := s.Tenant(name); ok {
			t.Errorf("Tenant(%s) found", name)
		}
		if got, err := s.ResolvePrincipal(orgPrincipal(name)); !errors.Is(err, tenant.ErrNoTenant) {
			t.Errorf("principal of %s resolves to %q, %v", name, got, err)
		}
	}
	if _, _, err := s.ResolveKey(badPolicyKey, now); err != ErrUnknownTenant {
		t.Errorf("key of a left-out tenant: err = %v, want ErrUnknownTenant", err)
	}
	// Problems is a copy.
	probs[0] = "changed"
	if s.Problems()[0] == "changed" {
		t.Error("Problems returns the snapshot's own slice")
	}
}

func TestTenancySnapshotCheckAPIKey(t *testing.T) {
	_, rec := newKey(t, "acme", "alice")
	if err := CheckAPIKey(&rec); err != nil {
		t.Errorf("CheckAPIKey(valid) = %v", err)
	}
	err := CheckAPIKey(&apikey.Record{ID: "x", Principal: "a\nb"})
	for _, want := range []string{"id:", "hash:", "tenant:", "principal:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAPIKey(bad) = %v, want a problem with %q", err, want)
		}
	}
}

// TestTenancySnapshotOwnsRecords: NewSnapshot copies what it is given.
func TestTenancySnapshotOwnsRecords(t *testing.T) {
	key, rec := newKey(t, "acme", "alice")
	ts := []Tenant{claimTenant("acme")}
	ks := []apikey.Record{rec}
	s := NewSnapshot(ts, ks)
	ts[0].Selectors[0].Value = "changed"
	ks[0].Hash[0] ^= 0xff
	if _, err := s.ResolvePrincipal(orgPrincipal("acme")); err != nil {
		t.Errorf("principal: %v", err)
	}
	if ten, _, _ := s.Tenant("acme"); ten.Selectors[0].Value != "acme" {
		t.Errorf("snapshot shares the caller's selectors")
	}
	if _, _, err := s.ResolveKey(key, time.Now()); err != nil {
		t.Errorf("key: %v", err)
	}
}
