package stdiofront

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within 10s", what)
	}
	var zero T
	return zero
}

// TestStdioFrontGoSDKClient drives the bridge with the go-sdk client over
// stdio, against a stateful go-sdk server answering with SSE, with JSON,
// and with SSE and an event store (event ids, priming events).
func TestStdioFrontGoSDKClient(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", &mcp.StreamableHTTPOptions{}},
		{"json", &mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"sse+eventstore", &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGateway(t, c.opts)
			r := startBridge(t, g.url, nil)
			logs := make(chan string, 8)
			progress := make(chan float64, 8)
			client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if req.Params.Message != "your name?" {
						return nil, fmt.Errorf("unexpected elicitation %q", req.Params.Message)
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
				},
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					logs <- fmt.Sprint(req.Params.Data)
				},
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.Progress
				},
			})
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r.stdout, Writer: r.stdin},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatalf("connect through the bridge: %v", err)
			}
			if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
				t.Fatalf("negotiated %q", v)
			}
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatalf("logging/setLevel: %v", err)
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, ","); got != "ask,block,chatty,echo" {
				t.Fatalf("tools %s", got)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "chatty", Meta: mcp.Meta{"progressToken": "p-1"}})
			if err != nil {
				t.Fatalf("tools/call chatty: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "done" {
				t.Fatalf("chatty answered %q", got)
			}
			if got := recv(t, logs, "log notification"); got != "working" {
				t.Fatalf("log %q", got)
			}
			if got := recv(t, progress, "progress notification"); got != 1 {
				t.Fatalf("progress %v", got)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
			if err != nil {
				t.Fatalf("tools/call ask: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "accept ada" {
				t.Fatalf("ask answered %q (want the elicitation's answer)", got)
			}

			// A message outside any call comes on the GET stream.
			eventually(t, "the server's log outside a call reaches the GET stream", func() bool {
				for ss := range g.server.Sessions() {
					if ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "idle"}) == nil {
						return true
					}
				}
				return false
			})
			if got := recv(t, logs, "log notification on the GET stream"); got != "idle" {
				t.Fatalf("log %q", got)
			}

			var id string
			for ss := range g.server.Sessions() {
				id = ss.ID()
			}
			if err := cs.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if err := r.finish(); err != nil {
				t.Fatalf("Run after stdin EOF: %v", err)
			}
			if n := g.http.deletes.Load(); n != 1 {
				t.Fatalf("%d DELETEs after stdin EOF, want 1", n)
			}
			if _, ok := g.http.deletedSessions.Load(id); !ok || id == "" {
				t.Fatalf("DELETE did not name session %q", id)
			}
		})
	}
}

// TestStdioFrontRawLines sends raw JSON lines: the session headers, a
// malformed line (-32700, and the bridge goes on), a line over the limit
// (-32600 with its id), a line without a trailing newline, and DELETE on
// EOF.
func TestStdioFrontRawLines(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			g := newGateway(t, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
			r := startBridge(t, g.url, func(c *Config) { c.MaxLineBytes = 4096 })
			r.send(initLine)
			r.expect(`"id":0`, `"protocolVersion":"2025-11-25"`)
			r.send(initializedLine)
			r.send(`not json`)
			r.expect(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`)
			r.send(`{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"echo","arguments":{"name":"bob"}}}`)
			r.expect(`"id":"a-1"`, `hello bob`)
			r.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"name":"` + strings.Repeat("x", 5000) + `"}},"id":31}`)
			r.expect(`"id":31,"error":{"code":-32600,`)
			r.send(`{"jsonrpc":"2.0","id":32,"method":"tools/list"}`)
			r.expect(`"id":32`, `"echo"`)
			if _, err := r.stdin.Write([]byte(`{"jsonrpc":"2.0","id":33,"method":"ping"}`)); err != nil {
				t.Fatal(err)
			}
			r.stdin.Close()
			r.expect(`"id":33,"result":{}`)
			if err := r.finish(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := g.http.deletes.Load(); n != 1 {
				t.Fatalf("%d DELETEs, want 1", n)
			}
		})
	}
}

// TestStdioFrontSessionExpired: once the gateway answers 404 for the
// session, the request in question and the call in flight get errors, and
// Run fails with ErrSessionExpired (no DELETE: the session is gone).
func TestStdioFrontSessionExpired(t *testing.T) {
	g := newGateway(t, &mcp.StreamableHTTPOptions{})
	r := startBridge(t, g.url, nil)
	r.send(initLine)
	r.expect(`"id":0`)
	r.send(initializedLine)
	r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	recv(t, g.blocked, "block tool start")
	// The GET stream is up first, or its 404 could end the bridge before
	// the request below is read.
	eventually(t, "the GET stream is open", func() bool { return g.http.gets.Load() > 0 })
	g.http.expired.Store(true)
	r.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	got := map[string]bool{}
	for range 2 {
		l := r.expect(`"error":{"code":-32603,`, `session expired`)
		got[l[:strings.Index(l, `,"error"`)]] = true
	}
	if !got[`{"jsonrpc":"2.0","id":7`] || !got[`{"jsonrpc":"2.0","id":8`] {
		t.Fatalf("errors for %v, want ids 7 and 8", got)
	}
	res, timeout := r.wait()
	if timeout != nil {
		t.Fatal(timeout)
	}
	if !errors.Is(res, ErrSessionExpired) {
		t.Fatalf("Run = %v, want ErrSessionExpired", res)
	}
	if n := g.http.deletes.Load(); n != 0 {
		t.Fatalf("%d DELETEs of an expired session", n)
	}
}

// TestStdioFrontGETNotAllowed: a 405 to the GET stream is not retried.
func TestStdioFrontGETNotAllowed(t *testing.T) {
	g := newGateway(t, &mcp.StreamableHTTPOptions{})
	g.http.noGET.Store(true)
	r := startBridge(t, g.url, func(c *Config) { c.ReconnectMin = time.Millisecond })
	r.send(initLine)
	r.expect(`"id":0`)
	r.send(initializedLine)
	eventually(t, "the GET stream is tried", func() bool { return g.http.gets.Load() > 0 })
	for i := range 3 {
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+1))
		r.expect(fmt.Sprintf(`"id":%d,"result"`, i+1))
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if n := g.http.gets.Load(); n != 1 {
		t.Fatalf("%d GETs, want 1 (405 must not be retried)", n)
	}
}

// TestStdioFrontUnreachable: no gateway at start fails Run at once.
func TestStdioFrontUnreachable(t *testing.T) {
	srv := httptest.NewServer(nil)
	url := srv.URL + "/mcp"
	srv.Close()
	r := startBridge(t, url, nil)
	res, timeout := r.wait()
	if timeout != nil {
		t.Fatal(timeout)
	}
	if !errors.Is(res, ErrUnreachable) {
		t.Fatalf("Run = %v, want ErrUnreachable", res)
	}
}

// TestStdioFront2026 drives the bridge with a go-sdk client of the
// 2026-07-28 era (no initialize, no session; the version in each request's
// _meta) against a stateless server, which requires the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers the bridge derives.
func TestStdioFront2026(t *testing.T) {
	g := newGateway(t, &mcp.StreamableHTTPOptions{Stateless: true})
	r := startBridge(t, g.url, nil)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r.stdout, Writer: r.stdin}, nil)
	if err != nil {
		t.Fatalf("connect through the bridge: %v", err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"name": "eve"}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError || res.Content[0].(*mcp.TextContent).Text != "hello eve" {
		t.Fatalf("echo answered %+v", res.Content[0])
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if n := g.http.deletes.Load(); n != 0 {
		t.Fatalf("%d DELETEs without a session", n)
	}
}

// TestStdioFrontPipelined: a client that writes everything at once (as a
// shell pipe does) still gets a session: what follows initialize waits
// for its answer.
func TestStdioFrontPipelined(t *testing.T) {
	g := newGateway(t, &mcp.StreamableHTTPOptions{})
	r := startBridge(t, g.url, nil)
	r.send(initLine + "\n" + initializedLine + "\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	r.stdin.Close()
	r.expect(`"id":0`, `"protocolVersion":"2025-11-25"`)
	r.expect(`"id":1`, `"name":"echo"`)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if n := g.http.deletes.Load(); n != 1 {
		t.Fatalf("%d DELETEs, want 1", n)
	}
}
