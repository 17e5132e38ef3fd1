package upstream

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// The raw request path of stdio sessions.
//
// The SDK's ClientSession still owns the process's connection: it runs the
// handshake, pings, lists and answers the server's requests. A tools/call
// (or another forwarded request) skips its jsonrpc2 call machinery and
// typed encode/decode: the request is written as a line of its own on the
// process's stdin (stdioConn.writeLine), and the response taken off its
// stdout by the connection's Read before anything decodes it
// (pipeConn.take), in order with the messages pipeConn.Read routes. Our
// request ids are strings "sy-<n>", a different JSON-RPC id space from the
// SDK client's integer ids, so every response with such an id is ours. A
// response take leaves alone (an error response, an unusual spelling) is
// decoded for the SDK, and pipeConn.Read takes it out of the SDK's message
// stream. stdioConn writes one message at a time, so our writes and the
// SDK's interleave safely.

// pipeTransport wraps a stdio transport so that its connection carries raw
// calls. Like any mcp.Transport it is connected once; conn is set by
// Connect, which the SDK calls synchronously inside Client.Connect.
type pipeTransport struct {
	inner mcp.Transport   // stdio wrapped (capture.WrapTransport)
	stdio *stdioTransport // the process's transport, inside inner
	// route may take a message from the upstream before the SDK sees it
	// (routeConn), reporting whether it did.
	route func(mcp.Connection, *jsonrpc.Request) bool
	conn  *pipeConn
}

func (t *pipeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pc := &pipeConn{route: t.route, pending: map[uint64]chan pipeResult{}}
	t.stdio.take = pc.take // before the reader starts
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc.Connection, pc.stdio = c, t.stdio.conn
	t.conn = pc
	return pc, nil
}

// pipeConn is one session's connection with its pending raw calls. Close
// and SessionID pass through.
type pipeConn struct {
	mcp.Connection
	stdio *stdioConn                                  // the process's connection, under Connection
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
	line := appendPipeRequest(n, p, requestMeta(p, c.head, c.meta))
	ch := make(chan pipeResult, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[n] = ch
	c.mu.Unlock()

	if err := ctx.Err(); err != nil {
		c.forget(n)
		return nil, err
	}
	if err := c.stdio.writeLine(line); err != nil {
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

// appendPipeRequest returns request n ("sy-<n>") with p's method and
// params, encoded as one stdio line. The params are valid JSON
// (newRawParams, newForwardParams), where a newline or carriage return can
// only be whitespace between tokens: each becomes a space, so the message
// stays on its line.
func appendPipeRequest(n uint64, p *rawParams, meta []byte) []byte {
	line := make([]byte, 0, 64+len(p.method)+len(p.members)+len(p.meta)+len(meta))
	line = strconv.AppendUint(append(line, `{"jsonrpc":"2.0","id":"sy-`...), n, 10)
	line = appendJSONString(append(line, `","method":`...), p.method)
	start := len(line) + len(`,"params":`)
	line = p.appendParams(append(line, `,"params":`...), meta)
	oneLine(line[start:])
	return append(line, "}\n"...)
}

// oneLine turns every newline and carriage return in b into a space.
func oneLine(b []byte) {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
}

// take consumes, in the connection's Read, a response to a raw call:
// "jsonrpc":"2.0", an id "sy-<n>" written plainly, a result other than
// null, no error or method. The result goes to call n if it is still
// pending, and is dropped otherwise (as the SDK drops a response to no
// pending call). Every other line is left to the SDK's decoding.
func (c *pipeConn) take(line []byte) bool {
	if line[0] != '{' {
		return false
	}
	var id, result, version []byte
	other := false
	jsonscan.Members(line, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "id"):
			id = v
		case jsonscan.KeyIs(k, "result"):
			result = v
		case jsonscan.KeyIs(k, "jsonrpc"):
			version = v
		case jsonscan.KeyIs(k, "error"), jsonscan.KeyIs(k, "method"):
			other = true
		}
	})
	if other || result == nil || bytes.Equal(result, jsonNull) || string(version) != `"2.0"` {
		return false
	}
	n, ok := plainRawSeq(id)
	if !ok {
		return false
	}
	c.mu.Lock()
	ch := c.pending[n]
	delete(c.pending, n)
	c.mu.Unlock()
	if ch != nil {
		ch <- pipeResult{resp: &jsonrpc.Response{Result: bytes.Clone(result)}}
	}
	return true
}

// plainRawSeq returns n of a raw JSON id written exactly "sy-<n>" (n in
// decimal digits, no escapes), and whether it is one.
func plainRawSeq(id []byte) (uint64, bool) {
	digits, ok := bytes.CutPrefix(id, []byte(`"sy-`))
	if !ok || len(digits) < 2 || digits[len(digits)-1] != '"' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(digits[:len(digits)-1]), 10, 64)
	return n, err == nil
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
