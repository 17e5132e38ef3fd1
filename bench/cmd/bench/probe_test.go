package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
)

// probeURL probes raw with a generous bound (the check is on the outcome,
// not the time taken).
func probeURL(t *testing.T, raw string) error {
	t.Helper()
	u, err := parseProbeURL(raw)
	if err != nil {
		t.Fatalf("parseProbeURL(%q): %v", raw, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return probe(ctx, u)
}

// greeter serves one line to every connection and closes it, as a NATS
// server opens a client connection with its INFO line.
func greeter(t *testing.T, line string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(line))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestProbeFixture probes the fixture's streamable HTTP endpoint as the
// compose health check does: a bare GET on /mcp is answered with a 4xx,
// and that means the fixture is up.
func TestProbeFixture(t *testing.T) {
	fx := fixture.NewServer(fixture.Options{})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx }, nil))
	t.Cleanup(srv.Close)

	endpoint := srv.URL + "/mcp"
	resp, err := http.Get(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Why `switchyard probe` (2xx only) cannot check the fixture.
	if resp.StatusCode/100 != 4 {
		t.Errorf("bare GET %s answers %s, want a 4xx", endpoint, resp.Status)
	}
	if err := probeURL(t, endpoint); err != nil {
		t.Errorf("probe of the fixture (GET answers %s): %v, want up", resp.Status, err)
	}
}

func TestProbeHTTP(t *testing.T) {
	status := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if code == http.StatusFound {
				w.Header().Set("Location", "http://"+closedAddr(t)+"/")
			}
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/mcp"
	}
	for _, tc := range []struct {
		name string
		url  string
		up   bool
	}{
		{"200", status(http.StatusOK), true},
		{"302 to a closed port, not followed", status(http.StatusFound), true},
		{"400", status(http.StatusBadRequest), true},
		{"405", status(http.StatusMethodNotAllowed), true},
		{"500", status(http.StatusInternalServerError), false},
		{"503", status(http.StatusServiceUnavailable), false},
		{"nothing listening", "http://" + closedAddr(t) + "/mcp", false},
		{"a NATS server, not HTTP", "http://" + greeter(t, "INFO {\"server_id\":\"x\"}\r\n") + "/mcp", false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProbe(t, tc.url, tc.up) })
	}
}

// checkProbe probes url and fails unless the answer is up (or, with up
// false, an error).
func checkProbe(t *testing.T, url string, up bool) {
	t.Helper()
	err := probeURL(t, url)
	if up && err != nil {
		t.Errorf("probe: %v, want up", err)
	}
	if !up && err == nil {
		t.Error("probe: up, want an error")
	}
}

func TestProbeNATS(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		up   bool
	}{
		{"INFO greeting", "nats://" + greeter(t, "INFO {\"server_id\":\"x\",\"jetstream\":true}\r\n"), true},
		{"an HTTP server, not NATS", "nats://" + greeter(t, "HTTP/1.1 400 Bad Request\r\n\r\n"), false},
		{"closes without a word", "nats://" + greeter(t, ""), false},
		{"nothing listening", "nats://" + closedAddr(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProbe(t, tc.url, tc.up) })
	}
}

func TestProbeCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no url", nil},
		{"relative url", []string{"-url", "/mcp"}},
		{"ftp url", []string{"-url", "ftp://h/x"}},
		{"nats url without a port", []string{"-url", "nats://nats"}},
		{"zero timeout", []string{"-url", "http://127.0.0.1:1/", "-timeout", "0"}},
		{"extra argument", []string{"-url", "http://127.0.0.1:1/", "x"}},
		{"unknown flag", []string{"-url", "http://127.0.0.1:1/", "-nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := runProbe(tc.args); code != 2 {
				t.Errorf("runProbe(%q) = %d, want 2", tc.args, code)
			}
		})
	}
	if code := runProbe([]string{"-url", "nats://" + closedAddr(t)}); code != 1 {
		t.Errorf("runProbe on a closed port = %d, want 1", code)
	}
	if code := runProbe([]string{"-url", "nats://" + greeter(t, "INFO {}\r\n")}); code != 0 {
		t.Errorf("runProbe on a NATS greeting = %d, want 0", code)
	}
}
