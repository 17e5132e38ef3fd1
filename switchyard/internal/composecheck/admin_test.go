package composecheck

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
)

// adminSecret is the compose secret holding the admin listener's key.
const adminSecret = "switchyard_admin_key"

// secretTarget is where a service's secret is mounted.
func secretTarget(s types.ServiceSecretConfig) string {
	if s.Target == "" {
		return "/run/secrets/" + s.Source
	}
	if strings.HasPrefix(s.Target, "/") {
		return s.Target
	}
	return "/run/secrets/" + s.Target
}

// TestComposeAdminCredential: every role's admin listener is reachable on
// the compose network, and so is not on loopback: it must have a
// credential, from a compose secret (not from the file, the image or an
// environment variable of the container), and must not be insecure. With
// the secret, /metrics needs the key and /readyz (the health check) does
// not; without it, the role refuses to start.
func TestComposeAdminCredential(t *testing.T) {
	p := project(t)
	sec, ok := p.Secrets[adminSecret]
	if !ok {
		t.Fatalf("no top-level secret %s", adminSecret)
	}
	// From the operator's environment (or .env): never a file in the
	// repository, nor content in compose.yaml.
	if sec.Environment != config.EnvAdminKey || sec.File != "" || sec.Content != "" {
		t.Errorf("secret %s: %+v, want environment: %s", adminSecret, sec, config.EnvAdminKey)
	}
	cfgPath := writeConfig(t, p)
	var user string
	for _, in := range instructions(dockerfileText(t)) {
		if in.cmd == "USER" {
			user, _, _ = strings.Cut(in.args, ":")
		}
	}
	if user == "" || user == "0" || user == "root" {
		t.Fatalf("Dockerfile USER %q: want a non-root uid", user)
	}
	for _, name := range roles {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			var target string
			for _, ss := range s.Secrets {
				if ss.Source != adminSecret {
					continue
				}
				target = secretTarget(ss)
				// The image runs as its USER, not root: the secret's file
				// must be that user's (and no one else's).
				if ss.UID != user || ss.Mode == nil || *ss.Mode&0o077 != 0 {
					t.Errorf("secret %s: uid %q, mode %v; want uid %s (the Dockerfile's USER) and no access for group or others", adminSecret, ss.UID, ss.Mode, user)
				}
			}
			if target == "" {
				t.Fatalf("secrets %+v: want %s mounted", s.Secrets, adminSecret)
			}
			if v := env(s, config.EnvAdminKeyFile); v != target {
				t.Errorf("%s %q, want the secret's mount %s", config.EnvAdminKeyFile, v, target)
			}
			if env(s, config.EnvAdminKey) != "" {
				t.Errorf("%s in the environment: the key belongs in the secret's file", config.EnvAdminKey)
			}
			addr := env(s, "SWITCHYARD_ADMIN")
			if _, port, err := net.SplitHostPort(addr); err != nil || admin.IsLoopback(addr) {
				t.Errorf("SWITCHYARD_ADMIN %q: want an address reachable on the compose network", addr)
			} else if u, err := url.Parse(s.HealthCheck.Test[len(s.HealthCheck.Test)-1]); name != "edge" && (err != nil || u.Port() != port || u.Path != "/readyz") {
				t.Errorf("healthcheck %q: want /readyz on the admin port %s", s.HealthCheck.Test, port)
			}

			// The role's config, with the secret's file standing at a
			// temporary path.
			key, _, err := apikey.Generate()
			if err != nil {
				t.Fatal(err)
			}
			secretFile := filepath.Join(t.TempDir(), adminSecret)
			if err := os.WriteFile(secretFile, []byte(key+"\n"), 0o400); err != nil {
				t.Fatal(err)
			}
			load := func(keyFile string) *config.File {
				for k, v := range s.Environment {
					if strings.HasPrefix(k, "SWITCHYARD_") && v != nil {
						t.Setenv(k, *v)
					}
				}
				for _, k := range []string{config.EnvAdminKey, config.EnvAdminInsecure} {
					t.Setenv(k, "")
				}
				t.Setenv(config.EnvAdminKeyFile, keyFile)
				fl := roleFlags(t, s)
				fl.Config = cfgPath
				c, err := fl.Load()
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			c := load(secretFile)
			if c.Admin.Insecure {
				t.Error("admin.insecure: the listener would serve /metrics to the whole network")
			}
			ac, closeAuth, err := app.AdminConfig(t.Context(), c, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatalf("admin listener with the secret: %v", err)
			}
			defer closeAuth()
			if err := admin.NewPolicy(c.Admin.Listen, ac.Auth != nil, ac.Insecure).StartError(); err != nil {
				t.Fatalf("the listener would not start: %v", err)
			}
			h := admin.New(ac, nil).Handler()
			for _, tc := range []struct {
				path, token string
				want        int
			}{
				{"/readyz", "", http.StatusServiceUnavailable}, // open to the health check's probe (not ready: no role runs here)
				{"/healthz", "", 200},
				{"/metrics", "", 401},
				{"/metrics", key, 200},
			} {
				req := httptest.NewRequest(http.MethodGet, tc.path, nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tc.want {
					t.Errorf("%s (key %v): %d %s, want %d", tc.path, tc.token != "", rec.Code, rec.Body, tc.want)
				}
			}

			// Without the secret (docker compose up with no
			// SWITCHYARD_ADMIN_KEY): the role does not start, saying why.
			c = load(filepath.Join(t.TempDir(), "missing"))
			if _, _, err := app.AdminConfig(t.Context(), c, nil, nil); err == nil || !strings.Contains(err.Error(), "missing") {
				t.Errorf("admin listener without the secret's file: %v, want an error naming it", err)
			}
			c.Admin.Keys = nil
			if _, _, err := app.StartAdmin(t.Context(), c, nil, nil); !errors.Is(err, admin.ErrNoCredential) {
				t.Errorf("admin listener with no credential: %v, want it refused", err)
			}
		})
	}
}
