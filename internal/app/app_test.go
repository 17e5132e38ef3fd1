package app

import (
	"bytes"
	"log/slog"
	"runtime/debug"
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

func TestGCDefaults(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.DiscardHandler)
	t.Setenv("GOGC", "150")
	gcDefaults(log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: gc percent %d, want it left alone (100)", got)
	}
	t.Setenv("GOGC", "")
	gcDefaults(log)
	if got := debug.SetGCPercent(100); got != DefaultGOGC {
		t.Fatalf("GOGC unset: gc percent %d, want %d", got, DefaultGOGC)
	}
}
