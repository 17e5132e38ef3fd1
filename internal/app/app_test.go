package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/config"
)

func TestAppPrintConfigRedactsEnv(t *testing.T) {
	cfg := &config.File{Upstreams: []config.Upstream{{Name: "a", Command: []string{"x"}, Env: map[string]string{"API_KEY": "s3cret"}}}}
	var b bytes.Buffer
	if code := PrintConfig(&b, cfg); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(b.String(), "s3cret") || !strings.Contains(b.String(), "API_KEY") {
		t.Fatalf("got:\n%s", b.String())
	}
	if cfg.Upstreams[0].Env["API_KEY"] != "s3cret" {
		t.Fatal("the config itself was changed")
	}
}
