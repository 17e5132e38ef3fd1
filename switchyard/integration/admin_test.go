package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// adminGet asks the admin listener at addr for path with the bearer key
// ("" for none).
func adminGet(t *testing.T, addr, path, key string) (int, string, http.Header, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

// TestIntegrationAdminCredential runs the switchyard binary: --check-config
// names where every admin key comes from and prints none; a role and
// `switchyard dev` refuse to serve an admin listener on every interface
// without a credential, saying how to configure one; `switchyard dev` with
// SWITCHYARD_ADMIN_KEY on loopback serves /metrics to everyone and the
// audit search to that key only.
func TestIntegrationAdminCredential(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	dir := t.TempDir()
	envKey, fileKey, metricsKey := mintKey(t), mintKey(t), mintKey(t)
	keyFile := filepath.Join(dir, "admin.key")
	if err := writeFile(keyFile, fileKey+"\n"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"SWITCHYARD_ADMIN", config.EnvAdminKey, config.EnvAdminKeyFile, config.EnvAdminInsecure, "SWITCHYARD_CONFIG"} {
		t.Setenv(k, "")
	}
	run := func(env []string, args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, sy, args...)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("%s: %v\n%s", args, err, out)
		}
		return 0, string(out)
	}

	// --check-config.
	withKeys := filepath.Join(dir, "keys.yaml")
	if err := writeFile(withKeys, "admin:\n  listen: 0.0.0.0:9090\n  keys:\n    - {key_env: SY_TEST_METRICS_KEY, scope: metrics}\n"); err != nil {
		t.Fatal(err)
	}
	code, out := run([]string{config.EnvAdminKey + "=" + envKey, config.EnvAdminKeyFile + "=" + keyFile, "SY_TEST_METRICS_KEY=" + metricsKey},
		"edge", "--check-config", "--config", withKeys)
	if code != 0 {
		t.Fatalf("--check-config: exit %d\n%s", code, out)
	}
	for _, k := range []string{envKey, fileKey, metricsKey} {
		if strings.Contains(out, k) || strings.Contains(out, k[21:]) {
			t.Fatalf("--check-config prints a key:\n%s", out)
		}
	}
	for _, want := range []string{"key_env: SY_TEST_METRICS_KEY", "key_env: " + config.EnvAdminKey, "key_file: " + keyFile} {
		if !strings.Contains(out, want) {
			t.Errorf("--check-config lacks %q:\n%s", want, out)
		}
	}

	// No credential on every interface: no start, and why.
	bare := filepath.Join(dir, "bare.yaml")
	if err := writeFile(bare, fmt.Sprintf("listen: %s\n", freeAddr(t))); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"router", "--config", bare, "--nats", "nats://127.0.0.1:1", "--admin", "0.0.0.0:0"},
		{"dev", "--config", bare, "--admin", "0.0.0.0:0"},
	} {
		code, out := run(nil, args...)
		if code != 1 || !strings.Contains(out, "not on loopback and has no credential") || !strings.Contains(out, "admin.keys") || !strings.Contains(out, "admin.insecure") {
			t.Errorf("%s %v without a credential: exit %d, want 1 with how to configure one:\n%s", sy, args, code, out)
		}
	}

	// switchyard dev on loopback with SWITCHYARD_ADMIN_KEY.
	adminAddr := freeAddr(t)
	t.Setenv(config.EnvAdminKey, envKey)
	startProc(t, "dev", sy, "dev", "--config", bare, "--admin", adminAddr)
	eventually(t, 30*time.Second, func() error {
		code, body, _, err := adminGet(t, adminAddr, "/audit/events?limit=1", envKey)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("/audit/events with the key: %d %s", code, body)
		}
		return nil
	})
	if code, body, _, err := adminGet(t, adminAddr, "/metrics", ""); err != nil || code != 200 || !strings.Contains(body, "switchyard_") {
		t.Errorf("/metrics on loopback without a key: %d %v", code, err)
	}
	for _, key := range []string{"", metricsKey} {
		code, body, hdr, err := adminGet(t, adminAddr, "/audit/events?limit=1", key)
		if err != nil || code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, "scope audit or admin") {
			t.Errorf("/audit/events with key %.12q: %d %s %v, want 401 with WWW-Authenticate: Bearer", key, code, body, err)
		}
	}
}
