package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

func serve(t *testing.T, s *mcp.Server, stateless bool) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func dial(t *testing.T, url, protocol string) *session.Session {
	t.Helper()
	s, err := session.Dial(t.Context(), url, protocol)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSessionCallTool(t *testing.T) {
	s := dial(t, serve(t, fixture.NewServer(fixture.Options{}), false), session.Protocol2025)
	if p := s.Protocol(); p != session.Protocol2025 {
		t.Errorf("Protocol = %q", p)
	}
	for _, tc := range []struct {
		tool    string
		args    json.RawMessage
		wantErr error
	}{
		{"echo", json.RawMessage(`{"text":"hi"}`), nil},
		{"echo", nil, nil},
		{"fail", json.RawMessage(`{"reason":"r"}`), session.ErrToolError},
	} {
		op := session.CallTool(s.ClientSession, tc.tool, tc.args)
		for range 2 { // an op is reusable
			if err := op(t.Context()); !errors.Is(err, tc.wantErr) {
				t.Errorf("%s(%s) = %v, want %v", tc.tool, tc.args, err, tc.wantErr)
			}
		}
	}
	if err := session.CallTool(s.ClientSession, "nope", nil)(t.Context()); err == nil {
		t.Error("unknown tool succeeded")
	}
}

// pagedServer lists n tools, two per page; cacheable sets a TTL on lists.
func pagedServer(n int, cacheable bool) *mcp.Server {
	o := &mcp.ServerOptions{PageSize: 2}
	if cacheable {
		o.SetCacheable = func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 60_000 }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "paged", Version: "v0"}, o)
	for i := range n {
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	return s
}

func TestSessionListTools(t *testing.T) {
	s := dial(t, serve(t, pagedServer(5, false), false), session.Protocol2025)
	tools, err := session.Tools(t.Context(), s.ClientSession)
	if err != nil || len(tools) != 5 {
		t.Fatalf("Tools = %d tools, %v; want 5 across pages", len(tools), err)
	}
	if err := session.ListTools(s.ClientSession)(t.Context()); err != nil {
		t.Errorf("ListTools op: %v", err)
	}
}

func TestSessionListToolsCacheable(t *testing.T) {
	s := dial(t, serve(t, pagedServer(1, true), true), session.Protocol2026)
	if p := s.Protocol(); p != session.Protocol2026 {
		t.Fatalf("Protocol = %q, want %s", p, session.Protocol2026)
	}
	if err := session.ListTools(s.ClientSession)(t.Context()); !errors.Is(err, session.ErrCachedList) {
		t.Errorf("ListTools op = %v, want ErrCachedList", err)
	}
}

func TestSessionDialError(t *testing.T) {
	if _, err := session.Dial(t.Context(), "http://127.0.0.1:1/mcp", session.Protocol2025); err == nil {
		t.Error("Dial to a closed port succeeded")
	}
}

func TestSessionCallToolWith(t *testing.T) {
	var seenMeta any
	s := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: "m", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			seenMeta = req.Params.Meta["k"]
			return &mcp.CallToolResult{Meta: mcp.Meta{"back": 7}}, nil
		})
	sess := dial(t, serve(t, s, false), session.Protocol2025)
	var got *mcp.CallToolResult
	op := session.CallToolWith(sess.ClientSession, "m", nil, session.CallOptions{
		Meta:   mcp.Meta{"k": true},
		Result: func(r *mcp.CallToolResult) { got = r },
	})
	if err := op(t.Context()); err != nil {
		t.Fatalf("op: %v", err)
	}
	if seenMeta != true {
		t.Errorf("server saw _meta k = %v, want true", seenMeta)
	}
	if got == nil || got.Meta["back"] != float64(7) {
		t.Errorf("result callback got %+v", got)
	}
}

func TestSessionSpread(t *testing.T) {
	urls := []string{"a", "b", "c"}
	var order []string
	count := map[string]int{}
	for i := range 64 {
		u := session.Spread(urls, i)
		if i < 6 {
			order = append(order, u)
		}
		count[u]++
	}
	if fmt.Sprint(order) != "[a b c a b c]" {
		t.Errorf("first connections go to %v, want a b c a b c", order)
	}
	if count["a"] != 22 || count["b"] != 21 || count["c"] != 21 {
		t.Errorf("64 connections over 3 edges: %v, want 22/21/21", count)
	}
	if session.Spread([]string{"only"}, 5) != "only" || session.Spread(nil, 0) != "" {
		t.Error("Spread over one or no URL")
	}
}
