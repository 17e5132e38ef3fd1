package stdiofront

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// JSON-RPC error codes the bridge answers with itself.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeInternalError  = -32603
)

// metaProtocolVersion is the params._meta key of the 2026-07-28 era that
// names the request's protocol version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// clientMsg is one stdin message, read in place.
type clientMsg struct {
	raw     []byte // the line, forwarded byte for byte
	id      []byte // the raw id; nil when absent (a notification)
	method  string // "" for a response
	version string // params._meta protocol version, if any
	name    string // params.name (tools/call, prompts/get) or params.uri (resources/read)
}

// isRequest reports whether the client waits for an answer to m.
func (m *clientMsg) isRequest() bool { return m.method != "" && m.id != nil }

// parseClientMsg reads the top-level members of one stdin line. For a line
// the bridge cannot forward it returns the JSON-RPC error to write instead.
func parseClientMsg(line []byte) (*clientMsg, []byte) {
	if !json.Valid(line) {
		return nil, errorLine(nil, CodeParseError, "Parse error: the stdin line is not JSON")
	}
	m := &clientMsg{raw: line}
	var params, method []byte
	var reply bool
	isObject := jsonscan.Members(line, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "id"):
			m.id = v
		case jsonscan.KeyIs(k, "method"):
			method = v
		case jsonscan.KeyIs(k, "params"):
			params = v
		case jsonscan.KeyIs(k, "result"), jsonscan.KeyIs(k, "error"):
			reply = true
		}
	})
	switch {
	case !isObject:
		return nil, errorLine(nil, CodeInvalidRequest, "Invalid Request: not a JSON-RPC message object (batches are not supported)")
	case m.id != nil && !scalarID(m.id):
		return nil, errorLine(nil, CodeInvalidRequest, "Invalid Request: id must be a string, a number or null")
	case method != nil && method[0] != '"':
		return nil, errorLine(m.id, CodeInvalidRequest, "Invalid Request: method must be a string")
	case method == nil && (!reply || m.id == nil):
		return nil, errorLine(m.id, CodeInvalidRequest, "Invalid Request: neither a request, a notification nor a response")
	}
	if method != nil {
		m.method = jsonscan.Unquote(method)
		if m.method == "" {
			return nil, errorLine(m.id, CodeInvalidRequest, "Invalid Request: empty method")
		}
	}
	if len(params) > 0 && params[0] == '{' {
		nameKey := "name"
		if m.method == "resources/read" {
			nameKey = "uri"
		}
		jsonscan.Members(params, func(k, v []byte) {
			switch {
			case jsonscan.KeyIs(k, "_meta") && v[0] == '{':
				jsonscan.Members(v, func(k, v []byte) {
					if jsonscan.KeyIs(k, metaProtocolVersion) && v[0] == '"' {
						m.version = jsonscan.Unquote(v)
					}
				})
			case jsonscan.KeyIs(k, nameKey) && v[0] == '"':
				m.name = jsonscan.Unquote(v)
			}
		})
	}
	return m, nil
}

// serverMsg is what the bridge reads of one message from the gateway.
type serverMsg struct {
	id        []byte
	hasMethod bool
	result    []byte
	errorVal  []byte
}

func parseServerMsg(msg []byte) (serverMsg, bool) {
	var s serverMsg
	ok := jsonscan.Members(msg, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "id"):
			s.id = v
		case jsonscan.KeyIs(k, "method"):
			s.hasMethod = true
		case jsonscan.KeyIs(k, "result"):
			s.result = v
		case jsonscan.KeyIs(k, "error"):
			s.errorVal = v
		}
	})
	return s, ok
}

// isResponse reports whether s answers a request.
func (s serverMsg) isResponse() bool { return !s.hasMethod && (s.result != nil || s.errorVal != nil) }

// resultProtocolVersion returns result.protocolVersion of an initialize
// result, or "".
func resultProtocolVersion(result []byte) string {
	var v string
	if len(result) > 0 && result[0] == '{' {
		jsonscan.Members(result, func(k, val []byte) {
			if jsonscan.KeyIs(k, "protocolVersion") && val[0] == '"' {
				v = jsonscan.Unquote(val)
			}
		})
	}
	return v
}

// scalarID reports whether the raw JSON value is a valid JSON-RPC id.
func scalarID(v []byte) bool {
	switch v[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return string(v) == "null"
}

// idKey identifies a raw id for matching a response to its request: a
// string id by its value (escapes may differ), any other by its bytes.
func idKey(id []byte) string {
	if len(id) > 0 && id[0] == '"' {
		return "s" + jsonscan.Unquote(id)
	}
	return "n" + string(id)
}

// errorLine returns a JSON-RPC error response for the raw id (nil: null).
func errorLine(id []byte, code int, msg string) []byte {
	if id == nil {
		id = []byte("null")
	}
	q, _ := json.Marshal(msg)
	b := make([]byte, 0, 64+len(id)+len(q))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, q...)
	return append(b, "}}"...)
}

// withID returns the JSON-RPC error response errorVal (a raw error
// object) for the raw id.
func withID(id, errorVal []byte) []byte {
	b := make([]byte, 0, 48+len(id)+len(errorVal))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, errorVal...)
	return append(b, '}')
}

// oneLine returns the JSON value v on one line: compacted when it spans
// several (compaction keeps every literal, numbers included, as written).
func oneLine(v []byte) ([]byte, error) {
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return v, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// lineReader splits stdin into lines of at most max bytes. A longer line is
// consumed without being held: only its id is kept, for the error reply.
type lineReader struct {
	r   *bufio.Reader
	max int
}

// stdinLine is one line of stdin: either the message or, for a line over
// the limit, tooLong with the id it carried (nil: none found).
type stdinLine struct {
	msg     []byte
	tooLong bool
	id      []byte
}

// next returns the next non-blank line, without its terminator. It returns
// io.EOF once stdin has ended; a last line without a newline counts.
func (lr *lineReader) next() (stdinLine, error) {
	for {
		l, err := lr.line()
		if err != nil || l.tooLong || len(bytes.TrimSpace(l.msg)) > 0 {
			return l, err
		}
	}
}

func (lr *lineReader) line() (stdinLine, error) {
	var buf []byte
	var f *idFinder
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if f == nil && len(buf)+len(chunk) > lr.max+2 { // room for "\r\n"
			f = &idFinder{}
			f.feed(buf)
			buf = nil
		}
		if f != nil {
			f.feed(chunk)
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return stdinLine{}, fmt.Errorf("read stdin: %w", err)
		case err != nil && f == nil && len(buf) == 0:
			return stdinLine{}, io.EOF
		}
		if f != nil {
			return stdinLine{tooLong: true, id: f.result()}, nil
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if len(buf) > lr.max {
			f = &idFinder{}
			f.feed(buf)
			return stdinLine{tooLong: true, id: f.result()}, nil
		}
		return stdinLine{msg: buf}, nil
	}
}

// maxIDBytes bounds the id idFinder keeps: longer ids are not reported.
const maxIDBytes = 1024

// idFinder finds the raw value of the top-level "id" member of a JSON
// object fed to it in pieces, in constant memory (the last one, as
// encoding/json would). It does not validate: result checks what it kept.
type idFinder struct {
	depth     int
	inStr     bool
	esc       bool
	expectKey bool   // a string at depth 1 now would be a key
	inKey     bool   // reading a key at depth 1
	key       []byte // its raw bytes, quotes included, up to maxKey
	keyOver   bool
	isID      bool // the last key at depth 1 was "id"
	capturing bool // reading the id's value
	val       []byte
	valOver   bool
	found     []byte
}

// maxKey bounds the raw bytes of a key that may denote "id" ("\u0069\u0064").
const maxKey = 16

func (f *idFinder) feed(p []byte) {
	for _, c := range p {
		f.step(c)
	}
}

func (f *idFinder) step(c byte) {
	if f.inStr {
		if f.capturing {
			f.keep(c)
		}
		if f.inKey {
			if len(f.key) < maxKey {
				f.key = append(f.key, c)
			} else {
				f.keyOver = true
			}
		}
		switch {
		case f.esc:
			f.esc = false
		case c == '\\':
			f.esc = true
		case c == '"':
			f.inStr = false
			if f.inKey {
				f.inKey = false
				f.isID = !f.keyOver && jsonscan.KeyIs(f.key, "id")
			}
		}
		return
	}
	if f.depth == 1 && f.capturing && (c == ',' || c == '}') {
		f.capturing = false
		f.found = nil
		if !f.valOver {
			f.found = append([]byte(nil), bytes.TrimSpace(f.val)...)
		}
	}
	if f.capturing {
		f.keep(c)
	}
	switch c {
	case '"':
		f.inStr = true
		if f.depth == 1 && f.expectKey {
			f.expectKey = false
			f.inKey = true
			f.key = append(f.key[:0], c)
			f.keyOver = false
		}
	case '{', '[':
		f.depth++
		if f.depth == 1 {
			f.expectKey = c == '{'
		}
	case '}', ']':
		f.depth--
	case ',':
		if f.depth == 1 {
			f.expectKey = true
		}
	case ':':
		if f.depth == 1 && f.isID {
			f.isID = false
			f.capturing = true
			f.val = f.val[:0]
			f.valOver = false
		}
	}
}

func (f *idFinder) keep(c byte) {
	if len(f.val) < maxIDBytes {
		f.val = append(f.val, c)
	} else {
		f.valOver = true
	}
}

// result returns the id found, if it is a valid JSON-RPC id.
func (f *idFinder) result() []byte {
	if len(f.found) == 0 || !json.Valid(f.found) || !scalarID(f.found) {
		return nil
	}
	return f.found
}
