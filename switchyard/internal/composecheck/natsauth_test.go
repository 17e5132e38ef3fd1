package composecheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
)

// secretFile returns the host file of the top-level secret name
// (relative to the repository root) and where service s mounts it.
func secretFile(t *testing.T, p *types.Project, s types.ServiceConfig, name string) (file, target string) {
	t.Helper()
	top, ok := p.Secrets[name]
	if !ok {
		t.Fatalf("no top-level secret %q", name)
	}
	i := slices.IndexFunc(s.Secrets, func(c types.ServiceSecretConfig) bool { return c.Source == name })
	if i < 0 {
		t.Fatalf("%s does not mount the secret %s", s.Name, name)
	}
	c := s.Secrets[i]
	target = c.Target
	if target == "" {
		target = name
	}
	if !filepath.IsAbs(target) {
		target = "/run/secrets/" + target
	}
	if c.Mode == nil || *c.Mode&0o077 != 0 || c.UID != "65532" {
		t.Errorf("%s: secret %s mode %v uid %q: want readable by the image's user (65532) only", s.Name, name, c.Mode, c.UID)
	}
	return top.File, target
}

// TestComposeNATSAuth: the bus is authenticated and TLS, with the
// material of `switchyard nats init nats-auth --host nats`: NATS serves
// with --auth and its certificate; each role gets its own identity's creds
// and the CA, and no other identity's; the files the secrets name are
// those init writes, and each role's creds are its own identity's.
func TestComposeNATSAuth(t *testing.T) {
	p := project(t)
	dir := filepath.Join(t.TempDir(), "nats-auth")
	if _, err := natsauth.Init(dir, natsauth.InitOptions{Hosts: []string{"nats"}}); err != nil {
		t.Fatal(err)
	}
	// hostFile maps a secret's file (./nats-auth/<name>, resolved against
	// the project directory) to the file init wrote.
	hostFile := func(file string) string {
		t.Helper()
		if filepath.Base(filepath.Dir(file)) != "nats-auth" {
			t.Fatalf("secret file %s is not in nats-auth/", file)
		}
		return filepath.Join(dir, filepath.Base(file))
	}

	nats := service(t, p, "nats")
	authDir := flagValue(nats.Command, "--auth")
	if authDir == "" || slices.Contains(nats.Command, "--insecure") || slices.Contains(nats.Command, "--no-tls") {
		t.Fatalf("nats: command %q: want --auth DIR, without --insecure or --no-tls", nats.Command)
	}
	for secret, name := range map[string]string{"nats_auth_conf": natsauth.FileAuthConf, "nats_server_cert": natsauth.FileServerCert, "nats_server_key": natsauth.FileServerKey} {
		file, target := secretFile(t, p, nats, secret)
		if target != filepath.Join(authDir, name) || filepath.Base(hostFile(file)) != name {
			t.Errorf("nats: secret %s from %s at %s, want %s's %s", secret, file, target, authDir, name)
		}
	}
	for _, role := range roles {
		t.Run(role, func(t *testing.T) {
			s := service(t, p, role)
			if v := env(s, "SWITCHYARD_NATS"); !strings.HasPrefix(v, "tls://") {
				t.Errorf("SWITCHYARD_NATS %q: want tls://", v)
			}
			ident := strings.ReplaceAll(role, "-", "_")
			file, target := secretFile(t, p, s, "nats_creds_"+ident)
			if env(s, "SWITCHYARD_NATS_CREDS") != target {
				t.Errorf("SWITCHYARD_NATS_CREDS %q, want the secret's %s", env(s, "SWITCHYARD_NATS_CREDS"), target)
			}
			caFile, caTarget := secretFile(t, p, s, "nats_ca")
			if env(s, "SWITCHYARD_NATS_CA") != caTarget || filepath.Base(caFile) != natsauth.FileCA {
				t.Errorf("SWITCHYARD_NATS_CA %q (secret %s from %s)", env(s, "SWITCHYARD_NATS_CA"), caTarget, caFile)
			}
			for _, c := range s.Secrets {
				if strings.HasPrefix(c.Source, "nats_creds_") && c.Source != "nats_creds_"+ident {
					t.Errorf("%s also gets %s", role, c.Source)
				}
			}
			// The role starts with the file the secret names: its own
			// identity's creds (app.CredsFor refuses another's).
			n := config.NATSFile{URL: env(s, "SWITCHYARD_NATS"), Creds: hostFile(file)}
			if _, id, err := app.CredsFor(n, proto.Identity(role)); err != nil || id != proto.Identity(role) {
				t.Errorf("creds %s: identity %q, %v", file, id, err)
			}
		})
	}
	for _, s := range p.AllServices() {
		if slices.Contains(roles, s.Name) || s.Name == "nats" {
			continue
		}
		for _, c := range s.Secrets {
			if strings.HasPrefix(c.Source, "nats_") {
				t.Errorf("%s gets the NATS secret %s", s.Name, c.Source)
			}
		}
	}
}
