package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cancelRecorder is an upstream whose tool "block" runs until it is
// cancelled; it records the notifications/cancelled it receives.
type cancelRecorder struct {
	mu        sync.Mutex
	started   int
	cancelled int
}

func (c *cancelRecorder) counts() (started, cancelled int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started, c.cancelled
}

func (c *cancelRecorder) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "canceller", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.mu.Lock()
		c.started++
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/cancelled" {
				c.mu.Lock()
				c.cancelled++
				c.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// TestIntegrationGatewayCancelsUpstream: when the gateway gives up on a
// call (its call_timeout passes, the client cancels it, the client's
// session ends, a 2026-07-28 client's request goes away), the upstream is
// sent notifications/cancelled for it and stops working on it.
func TestIntegrationGatewayCancelsUpstream(t *testing.T) {
	rec := &cancelRecorder{}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return rec.server() }, nil))
	t.Cleanup(up.Close)
	g := startGateway(t, loadConfig(t, fmt.Sprintf("upstreams:\n  - name: cx\n    url: %s\n    call_timeout: 1s\n", up.URL)))
	waitCancelled := func(t *testing.T, what string, want int) {
		t.Helper()
		eventually(t, 10*time.Second, func() error {
			if started, cancelled := rec.counts(); cancelled < want {
				return fmt.Errorf("%s: the upstream got %d cancellations for %d calls, want %d", what, cancelled, started, want)
			}
			return nil
		})
	}
	var cs *mcp.ClientSession
	eventually(t, 20*time.Second, func() error { // the upstream is catalogued
		cs = connect(t, g.url+"/mcp", v2025, nil)
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil || len(res.Tools) == 0 {
			return fmt.Errorf("tools %v: %v", res, err)
		}
		return nil
	})
	block := &mcp.CallToolParams{Name: "cx__block"}

	// The upstream's call_timeout: the client gets an error, the
	// upstream a cancellation.
	if _, err := cs.CallTool(t.Context(), block); err == nil {
		t.Fatal("a call past its call_timeout succeeded")
	}
	waitCancelled(t, "call_timeout", 1)

	// The client cancels.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := cs.CallTool(ctx, block); done <- err }()
	eventually(t, 5*time.Second, func() error {
		if started, _ := rec.counts(); started < 2 {
			return fmt.Errorf("started %d", started)
		}
		return nil
	})
	cancel()
	<-done
	waitCancelled(t, "client cancellation", 2)

	// The client's session ends with a call in flight.
	other := connect(t, g.url+"/mcp", v2025, nil)
	go func() { _, _ = other.CallTool(context.WithoutCancel(t.Context()), block) }()
	eventually(t, 5*time.Second, func() error {
		if started, _ := rec.counts(); started < 3 {
			return fmt.Errorf("started %d", started)
		}
		return nil
	})
	_ = other.Close()
	waitCancelled(t, "session end", 3)

	// A 2026-07-28 client goes away (its request's context ends).
	cs26 := connect(t, g.url+"/mcp", v2026, nil)
	ctx, cancel = context.WithCancel(t.Context())
	go func() { _, err := cs26.CallTool(ctx, block); done <- err }()
	eventually(t, 5*time.Second, func() error {
		if started, _ := rec.counts(); started < 4 {
			return fmt.Errorf("started %d", started)
		}
		return nil
	})
	cancel()
	<-done
	waitCancelled(t, "2026 request gone", 4)
}
