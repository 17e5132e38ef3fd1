package tenancy

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

func TestTenancyCheckTenant(t *testing.T) {
	ok := Tenant{Name: "acme", Policy: policy.Spec{AllUpstreams: true, Default: policy.Allow}}
	tests := []struct {
		name string
		edit func(*Tenant)
		want []string // substrings; none: valid
	}{
		{name: "valid", edit: func(*Tenant) {}},
		{name: "zero policy is valid (denies everything)", edit: func(t *Tenant) { t.Policy = policy.Spec{} }},
		{name: "every selector shape", edit: func(t *Tenant) {
			t.Selectors = []tenant.Selector{{Claim: "org", Value: "acme"}, {Group: "g"}, {Issuer: "i", Claim: "c", Value: "v", Group: "g"}}
		}},
		{name: "name not a slug", edit: func(t *Tenant) { t.Name = "Acme Corp" }, want: []string{`name: "Acme Corp"`}},
		{name: "name with a dot", edit: func(t *Tenant) { t.Name = "a.b" }, want: []string{"name:"}},
		{name: "empty name", edit: func(t *Tenant) { t.Name = "" }, want: []string{"name:"}},
		{name: "policy", edit: func(t *Tenant) { t.Policy.Default = "perhaps" }, want: []string{"policy:", "perhaps"}},
		{name: "upstream not a slug", edit: func(t *Tenant) { t.Policy = policy.Spec{Upstreams: []string{"Git Hub"}} }, want: []string{`upstream "Git Hub"`}},
		{name: "selector", edit: func(t *Tenant) { t.Selectors = []tenant.Selector{{Value: "x"}} }, want: []string{"selectors:"}},
		{name: "NaN rate", edit: func(t *Tenant) { t.Limits.Rate = math.NaN() }, want: []string{"limits.rate"}},
		{name: "infinite principal rate", edit: func(t *Tenant) { t.Limits.PrincipalRate = math.Inf(1) }, want: []string{"limits.principal_rate"}},
		{name: "negative burst", edit: func(t *Tenant) { t.Limits.PrincipalBurst = -1 }, want: []string{"limits.principal_burst"}},
		{name: "several", edit: func(t *Tenant) { t.Name = "X"; t.Limits.MaxInFlight = -1 }, want: []string{"name:", "limits.max_in_flight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := ok
			tt.edit(&tn)
			err := CheckTenant(&tn)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("CheckTenant = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckTenant = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q: %v", w, err)
				}
			}
		})
	}
}

func TestTenancyCheckTenants(t *testing.T) {
	tests := []struct {
		name string
		in   []Tenant
		want []string
	}{
		{name: "none", in: nil},
		{name: "one anonymous", in: []Tenant{{Name: "a", Anonymous: true}, {Name: "b"}}},
		{name: "two anonymous", in: []Tenant{{Name: "a", Anonymous: true}, {Name: "b", Anonymous: true}}, want: []string{"tenants[1] (b): anonymous:"}},
		{name: "duplicate", in: []Tenant{{Name: "a"}, {Name: "a"}}, want: []string{"tenants[1] (a): name: duplicate"}},
		{name: "invalid member", in: []Tenant{{Name: "a"}, {Name: "B"}}, want: []string{"tenants[1] (B): name:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTenants(tt.in)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("CheckTenants = %v", err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("CheckTenants = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

// Every line of a joined error names whose problem it is.
func TestTenancyCheckPrefixesEveryLine(t *testing.T) {
	twoPolicy := policy.Spec{Default: "perhaps", Rules: []policy.Rule{{Effect: "maybe", Pattern: "x"}}}
	tests := []struct {
		name  string
		check func() error
		want  []string // the error's lines
		wraps error
	}{
		{"policy problems", func() error { return CheckTenant(&Tenant{Name: "acme", Policy: twoPolicy}) }, []string{
			`policy: policy: invalid spec: default "perhaps" is neither allow nor deny`,
			`policy: policy: invalid spec: rule 0: effect "maybe" is neither allow nor deny`,
		}, policy.ErrInvalidSpec},
		{"selector problems", func() error {
			return CheckTenant(&Tenant{Name: "acme", Selectors: []tenant.Selector{{Value: "x"}, {Issuer: "i"}}})
		}, []string{
			`selectors: tenant "acme" selector 0 {Issuer: Claim: Value:x Group:}: tenant: invalid selector`,
			`selectors: tenant "acme" selector 1 {Issuer:i Claim: Value: Group:}: tenant: invalid selector`,
		}, nil},
		{"tenant problems", func() error { return CheckTenants([]Tenant{{Name: "a"}, {Name: "B", Policy: twoPolicy}}) }, []string{
			`tenants[1] (B): name: "B" is not a slug ([a-z0-9-], 1-63 characters)`,
			`tenants[1] (B): policy: policy: invalid spec: default "perhaps" is neither allow nor deny`,
			`tenants[1] (B): policy: policy: invalid spec: rule 0: effect "maybe" is neither allow nor deny`,
		}, policy.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check()
			if err == nil {
				t.Fatal("no error")
			}
			if want := strings.Join(tt.want, "\n"); err.Error() != want {
				t.Errorf("error lines:\n%s\nwant:\n%s", err, want)
			}
			if tt.wraps != nil && !errors.Is(err, tt.wraps) {
				t.Errorf("error %v does not wrap %v", err, tt.wraps)
			}
		})
	}
}

func TestTenancyCheckPrincipal(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"alice", true}, {"svc:ci@example.com", true}, {"Ünïcode name", true},
		{"", false}, {"a\nb", false}, {"\x00", false}, {"\xff", false},
		{strings.Repeat("p", MaxPrincipalLen), true}, {strings.Repeat("p", MaxPrincipalLen+1), false},
	}
	for _, tt := range tests {
		if err := CheckPrincipal(tt.in); (err == nil) != tt.ok {
			t.Errorf("CheckPrincipal(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func TestTenancyAdminError(t *testing.T) {
	var err error = &AdminError{Code: AdminCodeNotFound, Message: `tenant "x" not found`}
	if !errors.Is(err, &AdminError{Code: AdminCodeNotFound}) || errors.Is(err, &AdminError{Code: AdminCodeConflict}) {
		t.Errorf("Is by code broken for %v", err)
	}
	if !strings.Contains(err.Error(), "404") {
		t.Errorf("Error() = %q, want the code", err)
	}
}

// KeyInfo never carries the hash, in any encoding.
func TestTenancyKeyInfoHasNoHash(t *testing.T) {
	_, rec, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	rec.Tenant, rec.Principal, rec.ExpiresUnixMs = "acme", "alice", 42
	info := KeyInfoOf(&rec, SourceAdmin)
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	// The quoted field name: the random key id, lowercase base32, spells
	// a bare "hash" in about 1 of 80,000 runs, never a quote.
	if strings.Contains(string(b), `"hash"`) {
		t.Errorf("KeyInfo JSON has a hash: %s", b)
	}
	want := KeyInfo{ID: rec.ID, Tenant: "acme", Principal: "alice", CreatedUnixMs: rec.CreatedUnixMs, ExpiresUnixMs: 42, Source: SourceAdmin}
	if info != want {
		t.Errorf("KeyInfoOf = %+v, want %+v", info, want)
	}
}

// Every admin subject is under AdminGroup, lowercase, free of wildcards.
func TestTenancyAdminSubjects(t *testing.T) {
	for _, s := range []string{SubjTenantPut, SubjTenantGet, SubjTenantList, SubjTenantDelete, SubjKeyCreate, SubjKeyRevoke, SubjKeyList, SubjKeyDelete} {
		rest, ok := strings.CutPrefix(s, AdminGroup+".")
		if !ok || strings.ToLower(s) != s || strings.ContainsAny(s, "*> $") {
			t.Errorf("subject %q", s)
		}
		for _, tok := range strings.Split(rest, ".") {
			if !proto.ValidToken(tok) {
				t.Errorf("subject %q: token %q", s, tok)
			}
		}
	}
}
