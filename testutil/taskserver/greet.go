package taskserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GreetHandler returns a stateless go-sdk streamable-HTTP MCP handler with
// one sync tool, greet {name} -> "Hello, {name}!": the handler to wrap when
// there is no other upstream. Wrap it with [Options].Greet false.
func GreetHandler() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "switchyard-tasks-fixture", Version: "1.0.0"}, nil)
	type greetArgs struct {
		Name string `json:"name" jsonschema:"the name to greet"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Returns Hello, {name}! synchronously."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true})
}
