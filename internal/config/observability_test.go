package config

import (
	"os"
	"strings"
	"testing"
)

func TestConfigAdminAndMetrics(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml, env string
		admin           string
		maxTenants      int
		err             string
	}{
		{name: "defaults", yaml: "", admin: "", maxTenants: 0},
		{name: "admin", yaml: "admin: 127.0.0.1:9090\n", admin: "127.0.0.1:9090"},
		{name: "env wins", yaml: "admin: 127.0.0.1:9090\n", env: "127.0.0.1:0", admin: "127.0.0.1:0"},
		{name: "tenant labels on", yaml: "metrics:\n  tenant_labels: true\n", maxTenants: 100},
		{name: "tenant labels bound", yaml: "metrics:\n  tenant_labels: true\n  tenant_labels_max: 7\n", maxTenants: 7},
		{name: "bound without the switch", yaml: "metrics:\n  tenant_labels_max: 7\n", maxTenants: 0},
		{name: "bad admin", yaml: "admin: 9090\n", err: "admin:"},
		{name: "negative bound", yaml: "metrics:\n  tenant_labels_max: -1\n", err: "tenant_labels_max"},
		{name: "unknown metrics key", yaml: "metrics:\n  tenants: 1\n", err: "tenants"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range envVars {
				t.Setenv(k, "")
			}
			t.Setenv("SWITCHYARD_ADMIN", tc.env)
			p := dir + "/" + strings.ReplaceAll(tc.name, " ", "-") + ".yaml"
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := Load(p)
			if err == nil {
				err = f.Validate()
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("case %d: err = %v, want one mentioning %q", i, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Admin.Listen != tc.admin || f.Metrics.MaxTenantLabels() != tc.maxTenants {
				t.Errorf("admin %q, max tenant labels %d; want %q, %d", f.Admin.Listen, f.Metrics.MaxTenantLabels(), tc.admin, tc.maxTenants)
			}
		})
	}
}
