package upstream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The raw request path of stdio sessions.
//
// The SDK's ClientSession still owns the process's connection: it runs the
// handshake, pings, lists and answers the server's requests. A tools/call
// (or another forwarded request) skips its jsonrpc2 call machinery and
// typed encode/decode: the
// request is written straight on the connection the SDK reads from
// (pipeConn, the outermost wrapper of the transport's mcp.Connection), and
// pipeConn.Read takes the response out of the SDK's message stream. Our
// request ids are strings "sy-<n>", a different JSON-RPC id space from the
// SDK client's integer ids, so every response with such an id is ours.
// The SDK's stdio connection serializes writes with a mutex (go-sdk
// v1.8.0, mcp/transport.go ioConn.Write), so our writes and the SDK's
// interleave safely; reads stay on the SDK's single reader goroutine.

// pipeTransport wraps a stdio transport so that its connection carries raw
// calls. Like any mcp.Transport it is connected once; conn is set by
// Connect, which the SDK calls synchronously inside Client.Connect.
type pipeTransport struct {
	inner mcp.Transport
	// route may take a message from the upstream before the SDK sees it
	// (routeConn), reporting whether it did.
	route func(mcp.Connection, *jsonrpc.Request) bool
	conn  *pipeConn
}

func (t *pipeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &pipeConn{Connection: c, route: t.route, pending: map[uint64]chan pipeResult{}}
	return t.conn, nil
}

// pipeConn is one session's connection with its pending raw calls. Close
// and SessionID pass through.
type pipeConn struct {
	mcp.Connection
	route func(mcp.Connection, *jsonrpc.Request) bool // nil: everything goes to the SDK
	// meta and head are set once the handshake is done, before the session
	// is published: the _meta members the SDK client adds to every request
	// on a 2026-07-28+ session, and the same without clientCapabilities
	// (see rawConn).
	meta, head []byte

	seq atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan pipeResult // guarded by mu: raw calls awaiting their response, by n of "sy-<n>"
	err     error                      // guarded by mu: set when the connection ended; pending is nil then
}

// pipeResult is what a raw call receives: the response, or the failure of
// the connection.
type pipeResult struct {
	resp *jsonrpc.Response
	err  error
}

// Read passes every message to the SDK except the responses to raw calls,
// which go to their callers, and the messages route relays. A read error (the process exited, its stdout
// closed, a line over the SDK's limit, the session's lifetime ended) ends
// the connection for the SDK too, so every pending raw call fails with it.
func (c *pipeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.fail(fmt.Errorf("reading the upstream's output: %w", err))
			return msg, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			if r, isReq := msg.(*jsonrpc.Request); isReq && c.route != nil && c.route(c.Connection, r) {
				continue
			}
			return msg, nil
		}
		n, ours := rawSeq(resp.ID)
		if !ours {
			return msg, nil
		}
		// A response to an abandoned call is dropped, as the SDK drops a
		// response to no pending call.
		c.mu.Lock()
		ch := c.pending[n]
		delete(c.pending, n)
		c.mu.Unlock()
		if ch != nil {
			ch <- pipeResult{resp: resp}
		}
	}
}

// Close closes the connection and fails the pending raw calls.
func (c *pipeConn) Close() error {
	err := c.Connection.Close()
	c.fail(mcp.ErrConnectionClosed)
	return err
}

// fail ends the connection for raw calls: the pending ones get err (the
// first failure wins), later ones fail at once.
func (c *pipeConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- pipeResult{err: err}
	}
}

// forget removes the pending call n and reports whether it was still
// pending (no response or failure was delivered).
func (c *pipeConn) forget(n uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[n]
	delete(c.pending, n)
	return ok
}

// rawSeq reports whether id is in the raw calls' id space ("sy-<n>") and
// its n (0, which is never pending, when the rest is not a number).
func rawSeq(id jsonrpc.ID) (uint64, bool) {
	s, ok := id.Raw().(string)
	if !ok {
		return 0, false
	}
	rest, ok := strings.CutPrefix(s, "sy-")
	if !ok {
		return 0, false
	}
	n, _ := strconv.ParseUint(rest, 10, 64)
	return n, true
}

// pipeCall sends the request p on c and returns the raw result. Errors: the upstream's
// *jsonrpc.Error; ctx's error when it ended first (then
// notifications/cancelled goes upstream in the background, as the SDK's
// call does); otherwise a connection failure.
func (u *Upstream) pipeCall(ctx context.Context, c *pipeConn, p *rawParams) ([]byte, error) {
	n := c.seq.Add(1)
	var idBuf [24]byte
	id, err := jsonrpc.MakeID(string(strconv.AppendUint(append(idBuf[:0], "sy-"...), n, 10)))
	if err != nil { // cannot happen: a string is a valid id
		return nil, err
	}
	meta := requestMeta(p, c.head, c.meta)
	params := p.appendParams(make([]byte, 0, len(p.members)+len(p.meta)+len(meta)+16), meta)
	ch := make(chan pipeResult, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[n] = ch
	c.mu.Unlock()

	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: id, Method: p.method, Params: params}); err != nil {
		c.forget(n)
		return nil, fmt.Errorf("calling %q: %w", p.method, err)
	}
	select {
	case r := <-ch:
		switch {
		case r.err != nil:
			return nil, fmt.Errorf("calling %q: %w", p.method, r.err)
		case r.resp.Error != nil:
			return nil, fmt.Errorf("calling %q: %w", p.method, r.resp.Error)
		case r.resp.Result == nil: // the SDK's decoder rejects this message
			return nil, fmt.Errorf("calling %q: response has neither result nor error", p.method)
		}
		return r.resp.Result, nil
	case <-ctx.Done():
		if c.forget(n) {
			u.cancelPipe(ctx, c, n)
		}
		return nil, ctx.Err()
	}
}

// cancelPipe tells the upstream, in the background, that call n was
// abandoned (best effort, bounded like the SDK's).
func (u *Upstream) cancelPipe(ctx context.Context, c *pipeConn, n uint64) {
	body := make([]byte, 0, 96)
	body = append(body, `{"reason":`...)
	body = appendJSONString(body, ctx.Err().Error())
	body = strconv.AppendUint(append(body, `,"requestId":"sy-`...), n, 10)
	body = append(body, `"}`...)
	nctx := context.WithoutCancel(ctx)
	u.closer.Go(func() {
		nctx, stop := context.WithTimeout(nctx, cancelTimeout)
		defer stop()
		_ = c.Connection.Write(nctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: body})
	})
}
