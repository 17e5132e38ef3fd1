package capture

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WrapTransport returns a transport whose connection captures the results of
// calls made with a [Slot] in their context. Use it for stdio and legacy SSE
// transports, never for mcp.StreamableClientTransport (see the package doc).
// Like any mcp.Transport, the result may be connected once.
func WrapTransport(t mcp.Transport) mcp.Transport { return &transport{inner: t} }

type transport struct{ inner mcp.Transport }

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{Connection: c, tab: NewTable()}, nil
}

// conn wraps one connection; Close and SessionID pass through.
type conn struct {
	mcp.Connection
	tab *Table
}

// Write records the id of a call whose ctx carries a slot, before the
// request can reach the peer.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s := From(ctx); s != nil {
			if key, ok := keyOfID(req.ID); ok {
				c.tab.record(key, s)
			}
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Read fills the slot of a recorded call's response and substitutes its
// stub.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || c.tab.empty() {
		return msg, err
	}
	key, ok := keyOfID(resp.ID)
	if !ok {
		return msg, err
	}
	s := c.tab.take(key)
	if s == nil || resp.Error != nil {
		return msg, err
	}
	s.fill(slices.Clone(resp.Result))
	if s.stub != nil {
		resp.Result = slices.Clone(s.stub)
	}
	return msg, err
}
