// Package lenient is a test fixture: an MCP server over streamable HTTP
// that reads requests the way servers built on Go's encoding/json read
// them (mark3labs/mcp-go among them). encoding/json matches JSON member
// names to struct fields without regard to letter case and keeps the last
// of duplicate members, so {"name":"a","Name":"b"} names b here. A gateway
// that checks a, and forwards the params as sent, has this server run b.
//
// The server answers tools/call, prompts/get, resources/read and
// completion/complete itself, decoding each request with encoding/json
// into structs, and records what it ran, read or completed ([Server.Ran]).
// Everything else (initialize, the lists, notifications, the GET stream,
// DELETE) goes to a go-sdk server that lists the same tools, prompts and
// resources, so a gateway's client sees an ordinary upstream.
package lenient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalog is what the server lists: tool and prompt names, resource URIs.
type Catalog struct {
	Tools, Prompts, Resources []string
}

// Server is a running lenient upstream. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the streamable HTTP endpoint.
	URL string

	hs *httptest.Server

	mu  sync.Mutex
	ran []string // guarded by mu: "<method> <target>", in order
}

// Start runs a server listing c on a loopback port until the test ends.
func Start(t testing.TB, c Catalog) *Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "lenient", Version: "1"}, nil)
	s := &Server{}
	for _, name := range c.Tools {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				s.note("tools/call " + name) // not reached: tools/call is answered below
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
			})
	}
	for _, name := range c.Prompts {
		srv.AddPrompt(&mcp.Prompt{Name: name, Arguments: []*mcp.PromptArgument{{Name: "a"}}},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				s.note("prompts/get " + name)
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name}}}}, nil
			})
	}
	for _, uri := range c.Resources {
		srv.AddResource(&mcp.Resource{Name: uri, URI: uri},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				s.note("resources/read " + uri)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: uri}}}, nil
			})
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && s.answer(w, r) {
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.URL, s.hs = hs.URL+"/mcp", hs
	return s
}

// Close stops the server: its connections are closed and its port no
// longer accepts any. Safe to call more than once.
func (s *Server) Close() {
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Ran returns what the server ran so far, in order: "tools/call <name>",
// "prompts/get <name>", "resources/read <uri>", "completion/complete
// <prompt name or resource uri>".
func (s *Server) Ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ran...)
}

func (s *Server) note(what string) {
	s.mu.Lock()
	s.ran = append(s.ran, what)
	s.mu.Unlock()
}

// request is a JSON-RPC request as encoding/json reads it into structs.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
		Ref  struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
	} `json:"params"`
}

// answer serves the POST r itself if its body is one of the requests the
// server decodes leniently, and reports whether it did; otherwise the
// body is restored for the go-sdk handler.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read failed", http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req request
	if json.Unmarshal(body, &req) != nil || len(req.ID) == 0 {
		return false
	}
	var result any
	switch p := req.Params; req.Method {
	case "tools/call":
		s.note("tools/call " + p.Name)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + p.Name}}}
	case "prompts/get":
		s.note("prompts/get " + p.Name)
		result = map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": p.Name}}}}
	case "resources/read":
		s.note("resources/read " + p.URI)
		result = map[string]any{"contents": []any{map[string]any{"uri": p.URI, "text": p.URI}}}
	case "completion/complete":
		target := p.Ref.Name
		if p.Ref.Type == "ref/resource" {
			target = p.Ref.URI
		}
		s.note("completion/complete " + target)
		result = map[string]any{"completion": map[string]any{"values": []string{target}}}
	default:
		return false
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	if err != nil {
		panic(fmt.Sprintf("lenient: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	return true
}
