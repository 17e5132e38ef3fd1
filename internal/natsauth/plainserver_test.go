package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
)

// TestPlainNATSServerConfig: the plain nats-server configuration
// docs/security.md gives (including the generated auth.conf) loads, with
// the operator, the payload limit, TLS and the sync interval.
func TestPlainNATSServerConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsauth.Init(dir, natsauth.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	conf := `include ./auth.conf
listen: 127.0.0.1:-1
max_payload: 8MB
tls { cert_file: "` + filepath.Join(dir, "server-cert.pem") + `", key_file: "` + filepath.Join(dir, "server-key.pem") + `" }
jetstream { store_dir: "` + filepath.Join(dir, "js") + `", max_file_store: 20GB, max_memory_store: 1GB, sync_interval: always }
`
	p := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(p)
	if err != nil {
		t.Fatalf("the documented nats-server config does not load: %v", err)
	}
	if len(opts.TrustedOperators) != 1 || opts.MaxPayload != 8<<20 || opts.TLSConfig == nil || !opts.SyncAlways || opts.MaxControlLine != natsauth.MaxControlLine {
		t.Fatalf("options: operators %d, max_payload %d, tls %v, sync always %v, max_control_line %d",
			len(opts.TrustedOperators), opts.MaxPayload, opts.TLSConfig != nil, opts.SyncAlways, opts.MaxControlLine)
	}
}
