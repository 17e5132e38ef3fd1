package app

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
)

// TestAppPrintConfigRedactsNATS: --check-config never prints a NATS
// password or token (each URL of a list), while the hosts stay readable;
// credential files are named, not read.
func TestAppPrintConfigRedactsNATS(t *testing.T) {
	cfg := &config.File{NATS: config.NATSFile{
		URL:   "nats://svc:hunter2@nats-1:4222,tls://s3cr3t-token@nats-2:4222",
		Creds: "/etc/switchyard/nats/edge.creds",
	}, Upstreams: []config.Upstream{{Name: "u", URL: "https://bob:upw-secret@up.example/mcp?token=abc-secret"}}}
	var b bytes.Buffer
	if code := PrintConfig(&b, cfg); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := b.String()
	for _, secret := range []string{"hunter2", "s3cr3t-token", "upw-secret", "abc-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("printed %q:\n%s", secret, out)
		}
	}
	for _, keep := range []string{"nats-1:4222", "nats-2:4222", "/etc/switchyard/nats/edge.creds", "up.example/mcp"} {
		if !strings.Contains(out, keep) {
			t.Errorf("%q missing:\n%s", keep, out)
		}
	}
	if !strings.Contains(cfg.NATS.URL, "hunter2") {
		t.Fatal("the config itself was changed")
	}
}

// TestAppCredsFor: a creds directory gives each identity its own file; a
// file of another identity is refused (a role with another's creds would
// fail on every subject), one of the allowed alternatives is taken.
func TestAppCredsFor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := natsauth.Init(dir, natsauth.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	n := config.NATSFile{Creds: dir}
	path, id, err := CredsFor(n, proto.IdentityRouter)
	if err != nil || id != proto.IdentityRouter || path != filepath.Join(dir, "router.creds") {
		t.Fatalf("CredsFor(dir, router) = %s %s %v", path, id, err)
	}
	n.Creds = filepath.Join(dir, "edge.creds")
	if _, _, err := CredsFor(n, proto.IdentityRouter); err == nil || !strings.Contains(err.Error(), `"edge"`) {
		t.Fatalf("router with edge's creds: %v", err)
	}
	n.Creds = filepath.Join(dir, "admin.creds")
	if _, id, err := CredsFor(n, proto.IdentityAudit, proto.IdentityAdmin); err != nil || id != proto.IdentityAdmin {
		t.Fatalf("audit CLI with admin's creds: %s %v", id, err)
	}
	n.Creds = filepath.Join(dir, "missing.creds")
	if _, _, err := CredsFor(n, proto.IdentityEdge); err == nil {
		t.Fatal("a missing creds file was accepted")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "edge.creds"))
	n.Creds = filepath.Join(t.TempDir(), "seed-only")
	if err := os.WriteFile(n.Creds, []byte("not a creds file"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = CredsFor(n, proto.IdentityEdge)
	if err == nil || strings.Contains(err.Error(), string(b)) {
		t.Fatalf("a malformed creds file: %v", err)
	}
	if _, id, err := CredsFor(config.NATSFile{}, proto.IdentityEdge); err != nil || id != proto.IdentityEdge {
		t.Fatalf("no creds: %s %v", id, err)
	}
	// ConnectAudit needs the audit identity's creds; a role's own file is
	// not enough (nil: the search is not served).
	nc, err := ConnectAudit(config.NATSFile{URL: "nats://127.0.0.1:1", Creds: filepath.Join(dir, "edge.creds")}, slog.New(slog.DiscardHandler))
	if nc != nil || err != nil {
		t.Fatalf("ConnectAudit with edge's creds = %v, %v", nc, err)
	}
}

func TestAppPprofLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"":                true, // off
		"127.0.0.1:0":     true,
		"localhost:0":     false, // a name may resolve anywhere (admin.IsLoopback)
		"[::1]:0":         true,
		"0.0.0.0:6060":    false,
		":6060":           false,
		"10.0.0.5:6060":   false,
		"pprof.example:1": false,
	} {
		f := Flags{PprofAddr: addr}
		if err := f.StartPprof(slog.New(slog.DiscardHandler)); (err == nil) != ok {
			t.Errorf("--pprof %q: %v, want accepted %v", addr, err, ok)
		}
	}
}
