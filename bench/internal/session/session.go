// Package session opens the benchmark driver's MCP client sessions (the
// official go-sdk client over streamable HTTP) and wraps the requests the
// driver measures as [Op] values.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol versions the driver can ask for.
const (
	// Protocol2025 is the stateful, session-based era.
	Protocol2025 = "2025-11-25"
	// Protocol2026 is the stateless era.
	Protocol2026 = "2026-07-28"
)

// MaxIdleConnsPerHost is set on each session's HTTP transport: every
// streamable call is its own POST, and Go's default of 2 would make
// concurrent calls dial new connections.
const MaxIdleConnsPerHost = 64

// ErrToolError is returned (wrapped) by a [CallTool] op when the result has
// IsError set.
var ErrToolError = errors.New("session: tool returned isError")

// ErrCachedList is returned by a [ListTools] op when the server marks its
// list result cacheable (ttlMs > 0): the SDK client would then answer later
// listings from its cache and the measurement would be meaningless.
var ErrCachedList = errors.New("session: server set ttlMs on tools/list, the client cache would answer")

// Session is one MCP client session with its own HTTP connection pool.
// Like [mcp.ClientSession] it is safe for concurrent use.
type Session struct {
	*mcp.ClientSession
	transport *http.Transport
}

// Dial connects to the streamable HTTP endpoint url, asking for protocol
// (empty means the SDK's latest), with SSE reconnection retries off. The
// session gets a new http.Transport of its own (a clone of the default
// with [MaxIdleConnsPerHost]).
func Dial(ctx context.Context, url, protocol string) (*Session, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	client := mcp.NewClient(&mcp.Implementation{Name: "switchyard-bench", Version: "v0"}, nil)
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return &Session{ClientSession: cs, transport: tr}, nil
}

// Protocol returns the protocol version the session negotiated.
func (s *Session) Protocol() string {
	if ir := s.InitializeResult(); ir != nil {
		return ir.ProtocolVersion
	}
	return ""
}

// Close ends the session and closes its idle connections.
func (s *Session) Close() error {
	err := s.ClientSession.Close()
	s.transport.CloseIdleConnections()
	return err
}

// Op performs one measured request. An Op built for one session must not be
// run concurrently with itself (it reuses its request parameters).
type Op func(ctx context.Context) error

// CallTool returns an Op calling tool name with args, a JSON object (nil
// means {}). A result with IsError set fails with [ErrToolError].
func CallTool(cs *mcp.ClientSession, name string, args json.RawMessage) Op {
	return CallToolWith(cs, name, args, CallOptions{})
}

// CallOptions extend a [CallToolWith] op.
type CallOptions struct {
	// Meta is sent as the request's _meta; nil sends none.
	Meta mcp.Meta
	// Result, if not nil, is called with every successful result (IsError
	// unset) before the op returns, on the op's goroutine.
	Result func(*mcp.CallToolResult)
}

// CallToolWith is [CallTool] with options.
func CallToolWith(cs *mcp.ClientSession, name string, args json.RawMessage, o CallOptions) Op {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcp.CallToolParams{Meta: o.Meta, Name: name, Arguments: args}
	return func(ctx context.Context) error {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%w: %s", ErrToolError, firstText(res))
		}
		if o.Result != nil {
			o.Result(res)
		}
		return nil
	}
}

// Spread returns the endpoint of connection i when connections are spread
// round robin over urls (the edges of a cluster): urls[i mod len(urls)].
// It returns "" when urls is empty.
func Spread(urls []string, i int) string {
	if len(urls) == 0 {
		return ""
	}
	return urls[i%len(urls)]
}

// ListTools returns an Op listing every tool, following cursors to the last
// page. It fails with [ErrCachedList] if the server makes the list
// cacheable.
func ListTools(cs *mcp.ClientSession) Op {
	params := new(mcp.ListToolsParams) // reused: the op allocates nothing of its own
	return func(ctx context.Context) error {
		params.Cursor = ""
		return listPages(ctx, cs, params, nil)
	}
}

// Tools returns every tool the session's server lists, across all pages.
func Tools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	err := listPages(ctx, cs, new(mcp.ListToolsParams), func(page []*mcp.Tool) { tools = append(tools, page...) })
	return tools, err
}

// listPages pages through tools/list from params.Cursor, passing each
// page's tools to keep unless it is nil.
func listPages(ctx context.Context, cs *mcp.ClientSession, params *mcp.ListToolsParams, keep func([]*mcp.Tool)) error {
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return err
		}
		if res.TTLMs > 0 {
			return ErrCachedList
		}
		if keep != nil {
			keep(res.Tools)
		}
		if res.NextCursor == "" {
			return nil
		}
		params.Cursor = res.NextCursor
	}
}

// firstText returns the start of res's first text content, for messages.
func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if len(tc.Text) > 200 {
				return tc.Text[:200] + "..."
			}
			return tc.Text
		}
	}
	return "(no text content)"
}
