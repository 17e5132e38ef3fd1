package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/testutil/idp"
)

// adminEnv are the variables config.Load reads for the admin section.
var adminEnv = []string{"SWITCHYARD_ADMIN", config.EnvAdminKey, config.EnvAdminKeyFile, config.EnvAdminInsecure}

// loadConfig writes body to a file and loads it with env set (and every
// other admin variable blank).
func loadConfig(t *testing.T, body string, env map[string]string) *config.File {
	t.Helper()
	for _, k := range adminEnv {
		t.Setenv(k, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	p := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func genKey(t *testing.T) string {
	t.Helper()
	k, _, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAppCheckConfigPrintsNoKey: --check-config's output names where
// every key comes from and never a key.
func TestAppCheckConfigPrintsNoKey(t *testing.T) {
	envKey, fileKey, scrapeKey, tenantKey := genKey(t), genKey(t), genKey(t), genKey(t)
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	if err := os.WriteFile(keyFile, []byte(fileKey), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, fmt.Sprintf(`admin:
  listen: 0.0.0.0:9090
  keys:
    - {key_file: %s, scope: audit}
    - {key_env: SY_TEST_SCRAPE_KEY, scope: metrics}
api_keys:
  - {tenant: default, principal: p, key_env: SY_TEST_TENANT_KEY}
`, keyFile), map[string]string{config.EnvAdminKey: envKey, "SY_TEST_SCRAPE_KEY": scrapeKey, "SY_TEST_TENANT_KEY": tenantKey})
	var b bytes.Buffer
	if code := PrintConfig(&b, cfg); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := b.String()
	for _, k := range []string{envKey, fileKey, scrapeKey, tenantKey} {
		if strings.Contains(out, k) || strings.Contains(out, k[len(apikey.Prefix)+apikey.IDLen+1:]) {
			t.Fatalf("--check-config prints a key:\n%s", out)
		}
	}
	for _, want := range []string{"key_file: " + keyFile, "key_env: SY_TEST_SCRAPE_KEY", "key_env: " + config.EnvAdminKey, "scope: audit", "scope: metrics", "scope: admin", "listen: 0.0.0.0:9090"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check-config output lacks %q:\n%s", want, out)
		}
	}
}

// adminHandler builds the admin listener of cfg as served on addr (not
// bound), with a stub audit search and one counter.
func adminHandler(t *testing.T, cfg *config.File, addr string) http.Handler {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_test_total", Help: "test"}))
	ac, closeAuth, err := AdminConfig(t.Context(), cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAuth)
	ac.Addr = addr
	s := admin.New(ac, nil)
	s.Mount("/audit/", admin.RuleAudit, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"events":[]}`)) }))
	return s.Handler()
}

func status(t *testing.T, h http.Handler, path, token string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s: 401 without WWW-Authenticate: Bearer", path)
	}
	if token != "" && strings.Contains(rec.Body.String(), token) {
		t.Errorf("%s: the answer echoes the token", path)
	}
	return rec.Code
}

// TestAppAdminJWTClaim: JWTs of the auth.jwt issuer (a local IdP with its
// JWKS) get the scopes their roles claim maps to, on a listener that is
// not on loopback.
func TestAppAdminJWTClaim(t *testing.T) {
	p := idp.Start(t, idp.Options{})
	const body = `auth:
  jwt:
    issuers:
      - {issuer: %q, jwks_url: %q, audiences: [%q], allow_http: true, claims: [org]}
admin:
  listen: 0.0.0.0:9090
  jwt_claim:
    name: roles
    admin: [switchyard-admin]
    audit: [auditor]
    metrics: [scraper]
%s`
	cfg := loadConfig(t, fmt.Sprintf(body, p.Issuer(), p.JWKSURL(), idp.DefaultAudience, ""), nil)
	h := adminHandler(t, cfg, "0.0.0.0:9090")
	roles := func(r any) string { return p.Token(t, map[string]any{"roles": r}) }
	now := time.Now()
	cases := []struct {
		name           string
		token          string
		metrics, audit int
	}{
		{"no token", "", 401, 401},
		{"admin", roles([]string{"switchyard-admin"}), 200, 200},
		{"auditor", roles([]string{"auditor"}), 403, 200},
		{"auditor as a string", roles("auditor"), 403, 200},
		{"scraper", roles([]string{"scraper"}), 200, 403},
		{"auditor and scraper", roles([]string{"scraper", "auditor"}), 200, 200},
		{"another role", roles([]string{"developer"}), 403, 403},
		{"no roles claim", p.Token(t, nil), 403, 403},
		{"roles claim not strings", roles(map[string]any{"admin": true}), 401, 401},
		{"wrong audience", p.Token(t, map[string]any{"roles": []string{"switchyard-admin"}, "aud": "someone-else"}), 401, 401},
		{"expired", p.Token(t, map[string]any{"roles": []string{"switchyard-admin"}, "iat": now.Add(-2 * time.Hour), "exp": now.Add(-time.Hour)}), 401, 401},
		{"signed by a key the IdP does not publish", p.TokenSignedBy(t, idp.NewKey(t), map[string]any{"roles": []string{"switchyard-admin"}}), 401, 401},
		{"alg none", p.Unsigned(t, map[string]any{"roles": []string{"switchyard-admin"}}), 401, 401},
		{"an unknown admin key", genKey(t), 401, 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := status(t, h, "/metrics", tc.token); got != tc.metrics {
				t.Errorf("/metrics = %d, want %d", got, tc.metrics)
			}
			if got := status(t, h, "/audit/events", tc.token); got != tc.audit {
				t.Errorf("/audit/events = %d, want %d", got, tc.audit)
			}
			if got := status(t, h, "/readyz", tc.token); got != 503 { // no roles added: not ready, but open
				t.Errorf("/readyz = %d, want 503 (open, not ready)", got)
			}
		})
	}

	// jwt_claim.audiences replaces the issuer's audiences on the admin
	// listener: the MCP endpoint's tokens no longer open it.
	cfg = loadConfig(t, fmt.Sprintf(body, p.Issuer(), p.JWKSURL(), idp.DefaultAudience, "    audiences: [https://gw.example.com/admin]\n"), nil)
	h = adminHandler(t, cfg, "0.0.0.0:9090")
	if got := status(t, h, "/audit/events", roles([]string{"switchyard-admin"})); got != 401 {
		t.Errorf("a token for the MCP audience: %d, want 401", got)
	}
	if got := status(t, h, "/audit/events", p.Token(t, map[string]any{"roles": []string{"auditor"}, "aud": "https://gw.example.com/admin"})); got != 200 {
		t.Errorf("a token for the admin audience: %d, want 200", got)
	}
}

// TestAppStartAdminLoopback runs a real listener on 127.0.0.1 with keys:
// /metrics and health are open there, the audit search needs an audit or
// admin key.
func TestAppStartAdminLoopback(t *testing.T) {
	adminKey, metricsKey, auditKey := genKey(t), genKey(t), genKey(t)
	cfg := loadConfig(t, "admin:\n  listen: 127.0.0.1:0\n  keys:\n    - {key_env: SY_TEST_METRICS_KEY, scope: metrics}\n    - {key_env: SY_TEST_AUDIT_KEY, scope: audit}\n",
		map[string]string{config.EnvAdminKey: adminKey, "SY_TEST_METRICS_KEY": metricsKey, "SY_TEST_AUDIT_KEY": auditKey})
	ctx, cancel := context.WithCancel(t.Context())
	adm, wait, err := StartAdmin(ctx, cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := wait(); err != nil {
			t.Errorf("admin listener: %v", err)
		}
	}()
	adm.Mount("/audit/", admin.RuleAudit, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"events":[]}`)) }))
	get := func(path, token string) (int, string, http.Header) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+adm.Addr()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", 200},
		{"/metrics", "", 200},
		{"/metrics", genKey(t), 200},
		{"/audit/events", "", 401},
		{"/audit/events", genKey(t), 401},
		{"/audit/events", metricsKey, 403},
		{"/audit/events", auditKey, 200},
		{"/audit/events", adminKey, 200},
	} {
		code, body, hdr := get(tc.path, tc.token)
		if code != tc.want {
			t.Errorf("%s with %.12s: %d %s, want %d", tc.path, tc.token, code, body, tc.want)
		}
		if code == 401 && hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.path)
		}
		if code >= 400 && !strings.Contains(body, "scope audit or admin") {
			t.Errorf("%s: refusal %q does not name the scope needed", tc.path, body)
		}
	}
}

// TestAppStartAdminRefuses: a listener that is not on loopback does not
// start without a credential, nor with one that cannot be read.
func TestAppStartAdminRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		env        map[string]string
		want       string
		noCred     bool
	}{
		{"no credential", "admin: 0.0.0.0:0\n", nil, "admin.keys", true},
		{"no credential, all interfaces", "admin: ':0'\n", nil, "SWITCHYARD_ADMIN_KEY", true},
		{"no credential, flag address", "", map[string]string{"SWITCHYARD_ADMIN": "0.0.0.0:0"}, "admin.insecure", true},
		{"key variable unset", "admin: {listen: 0.0.0.0:0, keys: [{key_env: SY_TEST_UNSET_KEY, scope: admin}]}\n", nil, "SY_TEST_UNSET_KEY", false},
		{"key file missing", "", map[string]string{"SWITCHYARD_ADMIN": "0.0.0.0:0", config.EnvAdminKeyFile: "/nonexistent/admin.key"}, "/nonexistent/admin.key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t, tc.body, tc.env)
			adm, _, err := StartAdmin(t.Context(), cfg, prometheus.NewRegistry(), nil)
			if err == nil || adm != nil {
				t.Fatalf("started (%v)", err)
			}
			if !strings.Contains(err.Error(), tc.want) || errors.Is(err, admin.ErrNoCredential) != tc.noCred {
				t.Fatalf("err %v, want one mentioning %q (ErrNoCredential %v)", err, tc.want, tc.noCred)
			}
		})
	}
}
