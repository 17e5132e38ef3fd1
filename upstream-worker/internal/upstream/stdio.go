package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The worker's side of MCP's stdio transport (spec, basic/transports,
// "stdio"): the upstream is a child process; each JSON-RPC message is one
// line on its stdin (ours) or stdout (its), with no embedded newlines.
//
// stdioTransport does what mcp.CommandTransport does (go-sdk v1.8.0,
// mcp/cmd.go and mcp/transport.go ioConn) with a reader of its own. The
// SDK's reader decodes every line three times (a json.Decoder into a raw
// message, then an attempt at a batch and a message decode, each through a
// fresh decoder that allocates and zeroes a 32 KiB buffer): 31% of a stdio
// worker's CPU in a profile of the scaling benchmark. This one checks a
// line once (json.Valid), offers it to take (pipeConn's raw responses),
// and decodes only the rest (jsonrpc.DecodeMessage), once.
//
// Behaviour kept from the SDK: a message may span lines (which the spec
// forbids but the SDK's decoder accepts), blank lines are skipped, text
// after a message on its line, invalid JSON, an undecodable message or a
// line over mcp.DefaultMaxLineLength end the connection, and so does the
// end of stdout; batches (JSON arrays) from the process are decoded into
// their messages, in order. Close closes stdin, waits up to terminate for
// the process to exit, then sends SIGTERM, waits again, and kills it. One
// difference: requests that arrive in a batch are answered one by one, not
// collected into a batch response (servers do not batch requests to
// clients in practice).

// stdioReadBuffer is the reader's buffer: a longer line is assembled in a
// separate buffer.
const stdioReadBuffer = 64 << 10

// stdioTransport starts cmd and connects to it over its stdin and stdout.
// Like any mcp.Transport it is connected once.
type stdioTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration // see stdioConn.stop
	// take, if set, is offered every message line (valid JSON, trimmed)
	// before it is decoded and reports whether it consumed the line, which
	// is only valid during the call. It runs on the reader goroutine; set
	// it before Connect.
	take func(line []byte) bool
	// conn is the connection, set by Connect.
	conn *stdioConn
}

// Connect starts the process. Errors: the pipes', and exec's when the
// process cannot start.
func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	c := &stdioConn{
		cmd: t.cmd, stdin: stdin, terminate: t.terminate, take: t.take,
		incoming: make(chan jsonrpc.Message), readDone: make(chan struct{}), closed: make(chan struct{}),
	}
	go c.readLoop(stdout)
	t.conn = c
	return c, nil
}

// stdioConn is a connection to a stdio process. Read is called by one
// goroutine at a time (the SDK's reader); Write, writeLine and Close are
// safe for concurrent use.
type stdioConn struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
	take      func([]byte) bool

	incoming chan jsonrpc.Message // unbuffered: the reader waits for Read
	readDone chan struct{}        // closed when the reader stopped; readErr set before
	readErr  error
	closed   chan struct{} // closed by Close
	once     sync.Once
	closeErr error

	wmu sync.Mutex // one message written at a time
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message for the SDK. Errors: ctx's; the reader's
// (io.EOF when the process closed its stdout, a framing or decoding error)
// once every message before it was read; io.EOF after Close.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m, nil
	case <-c.readDone:
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write encodes msg and writes it as one line. Errors: ctx's when it has
// ended, the encoder's, mcp.ErrConnectionClosed after Close, the pipe's.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(append(data, '\n'))
}

// writeLine writes line, one message and its newline, whole. Errors:
// mcp.ErrConnectionClosed after Close, the pipe's.
func (c *stdioConn) writeLine(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	_, err := c.stdin.Write(line)
	if err != nil {
		select {
		case <-c.closed: // Close cut the write short
			return mcp.ErrConnectionClosed
		default:
		}
	}
	return err
}

// Close ends the connection and the process (see stop); later calls
// return the first's result.
func (c *stdioConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.closeErr = c.stop()
	})
	return c.closeErr
}

// stop shuts the process down as the spec's stdio shutdown says: close its
// stdin, wait up to terminate for it to exit, then SIGTERM, wait again,
// then SIGKILL. It returns the process's exit error (nil on a clean exit),
// the failure to close stdin, or the failure to stop it.
func (c *stdioConn) stop() error {
	// Not under wmu: a write blocked on a process that no longer reads
	// its stdin (the pipe is full) ends only when stdin closes. Writes
	// that start after Close see closed (set before stop).
	closeErr := c.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(c.terminate)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		if closeErr != nil {
			return fmt.Errorf("closing stdin: %w", closeErr)
		}
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("unresponsive subprocess")
}

// readLoop reads the process's stdout until it ends, a message is
// malformed, or the connection closes.
func (c *stdioConn) readLoop(stdout io.Reader) {
	lr := lineReader{br: bufio.NewReaderSize(stdout, stdioReadBuffer), limit: mcp.DefaultMaxLineLength}
	for {
		line, err := lr.next()
		if err == nil && c.take != nil && c.take(line) {
			continue
		}
		var msgs []jsonrpc.Message
		if err == nil {
			msgs, err = decodeLine(bytes.Clone(line))
		}
		if err != nil {
			c.readErr = err
			close(c.readDone)
			return
		}
		for _, m := range msgs {
			select {
			case c.incoming <- m:
			case <-c.closed:
				return
			}
		}
	}
}

// decodeLine decodes a message line: one message, or a batch (a JSON
// array) of them. The messages may keep parts of line.
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	if line[0] != '[' {
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{m}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, r := range raws {
		m, err := jsonrpc.DecodeMessage(r)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// errLineTooLong ends a connection whose process wrote a message over
// mcp.DefaultMaxLineLength.
var errLineTooLong = fmt.Errorf("message over %d bytes", mcp.DefaultMaxLineLength)

// lineReader splits a stdio stream into messages.
type lineReader struct {
	br    *bufio.Reader
	limit int
	acc   []byte // a message assembled from several reads or lines
}

// next returns the next message, trimmed of surrounding whitespace and
// valid JSON; it is valid until the next call. Errors: io.EOF at the end
// of the stream between messages, io.ErrUnexpectedEOF inside one,
// errLineTooLong, a *json.SyntaxError for invalid JSON, and an error for
// text after a message on its line.
func (lr *lineReader) next() ([]byte, error) {
	lr.acc = lr.acc[:0]
	for {
		frag, err := lr.br.ReadSlice('\n')
		if len(lr.acc)+len(frag) > lr.limit {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			lr.acc = append(lr.acc, frag...)
			continue
		}
		line := frag
		if len(lr.acc) > 0 {
			lr.acc = append(lr.acc, frag...)
			line = lr.acc
		}
		if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if json.Valid(msg) {
				return msg, nil
			}
			if cerr := incomplete(msg); cerr != nil {
				return nil, cerr
			}
			if err != nil { // the stream ended inside a message
				return nil, io.ErrUnexpectedEOF
			}
			if len(lr.acc) == 0 {
				lr.acc = append(lr.acc, frag...)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		lr.acc = lr.acc[:0] // a blank line
	}
}

// incomplete returns nil if msg (not valid JSON) is the start of a JSON
// value, which more lines may complete; otherwise why it is not.
func incomplete(msg []byte) error {
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(msg)).Decode(&v)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil
	case err == nil:
		return errors.New("invalid trailing data after a message")
	}
	return err
}
