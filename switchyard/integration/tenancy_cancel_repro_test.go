package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestIntegrationCancelDuringUpstreamHandshake: a client cancels its first
// call while the worker is still opening the client session's dedicated
// upstream session, past initialize, in the go-sdk client's standalone SSE
// GET. The call's cancellation ends the session's lifetime; the go-sdk's
// connectSSE runs on a context detached from Connect's and retried a
// failed GET MaxRetries (5) times with backoff (13 to 26 s in all), which
// held the cancelled call in flight on the worker (its shutdown waited for
// it) and made the session's next call wait for that dial. The worker now
// answers a GET of an ended session with 405 (no standalone stream), and
// the SDK stops at once (upstream-worker/internal/upstream/dial.go,
// endedGET). Found by the tenancy limits tests (an intermittent "gateway
// did not stop within 20s of cancel").
func TestIntegrationCancelDuringUpstreamHandshake(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow-get", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	// Once armed, the next standalone GET hangs without an answer: the
	// worker's Connect of a new session stays in its SSE phase.
	var armed atomic.Bool
	getArrived := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && armed.CompareAndSwap(true, false) {
			getArrived <- struct{}{}
			<-r.Context().Done()
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	g := startGateway(t, loadConfig(t, fmt.Sprintf("call_timeout: 60s\nupstreams:\n  - name: up\n    url: %s\n", ts.URL)))
	probe := connect(t, g.url+"/mcp", v2025, nil)
	eventually(t, 20*time.Second, func() error {
		names, _, err := listAll(t.Context(), probe)
		if err != nil {
			return err
		}
		return hasAll(names, "up__ping")
	})

	cs := connect(t, g.url+"/mcp", v2025, nil) // a new client session: its first call dials
	armed.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__ping"})
		first <- err
	}()
	select {
	case <-getArrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not open a session for the client's first call")
	}
	cancel()
	<-first

	// The session's next call should not wait for the abandoned handshake.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel2()
	start := time.Now()
	res, err := cs.CallTool(ctx2, &mcp.CallToolParams{Name: "up__ping"})
	if err != nil || text(res) != "pong" {
		t.Fatalf("the next call of the session after %s: %v %+v", time.Since(start).Round(time.Millisecond), err, res)
	}
}
