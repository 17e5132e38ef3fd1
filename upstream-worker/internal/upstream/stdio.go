package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
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
// forbids but the SDK's decoder accepts), blank lines are skipped, the end
// of stdout ends the connection; batches (JSON arrays) from the process
// are decoded into their messages, in order. Close closes stdin, waits up
// to terminate for the process to exit, then sends SIGTERM, waits again,
// and kills it. Differences: a line that is not a message (not JSON, text
// after a message, JSON that is not JSON-RPC) is skipped and reported,
// where the SDK ends the connection, and so is a message over the limit
// (max_message_bytes), a response among them failing only its call
// (lineReader, stdioConn.undecodable); requests that arrive in a batch
// are answered one by one, not collected into a batch response (servers
// do not batch requests to clients in practice).

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
	// is only valid during the call. It runs in Read, once every message
	// before the line was returned (see stdioConn.lines); set it before
	// Connect.
	take func(line []byte) bool
	// name is the upstream's (error messages); limit the largest message
	// read from the process, in bytes (0: mcp.DefaultMaxLineLength); skip,
	// if set, is told of each line of its stdout that is not a message
	// (lineReader.skip), also one that is JSON but not JSON-RPC
	// (skipInvalid). Set them before Connect.
	name  string
	limit int
	skip  func(reason string, head []byte)
	// diagnose, if set, is asked why the process ended when its stdout
	// did (its state once it exited): an error to fail its calls with in
	// place of io.EOF (a sandbox limit it hit), or nil.
	diagnose func(*os.ProcessState) error
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
	c := newStdioConn(t.cmd, stdin, t.terminate, t.take)
	c.name, c.skip, c.diagnose = t.name, t.skip, t.diagnose
	limit := t.limit
	if limit <= 0 {
		limit = mcp.DefaultMaxLineLength
	}
	go c.readLoop(stdout, limit)
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
	name      string                           // the upstream's
	skip      func(reason string, head []byte) // see stdioTransport
	diagnose  func(*os.ProcessState) error     // see stdioTransport

	waitOnce sync.Once
	exited   chan struct{} // closed when cmd.Wait returned; waitErr set before
	waitErr  error

	// The reader lends each message line to Read (lines), which offers it
	// to take, decodes the rest and gives it back (returned) before the
	// reader reads on. Read takes a line only when every message before it
	// was returned and Read was called again, so take sees a raw call's
	// response only once Read's caller is done with the messages before
	// it. On the reader's goroutine take would complete the call while
	// pipeConn.Read may still be routing the call's last progress or log
	// notification, which finds no call in flight then and is dropped.
	lines    chan []byte       // unbuffered: a line lent by the reader
	returned chan struct{}     // capacity 1: Read is done with the lent line
	queue    []jsonrpc.Message // Read's: the rest of a batch
	readDone chan struct{}     // closed when the reader stopped; readErr set before
	readErr  error
	closed   chan struct{} // closed by Close
	once     sync.Once
	closeErr error

	wmu sync.Mutex // one message written at a time
}

// newStdioConn returns the connection to cmd, whose stdin is stdin; start
// its reader (readLoop) on cmd's stdout.
func newStdioConn(cmd *exec.Cmd, stdin io.WriteCloser, terminate time.Duration, take func([]byte) bool) *stdioConn {
	return &stdioConn{
		cmd: cmd, stdin: stdin, terminate: terminate, take: take,
		lines: make(chan []byte), returned: make(chan struct{}, 1),
		readDone: make(chan struct{}), closed: make(chan struct{}), exited: make(chan struct{}),
	}
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message for the SDK, after offering each line to
// take. Errors: ctx's; the reader's (io.EOF when the process closed its
// stdout, a framing error) once every message before it was read; a
// decoding error, then on every call; io.EOF after Close.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case line := <-c.lines:
			var msgs []jsonrpc.Message
			var err error
			if c.take == nil || !c.take(line) {
				msgs, err = decodeLine(bytes.Clone(line))
			}
			if err != nil {
				// JSON, but not JSON-RPC (a server's JSON log line): skipped;
				// if it answers a call (an id, no method), that call fails.
				msgs = nil
				if e := c.undecodable(line); e != nil && (c.take == nil || !c.take(e)) {
					msgs, _ = decodeLine(e)
				}
			}
			c.returned <- struct{}{}
			if len(msgs) == 0 { // taken or skipped
				continue
			}
			c.queue = msgs[1:]
			return msgs[0], nil
		case <-c.readDone:
			select {
			case <-c.closed: // Close ended the reader: its error is the pipe's closing
				return nil, io.EOF
			default:
			}
			return nil, c.readErr
		case <-c.closed:
			return nil, io.EOF
		}
	}
}

// undecodable reports line (JSON that is not a JSON-RPC message) as
// skipped and returns, if it carries a response's id, an error response
// line under that id to take its place, so that the call it answers fails
// at once; nil otherwise.
func (c *stdioConn) undecodable(line []byte) []byte {
	if c.skip != nil {
		c.skip(skipInvalid, line[:min(len(line), skipHead)])
	}
	// Only a line shaped as a JSON-RPC response stands for one: a log
	// line with an "id" member of its own must not fail a request.
	shaped := false
	jsonscan.Members(line, func(k, _ []byte) {
		if jsonscan.KeyIs(k, "jsonrpc") || jsonscan.KeyIs(k, "result") || jsonscan.KeyIs(k, "error") {
			shaped = true
		}
	})
	id := responseID(line, nil)
	if !shaped || id == nil {
		return nil
	}
	return errorLine(id, proto.CodeInternal, "upstream "+c.name+" sent a response that is not JSON-RPC")
}

// errorLine is a JSON-RPC error response under id (raw), with code and msg.
func errorLine(id json.RawMessage, code int32, msg string) []byte {
	m, _ := json.Marshal(msg)
	out := make([]byte, 0, len(id)+len(m)+64)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, `,"message":`...)
	out = append(out, m...)
	return append(out, "}}"...)
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
// then SIGKILL (the signals to its whole process group), and then kills
// what is left of the group. It returns the process's exit error (nil on a clean exit),
// the failure to close stdin, or the failure to stop it.
func (c *stdioConn) stop() error {
	// Not under wmu: a write blocked on a process that no longer reads
	// its stdin (the pipe is full) ends only when stdin closes. Writes
	// that start after Close see closed (set before stop).
	closeErr := c.stdin.Close()
	exited := c.waitExit()
	wait := func() (error, bool) {
		t := time.NewTimer(c.terminate)
		defer t.Stop()
		select {
		case <-exited:
			return c.waitErr, true
		case <-t.C:
			return nil, false
		}
	}
	// Whatever ends the process, the helpers it started (its process
	// group: isolate) end with it.
	defer func() { _ = killGroup(c.cmd, syscall.SIGKILL) }()
	if err, ok := wait(); ok {
		if closeErr != nil {
			return fmt.Errorf("closing stdin: %w", closeErr)
		}
		return err
	}
	if killGroup(c.cmd, syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := killGroup(c.cmd, syscall.SIGKILL); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("unresponsive subprocess")
}

// waitExit starts waiting for the process (once) and returns the channel
// closed when it exited.
func (c *stdioConn) waitExit() <-chan struct{} {
	c.waitOnce.Do(func() {
		go func() {
			c.waitErr = c.cmd.Wait()
			close(c.exited)
		}()
	})
	return c.exited
}

// exitDiagnosis is how long, after its stdout ended, the reader waits for
// the process to exit, to tell why it did (stdioTransport.diagnose).
const exitDiagnosis = time.Second

// readLoop reads the process's stdout until it ends, a line is not a
// message, or the connection closes, lending each message line to Read.
func (c *stdioConn) readLoop(stdout io.Reader, limit int) {
	lr := lineReader{br: bufio.NewReaderSize(stdout, stdioReadBuffer), limit: limit, name: c.name, skip: c.skip}
	for {
		line, err := lr.next()
		if err != nil {
			if c.diagnose != nil && c.cmd != nil && (err == io.EOF || err == io.ErrUnexpectedEOF) {
				select {
				case <-c.waitExit():
					if derr := c.diagnose(c.cmd.ProcessState); derr != nil {
						err = derr
					}
				case <-c.closed:
				case <-time.After(exitDiagnosis):
				}
			}
			c.readErr = err
			close(c.readDone)
			return
		}
		select {
		case c.lines <- line:
		case <-c.closed:
			return
		}
		<-c.returned // line is lr's buffer: Read is done with it
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

// lineReader splits a stdio stream into messages. A line that is not
// JSON (a banner, a log line: many servers print them) or that carries
// text after its message is skipped and reported (skip), and reading goes
// on. So is a message over limit, read to its end and dropped: if it is a
// response (an id, no method), next returns in its place an error
// response under its id (code proto.CodePayloadTooLarge), so that only the
// call it answers fails.
type lineReader struct {
	br    *bufio.Reader
	limit int
	// name is the upstream's, for the message of a too-large error.
	name string
	// skip, if set, is told of each line skipped: why (skipNotJSON,
	// skipTrailing, skipTooLarge) and its first bytes.
	skip func(reason string, head []byte)
	acc  []byte // a message assembled from several reads or lines
	// lineStart is where the current line starts in acc: the lines before
	// it are the start of a message spread over lines.
	lineStart int
	// A message spread over lines is not checked whole again at each line
	// (quadratic: minutes for a pretty-printed result of 2 MB), but only
	// when it may be complete or cannot become valid (shape, which reads
	// each byte once), when it doubled since it was last checked, or when
	// the stream ended. shape is exact on valid JSON, so a complete
	// message is never passed over; an error on a later line of a message
	// is found when it doubles or ends (or the limit comes first), not at
	// that line. checked is acc's length at that last check, 0 while the
	// message is on its first line.
	checked int
	shape   shape
}

// Why a line was skipped (lineReader.skip; the metric's reason label).
const (
	skipNotJSON  = "not_json"
	skipTrailing = "text_after_message"
	skipTooLarge = "too_large"
	skipInvalid  = "not_jsonrpc"
)

// skipHead is how much of a skipped line is reported.
const skipHead = 200

// errSkipped tells next that read skipped a line (already reported).
var errSkipped = errors.New("line skipped")

// shape follows the nesting of a JSON text as it grows.
type shape struct {
	n                 int // bytes followed
	depth             int // objects and arrays open
	inString, escaped bool
	ended             bool // the outermost object or array closed
	broken            bool // invalid whatever follows: a newline in a string, text after the end, a stray close
}

// follow reads b's bytes after the ones already followed (b grows).
func (s *shape) follow(b []byte) {
	for _, c := range b[s.n:] {
		switch {
		case s.inString:
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			case c == '\n':
				s.broken = true
			}
		case c == ' ', c == '\t', c == '\r', c == '\n':
		case s.ended:
			s.broken = true
		case c == '"':
			s.inString = true
		case c == '{', c == '[':
			s.depth++
		case c == '}', c == ']':
			s.depth--
			s.ended = s.depth == 0
			s.broken = s.broken || s.depth < 0
		}
	}
	s.n = len(b)
}

// due reports whether the message in acc, found incomplete when it was
// checked shorter, is worth checking whole again.
func (lr *lineReader) due() bool {
	lr.shape.follow(lr.acc)
	s := &lr.shape
	return s.broken || s.depth <= 0 && !s.inString || len(lr.acc) >= 2*lr.checked
}

// next returns the next message, trimmed of surrounding whitespace and
// valid JSON (or an error response in place of a response over limit); it
// is valid until the next call. Lines that are not messages are skipped.
// Errors: io.EOF at the end of the stream between messages,
// io.ErrUnexpectedEOF inside one, the reader's.
func (lr *lineReader) next() ([]byte, error) {
	for {
		msg, err := lr.read()
		if err != errSkipped {
			return msg, err
		}
	}
}

// skipped reports a skipped line.
func (lr *lineReader) skipped(reason string, line []byte) error {
	if lr.skip != nil {
		line = bytes.TrimSpace(line)
		lr.skip(reason, line[:min(len(line), skipHead)])
	}
	return errSkipped
}

// read is next without its loop: errSkipped for a line skipped, or the
// error response of a response over limit.
func (lr *lineReader) read() ([]byte, error) {
	lr.acc = lr.acc[:0]
	lr.checked, lr.shape, lr.lineStart = 0, shape{}, 0
	for {
		frag, err := lr.br.ReadSlice('\n')
		if len(lr.acc)+len(frag) > lr.limit {
			return lr.overLimit(frag, err)
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
		// Evaluate the line (with the lines before it, if a message
		// spans them); once more, alone, when those turn out to be no
		// message's start.
		for {
			msg := bytes.TrimSpace(line)
			if len(msg) == 0 {
				if err != nil {
					return nil, err
				}
				lr.acc = lr.acc[:0] // a blank line
				lr.lineStart = 0
				break
			}
			if lr.lineStart > 0 {
				// A line that is a message by itself after lines that
				// cannot start one (a banner that opened a brace): those
				// are skipped, the message is read.
				cur := bytes.TrimSpace(lr.acc[lr.lineStart:])
				if len(cur) > 0 && (cur[0] == '{' || cur[0] == '[') && json.Valid(cur) &&
					incomplete(bytes.TrimSpace(lr.acc[:lr.lineStart])) != nil {
					_ = lr.skipped(skipNotJSON, lr.acc[:lr.lineStart])
					return cur, nil
				}
			}
			if lr.checked > 0 && err == nil && !lr.due() {
				lr.lineStart = len(lr.acc)
				break
			}
			if json.Valid(msg) {
				return msg, nil
			}
			if cerr := incomplete(msg); cerr != nil {
				if lr.lineStart > 0 {
					// The lines before were no message's start: skipped,
					// and this line evaluated again alone (a loop, not a
					// recursion: a server writing "{" lines forever must
					// not grow the stack).
					_ = lr.skipped(skipNotJSON, lr.acc[:lr.lineStart])
					n := copy(lr.acc, lr.acc[lr.lineStart:])
					lr.acc = lr.acc[:n]
					lr.checked, lr.shape, lr.lineStart = 0, shape{}, 0
					line = lr.acc
					continue
				}
				reason := skipNotJSON
				if cerr == errTrailing {
					reason = skipTrailing
				}
				if err != nil { // the stream ended on it
					_ = lr.skipped(reason, msg)
					return nil, err
				}
				return nil, lr.skipped(reason, msg)
			}
			if err != nil { // the stream ended inside a message
				return nil, io.ErrUnexpectedEOF
			}
			if len(lr.acc) == 0 {
				lr.acc = append(lr.acc, frag...)
			}
			lr.checked = len(lr.acc)
			lr.lineStart = len(lr.acc)
			break
		}
	}
}

// overLimit reads the rest of a line whose message is over the limit
// (frag, and err, is the read that went over), keeping its first and last
// bytes, and returns the error response that takes its place if it is a
// response, else errSkipped; the stream's end if it came first.
func (lr *lineReader) overLimit(frag []byte, err error) ([]byte, error) {
	head := append([]byte(nil), lr.acc[:min(len(lr.acc), tooLargeKeep)]...)
	if len(head) < tooLargeKeep {
		head = append(head, frag[:min(len(frag), tooLargeKeep-len(head))]...)
	}
	tail := append([]byte(nil), frag[max(0, len(frag)-tooLargeKeep):]...)
	lr.acc = lr.acc[:0]
	for err == bufio.ErrBufferFull {
		frag, err = lr.br.ReadSlice('\n')
		tail = append(tail, frag...)
		if len(tail) > 2*tooLargeKeep {
			tail = append(tail[:0], tail[len(tail)-tooLargeKeep:]...)
		}
	}
	_ = lr.skipped(skipTooLarge, head)
	if err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	id := responseID(head, bytes.TrimSpace(tail))
	if id == nil {
		return nil, errSkipped
	}
	return errorLine(id, proto.CodePayloadTooLarge,
		fmt.Sprintf("upstream %s: response of more than %d bytes (its max_message_bytes)", lr.name, lr.limit)), nil
}

// tooLargeKeep is how much of the start and the end of a message over the
// limit is kept, to find its id.
const tooLargeKeep = 4096

// responseID finds the id of the response whose message starts with head
// and ends with tail (both cut from a message too large to keep): its
// top-level "id" member, read at the start while it is whole there, or
// at the end when it is the last member (as JavaScript servers write
// {result, jsonrpc, id}). nil for a request or notification (a top-level
// "method"), or when the id is not found or not a string or number.
func responseID(head, tail []byte) json.RawMessage {
	var id json.RawMessage
	method := false
	jsonscan.Members(head, func(k, v []byte) {
		if cap(head)-cap(v)+len(v) >= len(head) {
			return // cut off by the end of head: not whole
		}
		switch {
		case jsonscan.KeyIs(k, "id"):
			id = v
		case jsonscan.KeyIs(k, "method"):
			method = true
		}
	})
	if method {
		return nil
	}
	if id == nil {
		m := tailID.FindSubmatch(tail)
		if m == nil {
			return nil
		}
		id = m[1]
	}
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil
	}
	return append(json.RawMessage(nil), id...)
}

// tailID matches a message's last member when it is its id: an object
// that ends `"id":<string or number>}` closes right after the id, so the
// id is a member of the outermost object (a nested one would close twice).
var tailID = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*)\s*}$`)

// incomplete returns nil if msg (not valid JSON) is the start of a JSON
// value, which more lines may complete; otherwise why it is not.
func incomplete(msg []byte) error {
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(msg)).Decode(&v)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil
	case err == nil:
		return errTrailing
	}
	return err
}

// errTrailing is incomplete's for a message followed by more text on its
// line.
var errTrailing = errors.New("invalid trailing data after a message")
