package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/proxy"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

func TestProxyCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no upstream", nil},
		{"relative upstream", []string{"-upstream", "/mcp"}},
		{"ftp upstream", []string{"-upstream", "ftp://h/mcp"}},
		{"extra argument", []string{"-upstream", "http://127.0.0.1:1/mcp", "x"}},
		{"unknown flag", []string{"-upstream", "http://127.0.0.1:1/mcp", "-nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runProxy(tc.args); got != 2 {
				t.Errorf("runProxy(%q) = %d, want 2", tc.args, got)
			}
		})
	}
}

// TestProxyCommandServes runs the proxy "bench proxy" serves in front of
// an in-process fixture, makes a call through it and stops it.
func TestProxyCommandServes(t *testing.T) {
	fx := fixture.NewServer(fixture.Options{})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx }, nil))
	t.Cleanup(up.Close)
	upstream, err := proxy.ParseUpstream(up.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serveProxy(ctx, ln, upstream, launch.ProxyListening+"URL", &stderr) }()

	endpoint := proxy.Endpoint(ln.Addr().String(), upstream)
	s, err := session.Dial(t.Context(), endpoint, session.Protocol2025)
	if err != nil {
		cancel()
		t.Fatalf("Dial through the proxy: %v", err)
	}
	if err := session.CallTool(s.ClientSession, "echo", nil)(t.Context()); err != nil {
		t.Errorf("echo through the proxy: %v", err)
	}
	_ = s.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveProxy = %v after cancel, want nil", err)
	}
	if !strings.HasPrefix(stderr.String(), launch.ProxyListening+"URL\n") {
		t.Errorf("stderr %q does not start with the announcement", stderr.String())
	}
}
