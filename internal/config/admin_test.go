package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

const jwtIssuers = `auth:
  jwt:
    issuers:
      - issuer: https://idp.example.com/
        jwks_url: https://idp.example.com/jwks
        audiences: [https://gw.example.com/mcp]
        claims: [sub, org]
        groups_claim: teams
`

func TestConfigAdmin(t *testing.T) {
	dir := t.TempDir()
	key, key2 := newKey(t), newKey(t)
	keyFile := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(keyFile, []byte(key2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       AdminFile
	}{
		{name: "absent", yaml: "", want: AdminFile{}},
		{name: "null", yaml: "admin:\n", want: AdminFile{}},
		{name: "address alone", yaml: "admin: 127.0.0.1:9090\n", want: AdminFile{Listen: "127.0.0.1:9090"}},
		{name: "mapping", yaml: "admin:\n  listen: 0.0.0.0:9090\n  keys:\n    - {key_env: K1, scope: admin}\n    - {key_file: " + keyFile + ", scope: metrics}\n  insecure: true\n",
			env: map[string]string{"K1": key},
			want: AdminFile{Listen: "0.0.0.0:9090", Insecure: true, Keys: []AdminKey{
				{KeyEnv: "K1", Scope: "admin"}, {KeyFile: keyFile, Scope: "metrics"}}}},
		{name: "jwt claim", yaml: jwtIssuers + "admin:\n  listen: 0.0.0.0:9090\n  jwt_claim: {name: roles, admin: [root], audit: [auditor], metrics: [prom]}\n",
			want: AdminFile{Listen: "0.0.0.0:9090", JWTClaim: &AdminJWTClaim{Name: "roles", Admin: []string{"root"}, Audit: []string{"auditor"}, Metrics: []string{"prom"}}}},
		{name: "env address wins over the mapping's", yaml: "admin: {listen: 127.0.0.1:1, keys: [{key_env: K1, scope: audit}]}\n",
			env:  map[string]string{"SWITCHYARD_ADMIN": "0.0.0.0:9090", "K1": key},
			want: AdminFile{Listen: "0.0.0.0:9090", Keys: []AdminKey{{KeyEnv: "K1", Scope: "audit"}}}},
		{name: "env key and key file", yaml: "admin: 0.0.0.0:9090\n",
			env: map[string]string{EnvAdminKey: key, EnvAdminKeyFile: keyFile},
			want: AdminFile{Listen: "0.0.0.0:9090", Keys: []AdminKey{
				{KeyEnv: EnvAdminKey, Scope: "admin"}, {KeyFile: keyFile, Scope: "admin"}}}},
		{name: "env key listed in the file too", yaml: "admin: {listen: 0.0.0.0:9090, keys: [{key_env: SWITCHYARD_ADMIN_KEY, scope: admin}]}\n",
			env:  map[string]string{EnvAdminKey: key},
			want: AdminFile{Listen: "0.0.0.0:9090", Keys: []AdminKey{{KeyEnv: EnvAdminKey, Scope: "admin"}}}},
		{name: "env insecure", yaml: "admin: 0.0.0.0:9090\n", env: map[string]string{EnvAdminInsecure: "true"},
			want: AdminFile{Listen: "0.0.0.0:9090", Insecure: true}},
		{name: "absent key is not a Validate error", yaml: "admin: {listen: 0.0.0.0:9090, keys: [{key_env: UNSET_ADMIN_KEY, scope: admin}]}\n",
			want: AdminFile{Listen: "0.0.0.0:9090", Keys: []AdminKey{{KeyEnv: "UNSET_ADMIN_KEY", Scope: "admin"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := loadCase(t, dir, tc.name, tc.yaml, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, f.Admin, cmpopts.IgnoreUnexported(AdminKey{})); d != "" {
				t.Errorf("admin (-want +got):\n%s", d)
			}
			if f.Admin.Configured() != (len(tc.want.Keys) > 0 || tc.want.JWTClaim != nil) {
				t.Errorf("Configured() = %v", f.Admin.Configured())
			}
		})
	}
}

func TestConfigAdminKeyRecord(t *testing.T) {
	key := newKey(t)
	f, err := loadCase(t, t.TempDir(), "record", "admin: {listen: 0.0.0.0:9090, keys: [{key_env: K1, scope: admin}, {key_env: UNSET_ADMIN_KEY, scope: audit}, {key_file: /nonexistent/admin.key, scope: metrics}]}\n",
		map[string]string{"K1": key})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.Admin.Keys[0].Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := apikey.Verify(key, &rec, time.Now()); err != nil {
		t.Errorf("the record does not verify its key: %v", err)
	}
	for i, want := range []string{"UNSET_ADMIN_KEY", "/nonexistent/admin.key"} {
		_, err := f.Admin.Keys[i+1].Record()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("keys[%d].Record: %v, want an error naming %s", i+1, err, want)
		}
	}
}

func TestConfigAdminInvalid(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t)
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"not host:port", "admin: 9090\n", nil, `admin: "9090" is not host:port`},
		{"mapping listen not host:port", "admin: {listen: nope}\n", nil, `admin: "nope" is not host:port`},
		{"unknown key", "admin: {listen: 127.0.0.1:1, key: x}\n", nil, "field key not found in admin"},
		{"unknown key in keys", "admin: {listen: 127.0.0.1:1, keys: [{key_env: K, scop: admin}]}\n", nil, "field scop not found in admin.keys[0]"},
		{"unknown key in jwt_claim", jwtIssuers + "admin: {listen: 127.0.0.1:1, jwt_claim: {name: r, admin: [a], nme: x}}\n", nil, "field nme not found in admin.jwt_claim"},
		{"a list", "admin: [127.0.0.1:1]\n", nil, "admin: want an address"},
		{"bad scope", "admin: {keys: [{key_env: K, scope: root}]}\n", map[string]string{"K": key}, `keys[0]: scope "root" is not admin, audit or metrics`},
		{"no scope", "admin: {keys: [{key_env: K}]}\n", map[string]string{"K": key}, `keys[0]: scope "" is not`},
		{"two sources", "admin: {keys: [{key_env: K, key_file: /x, scope: admin}]}\n", nil, "keys[0]: key_env and key_file: set only one"},
		{"no source", "admin: {keys: [{scope: admin}]}\n", nil, "keys[0]: key_env or key_file: required"},
		{"bad variable name", "admin: {keys: [{key_env: 'A-B', scope: admin}]}\n", nil, "is not a variable name"},
		{"malformed key", "admin: {keys: [{key_env: K, scope: admin}]}\n", map[string]string{"K": "hunter2-not-a-key"}, "keys[0]: key_env K: not a Switchyard API key"},
		{"same key twice", "admin: {keys: [{key_env: K, scope: admin}, {key_env: K2, scope: metrics}]}\n", map[string]string{"K": key, "K2": key}, "the same key as admin.keys[0]"},
		{"a tenant's key", "api_keys: [{tenant: default, principal: p, key_env: K}]\nadmin: {keys: [{key_env: K2, scope: admin}]}\n",
			map[string]string{"K": key, "K2": key}, "the same key as api_keys[0]"},
		{"jwt claim without auth.jwt", "admin: {jwt_claim: {name: roles, admin: [root]}}\n", nil, "jwt_claim: needs auth.jwt.issuers"},
		{"jwt claim without name", jwtIssuers + "admin: {jwt_claim: {admin: [root]}}\n", nil, "jwt_claim.name: required"},
		{"jwt claim without values", jwtIssuers + "admin: {jwt_claim: {name: roles}}\n", nil, "jwt_claim: list the claim values"},
		{"jwt claim empty value", jwtIssuers + "admin: {jwt_claim: {name: roles, audit: ['']}}\n", nil, "jwt_claim.audit[0]: empty"},
		{"bad insecure env", "admin: 127.0.0.1:1\n", map[string]string{EnvAdminInsecure: "maybe"}, "SWITCHYARD_ADMIN_INSECURE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadCase(t, dir, tc.name, tc.yaml, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			for _, v := range tc.env {
				if strings.Contains(err.Error(), v) && v != "maybe" {
					t.Errorf("the error quotes a key: %v", err)
				}
			}
		})
	}
}

func TestConfigAdminJWTConfig(t *testing.T) {
	var f File
	if err := Parse([]byte(jwtIssuers+"admin: {jwt_claim: {name: roles, admin: [root, ops], audit: [auditor, ops], metrics: [prom]}}\n"), &f); err != nil {
		t.Fatal(err)
	}
	c := f.AdminJWTConfig()
	if c == nil || len(c.Issuers) != 1 {
		t.Fatalf("admin jwt config %+v", c)
	}
	is := c.Issuers[0]
	if is.GroupsClaim != "roles" || !cmp.Equal(is.Claims, []string{"roles", "sub"}) || !cmp.Equal(is.Audiences, []string{"https://gw.example.com/mcp"}) {
		t.Errorf("issuer %+v: want groups claim roles, claims [roles sub], the issuer's audiences", is)
	}
	// The edge's own configuration is untouched.
	if e := f.Auth.JWTConfig().Issuers[0]; e.GroupsClaim != "teams" || !cmp.Equal(e.Claims, []string{"sub", "org"}) {
		t.Errorf("auth.jwt changed: %+v", e)
	}
	want := map[string]admin.Scope{"root": admin.ScopeAdmin, "ops": admin.ScopeAdmin | admin.ScopeAudit, "auditor": admin.ScopeAudit, "prom": admin.ScopeMetrics}
	if d := cmp.Diff(want, f.Admin.JWTClaim.Scopes()); d != "" {
		t.Errorf("scopes (-want +got):\n%s", d)
	}
	f.Admin.JWTClaim.Audiences = []string{"https://gw.example.com/admin"}
	if a := f.AdminJWTConfig().Issuers[0].Audiences; !cmp.Equal(a, []string{"https://gw.example.com/admin"}) {
		t.Errorf("audiences %v, want jwt_claim.audiences", a)
	}
	f.Admin.JWTClaim = nil
	if f.AdminJWTConfig() != nil {
		t.Error("no jwt_claim must mean no admin verifier")
	}
}

func TestConfigAdminMarshal(t *testing.T) {
	key := newKey(t)
	cases := []struct {
		name string
		a    AdminFile
		want string
	}{
		{"address alone", AdminFile{Listen: "127.0.0.1:9090"}, "admin: 127.0.0.1:9090\n"},
		{"none", AdminFile{}, "admin: \"\"\n"},
		{"keys", AdminFile{Listen: "0.0.0.0:9090", Keys: []AdminKey{{KeyEnv: "K", Scope: "admin", key: key}}},
			"admin:\n    listen: 0.0.0.0:9090\n    keys:\n        - key_env: K\n          scope: admin\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := yaml.Marshal(map[string]AdminFile{"admin": tc.a})
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", b, tc.want)
			}
			// What is printed loads back.
			var f File
			if err := Parse(b, &f); err != nil || f.Admin.Listen != tc.a.Listen || len(f.Admin.Keys) != len(tc.a.Keys) {
				t.Errorf("round trip: %v %+v", err, f.Admin)
			}
		})
	}
}

// TestConfigAdminAbsentKeyError: Record's errors are not key material.
func TestConfigAdminAbsentKeyError(t *testing.T) {
	k := AdminKey{KeyEnv: "K", Scope: "admin"}
	k.key, k.keyErr, k.absent = readKey(k.KeyEnv, "", func(string) string { return "" }, nil)
	if _, err := k.Record(); err == nil || errors.Is(err, apikey.ErrMalformed) {
		t.Fatalf("absent key: %v", err)
	}
	k.SetKey("syk_not-a-key")
	if _, err := k.Record(); !errors.Is(err, apikey.ErrMalformed) || strings.Contains(err.Error(), "syk_not") {
		t.Fatalf("malformed key: %v", err)
	}
}

// TestConfigKeysDoNotFormat: fmt (and slog's text handler, which uses it)
// prints where a key comes from, never the key, whatever the verb.
func TestConfigKeysDoNotFormat(t *testing.T) {
	key := newKey(t)
	f := File{APIKeys: []APIKey{{Tenant: "acme", Principal: "p", KeyEnv: "K"}}, Admin: AdminFile{Listen: "127.0.0.1:1", Keys: []AdminKey{{KeyEnv: "K", Scope: "admin"}}}}
	f.APIKeys[0].SetKey(key)
	f.Admin.Keys[0].SetKey(key)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{f, &f, f.Admin, f.Admin.Keys, f.APIKeys, f.Admin.Keys[0], &f.Admin.Keys[0]} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, key[len(apikey.Prefix)+apikey.IDLen+1:]) {
				t.Fatalf("%s of %T prints the key: %s", verb, v, out)
			}
		}
	}
	if out := fmt.Sprintf("%+v", f.Admin.Keys[0]); !strings.Contains(out, "key_env:K") || !strings.Contains(out, "scope:admin") {
		t.Errorf("%%+v = %s, want the source and scope", out)
	}
}
