package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
)

// Admin requests decode strictly: exact field names at every depth, no
// unknown or repeated field, nothing after the value.
func TestTenancyDecodeStrict(t *testing.T) {
	tests := []struct {
		name, body string
		into       func() any
		want       any      // the decoded request, when it decodes
		errWants   []string // the error mentions each, when it does not
	}{
		{name: "exact", body: `{"name":"acme"}`, into: newOf[tenancy.TenantGetRequest], want: &tenancy.TenantGetRequest{Name: "acme"}},
		{name: "empty body", body: " \n", into: newOf[tenancy.TenantGetRequest], want: &tenancy.TenantGetRequest{}},
		{name: "null", body: `null`, into: newOf[tenancy.TenantGetRequest], want: &tenancy.TenantGetRequest{}},
		{name: "trailing space", body: `{"name":"acme"}` + "\n", into: newOf[tenancy.TenantGetRequest], want: &tenancy.TenantGetRequest{Name: "acme"}},
		{name: "map keys are free", body: `{"claims":{"ORG":["a"]},"groups":["g"]}`, into: newOf[tenancy.ResolvePrincipalRequest],
			want: &tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"ORG": {"a"}}, Groups: []string{"g"}}},
		{name: "nested exact", body: `{"tenant":{"name":"x","policy":{"rules":[{"effect":"allow","pattern":"*"}]}},"revision":3}`, into: newOf[tenancy.TenantPutRequest],
			want: &tenancy.TenantPutRequest{Revision: 3, Tenant: tenancy.Tenant{Name: "x", Policy: policy.Spec{Rules: []policy.Rule{{Effect: policy.Allow, Pattern: "*"}}}}}},

		{name: "upper case", body: `{"NAME":"acme"}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{`unknown field "NAME"`, `did you mean "name"`}},
		{name: "title case", body: `{"Name":"acme"}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{`"Name"`}},
		{name: "nested case", body: `{"tenant":{"Name":"x"}}`, into: newOf[tenancy.TenantPutRequest], errWants: []string{`"tenant.Name"`, `"tenant.name"`}},
		{name: "in a list", body: `{"tenant":{"name":"x","policy":{"rules":[{"effect":"allow","Pattern":"*"}]}}}`, into: newOf[tenancy.TenantPutRequest],
			errWants: []string{`"tenant.policy.rules[0].Pattern"`}},
		{name: "unknown", body: `{"name":"acme","force":true}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{`unknown field "force"`}},
		{name: "unknown nested", body: `{"tenant":{"name":"x","limits":{"rps":1}}}`, into: newOf[tenancy.TenantPutRequest], errWants: []string{`unknown field "tenant.limits.rps"`}},
		{name: "field twice", body: `{"name":"a","name":"b"}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{`"name" given twice`}},
		{name: "claim twice", body: `{"claims":{"org":["a"],"org":["b"]}}`, into: newOf[tenancy.ResolvePrincipalRequest], errWants: []string{`"claims.org" given twice`}},
		{name: "second value", body: `{"name":"a"} {"name":"b"}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"data after the JSON value"}},
		{name: "stray brace", body: `{"name":"a"}}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"data after the JSON value"}},
		{name: "stray bracket", body: `{"name":"a"}]`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"data after the JSON value"}},
		{name: "garbage after", body: `{"name":"a"} x`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"data after the JSON value"}},
		{name: "not an object", body: `"x"`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"want a JSON object"}},
		{name: "list for an object", body: `{"tenant":[]}`, into: newOf[tenancy.TenantPutRequest], errWants: []string{`"tenant": want a JSON object`}},
		{name: "wrong type", body: `{"name":7}`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"string"}},
		{name: "syntax", body: `{"name":`, into: newOf[tenancy.TenantGetRequest], errWants: []string{"EOF"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.into()
			err := decode([]byte(tt.body), v)
			if tt.errWants == nil {
				if err != nil {
					t.Fatalf("decode(%s) = %v", tt.body, err)
				}
				if diff := cmp.Diff(tt.want, v); diff != "" {
					t.Errorf("decode(%s) (-want +got):\n%s", tt.body, diff)
				}
				return
			}
			e := toAdminError(err)
			if e == nil || e.Code != tenancy.AdminCodeBadRequest {
				t.Fatalf("decode(%s) = %v, want a 400", tt.body, err)
			}
			for _, w := range tt.errWants {
				if !strings.Contains(e.Message, w) {
					t.Errorf("decode(%s) = %q, want it to mention %s", tt.body, e.Message, w)
				}
			}
		})
	}
}

func newOf[T any]() any { return new(T) }
