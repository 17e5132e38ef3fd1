package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

func newKey(t *testing.T) string {
	t.Helper()
	k, _, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestConfigTenantsDefault(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		body string
		want []tenancy.Tenant
	}{
		{name: "absent", body: "listen: 127.0.0.1:1\n", want: DefaultTenants()},
		{name: "null: every entry commented out", body: "tenants:\n#  - name: acme\n", want: []tenancy.Tenant{}},
		{name: "explicitly empty", body: "tenants: []\n", want: []tenancy.Tenant{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(writeConfig(t, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.Tenants); diff != "" {
				t.Errorf("tenants (-want +got):\n%s", diff)
			}
		})
	}
	// The default is the single-tenant gateway: anonymous, everything allowed.
	d := DefaultTenants()
	p, err := policy.Compile(d[0].Policy)
	if err != nil {
		t.Fatal(err)
	}
	if d[0].Name != "default" || !d[0].Anonymous || !p.Allowed(policy.KindTools, "any", "any__tool") {
		t.Errorf("DefaultTenants() = %+v: want tenant default, anonymous, allowing everything", d)
	}
}

func TestConfigTenantsParse(t *testing.T) {
	clearEnv(t)
	acmeKey, globexKey := newKey(t), newKey(t)
	t.Setenv("TEST_ACME_KEY", acmeKey+"\n")
	keyFile := filepath.Join(t.TempDir(), "globex.key")
	if err := os.WriteFile(keyFile, []byte(globexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `
upstreams:
  - {name: github, url: "http://gh"}
  - {name: jira, url: "http://jira"}
tenants:
  - name: acme
    selectors:
      - {claim: org, value: acme}
      - {group: acme-staff}
      - {issuer: "https://idp/", claim: dept, value: ops, group: admins}
    policy:
      upstreams: [github]
      rules:
        - {effect: allow, kind: tools, pattern: "github__get_*"}
        - {effect: deny, pattern: "github__*"}
      default: allow
    limits: {rate: 10, burst: 20, principal_rate: 2.5, principal_burst: 5, max_in_flight: 8}
  - name: globex
    anonymous: true
    policy: {all_upstreams: true}
api_keys:
  - {tenant: acme, principal: alice, key_env: TEST_ACME_KEY}
  - {tenant: globex, principal: "svc:ci", key_file: ` + keyFile + `}
`
	f, err := Load(writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	want := []tenancy.Tenant{
		{
			Name: "acme",
			Selectors: []tenant.Selector{
				{Claim: "org", Value: "acme"},
				{Group: "acme-staff"},
				{Issuer: "https://idp/", Claim: "dept", Value: "ops", Group: "admins"},
			},
			Policy: policy.Spec{
				Upstreams: []string{"github"},
				Rules: []policy.Rule{
					{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "github__get_*"},
					{Effect: policy.Deny, Pattern: "github__*"},
				},
				Default: policy.Allow,
			},
			Limits: tenancy.Limits{Rate: 10, Burst: 20, PrincipalRate: 2.5, PrincipalBurst: 5, MaxInFlight: 8},
		},
		{Name: "globex", Anonymous: true, Policy: policy.Spec{AllUpstreams: true}},
	}
	if diff := cmp.Diff(want, f.Tenants); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
	created := time.UnixMilli(1_700_000_000_000)
	for i, tc := range []struct {
		key, tenant, principal string
	}{{acmeKey, "acme", "alice"}, {globexKey, "globex", "svc:ci"}} {
		rec, err := f.APIKeys[i].Record(created)
		if err != nil {
			t.Fatalf("api_keys[%d].Record: %v", i, err)
		}
		if rec.Tenant != tc.tenant || rec.Principal != tc.principal || rec.CreatedUnixMs != created.UnixMilli() {
			t.Errorf("api_keys[%d] record %v", i, rec)
		}
		if err := apikey.Verify(tc.key, &rec, created); err != nil {
			t.Errorf("api_keys[%d]: the seeded record does not verify its key: %v", i, err)
		}
	}
}

func TestConfigTenantsReject(t *testing.T) {
	clearEnv(t)
	good := newKey(t)
	t.Setenv("TEST_GOOD_KEY", good)
	t.Setenv("TEST_BAD_KEY", "syk_not-a-key")
	const ups = "upstreams:\n  - {name: github, url: \"http://gh\"}\n"
	tests := []struct {
		name string
		body string
		want []string
	}{
		{
			name: "tenant name not a slug",
			body: "tenants:\n  - {name: Acme, policy: {default: allow}}\n",
			want: []string{"tenants[0] (Acme): name:"},
		},
		{
			name: "empty tenant name",
			body: "tenants:\n  - {anonymous: true}\n",
			want: []string{"tenants[0] (): name:"},
		},
		{
			name: "duplicate tenant",
			body: "tenants:\n  - {name: a}\n  - {name: a}\n",
			want: []string{"tenants[1] (a): name: duplicate"},
		},
		{
			name: "two anonymous tenants",
			body: "tenants:\n  - {name: a, anonymous: true}\n  - {name: b, anonymous: true}\n",
			want: []string{"tenants[1] (b): anonymous:", `"a"`},
		},
		{
			name: "policy does not compile",
			body: ups + "tenants:\n  - name: a\n    policy: {all_upstreams: true, upstreams: [github], default: maybe, rules: [{effect: allow, pattern: 'x\\'}]}\n",
			want: []string{"tenants[0] (a): policy:", "all_upstreams together", `default "maybe"`, "rule 0"},
		},
		{
			name: "policy rule kind unknown",
			body: "tenants:\n  - name: a\n    policy: {rules: [{effect: deny, kind: widgets, pattern: '*'}]}\n",
			want: []string{"tenants[0] (a): policy:", `unknown kind "widgets"`},
		},
		{
			name: "policy names an unconfigured upstream",
			body: ups + "tenants:\n  - {name: a, policy: {upstreams: [github, gitlab]}}\n",
			want: []string{`tenants[0] (a): policy: upstream "gitlab" is not a configured upstream`},
		},
		{
			name: "malformed selector",
			body: "tenants:\n  - name: a\n    selectors: [{claim: org}]\n",
			want: []string{"tenants[0] (a): selectors:", "invalid selector"},
		},
		{
			name: "selector with every field but the issuer",
			body: "tenants:\n  - name: a\n    selectors: [{claim: org, value: x, group: g}]\n",
			want: []string{"tenants[0] (a): selectors:"},
		},
		{
			name: "unknown selector key",
			body: "tenants:\n  - name: a\n    selectors: [{claims: org}]\n",
			want: []string{"claims"},
		},
		{
			name: "unknown tenant key",
			body: "tenants:\n  - {name: a, anonymus: true}\n",
			want: []string{"anonymus"},
		},
		{
			name: "negative limits",
			body: "tenants:\n  - {name: a, limits: {rate: -1, burst: -2, max_in_flight: -3, max_sessions: -4}}\n",
			want: []string{"limits.rate:", "limits.burst:", "limits.max_in_flight:", "limits.max_sessions:"},
		},
		{
			name: "key for an unknown tenant",
			body: "api_keys:\n  - {tenant: ghost, principal: p, key_env: TEST_GOOD_KEY}\n",
			want: []string{`api_keys[0] (ghost/p): tenant: "ghost" is not a configured tenant`},
		},
		{
			name: "key for the default tenant is fine, but not without a principal",
			body: "api_keys:\n  - {tenant: default, key_env: TEST_GOOD_KEY}\n",
			want: []string{"api_keys[0] (default/): principal: required"},
		},
		{
			name: "both sources",
			body: "api_keys:\n  - {tenant: default, principal: p, key_env: TEST_GOOD_KEY, key_file: /x}\n",
			want: []string{"api_keys[0] (default/p): key_env and key_file"},
		},
		{
			name: "no source",
			body: "api_keys:\n  - {tenant: default, principal: p}\n",
			want: []string{"api_keys[0] (default/p): key_env or key_file: required"},
		},
		{
			name: "not a key",
			body: "api_keys:\n  - {tenant: default, principal: p, key_env: TEST_BAD_KEY}\n",
			want: []string{"api_keys[0] (default/p): key_env TEST_BAD_KEY: not a Switchyard API key"},
		},
		{
			name: "the same key twice",
			body: "api_keys:\n  - {tenant: default, principal: p, key_env: TEST_GOOD_KEY}\n  - {tenant: default, principal: q, key_env: TEST_GOOD_KEY}\n",
			want: []string{"api_keys[1] (default/q): key_env TEST_GOOD_KEY: the same key as api_keys[0]"},
		},
		{
			name: "keys refer to configured tenants, not the default, once tenants are set",
			body: "tenants:\n  - {name: a}\napi_keys:\n  - {tenant: default, principal: p, key_env: TEST_GOOD_KEY}\n",
			want: []string{`api_keys[0] (default/p): tenant: "default" is not a configured tenant`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(writeConfig(t, tt.body))
			if err == nil {
				t.Fatalf("Load accepted the file: %+v", f)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), good) {
				t.Errorf("error reveals the key:\n%v", err)
			}
		})
	}
}

// A key that cannot be read is not a configuration error (only
// tenancy-svc needs it, and only its environment should hold it), but
// Record reports it, naming its source.
func TestConfigTenantsAbsentKey(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		body string
		want []string
	}{
		{
			name: "variable unset",
			body: "api_keys:\n  - {tenant: default, principal: p, key_env: TEST_UNSET_KEY}\n",
			want: []string{"key_env: variable TEST_UNSET_KEY is not set"},
		},
		{
			name: "file missing",
			body: "api_keys:\n  - {tenant: default, principal: p, key_file: /nonexistent/k}\n",
			want: []string{"key_file:", "/nonexistent/k"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(writeConfig(t, tt.body))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			_, err = f.APIKeys[0].Record(time.Now())
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Record = %v, want it to mention %q", err, w)
				}
			}
		})
	}
	// A key that is there but malformed fails Record too, without showing it.
	f := &File{APIKeys: []APIKey{{Tenant: DefaultTenant, Principal: "p", KeyEnv: "TEST_BAD_KEY"}}}
	f.readKeys(func(string) string { return "syk_definitely-not-a-key" }, nil)
	if _, err := f.APIKeys[0].Record(time.Now()); !errors.Is(err, apikey.ErrMalformed) || strings.Contains(err.Error(), "definitely") {
		t.Errorf("Record of a malformed key = %v", err)
	}
}

// A File built without Load has no key material until SetKey.
func TestConfigTenantsSetKey(t *testing.T) {
	key := newKey(t)
	f := &File{PageSize: 1, Tenants: DefaultTenants(), APIKeys: []APIKey{{Tenant: DefaultTenant, Principal: "p", KeyEnv: "X"}}}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := f.APIKeys[0].Record(time.Now()); err == nil || !strings.Contains(err.Error(), "key not loaded") {
		t.Errorf("Record of an unloaded key = %v", err)
	}
	f.APIKeys[0].SetKey(key)
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate after SetKey: %v", err)
	}
	rec, err := f.APIKeys[0].Record(time.Now())
	if err != nil || apikey.Verify(key, &rec, time.Now()) != nil {
		t.Fatalf("Record = %v, %v", rec, err)
	}
}
