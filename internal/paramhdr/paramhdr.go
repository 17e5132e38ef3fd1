// Package paramhdr implements the SEP-2243 parameter headers of MCP
// 2026-07-28: a tool whose input-schema property is annotated
// "x-mcp-header": "<Name>" has that argument mirrored by the client into an
// Mcp-Param-<Name> header of every tools/call, so intermediaries can route
// on it without reading the body. Servers reject a call whose headers do
// not match its arguments with HTTP 400 and JSON-RPC -32020 (header
// mismatch). The rules follow go-sdk v1.8.0 (mcp/streamable_headers.go),
// which both ends of a gateway are measured against.
package paramhdr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// Prefix starts every parameter header name.
const Prefix = "Mcp-Param-"

// CodeHeaderMismatch is the JSON-RPC error of a call whose headers do not
// match its body.
const CodeHeaderMismatch = -32020

const b64Prefix, b64Suffix = "=?base64?", "?="

// Binding maps a (possibly nested) argument to the header that carries it.
type Binding struct {
	Path   []string
	Header string // canonical, with the prefix
}

type schemaProperty struct {
	Type       string                    `json:"type"`
	XMCPHeader json.RawMessage           `json:"x-mcp-header,omitempty"`
	Properties map[string]schemaProperty `json:"properties,omitempty"`
}

// Bindings returns the header bindings of one tool (a raw tool object):
// nil when it has none, or when its annotations are invalid (the go-sdk
// drops such a tool from its tools/list).
func Bindings(tool []byte) []Binding {
	if !bytes.Contains(tool, []byte("x-mcp-header")) { // almost no tool has one
		return nil
	}
	var t struct {
		InputSchema schemaProperty `json:"inputSchema"`
	}
	if json.Unmarshal(tool, &t) != nil {
		return nil
	}
	props := t.InputSchema.Properties
	if len(props) == 0 || !validAnnotations(props, map[string]bool{}) {
		return nil
	}
	return collect(props, nil, nil)
}

func collect(props map[string]schemaProperty, prefix []string, out []Binding) []Binding {
	for name, p := range props {
		path := append(append(make([]string, 0, len(prefix)+1), prefix...), name)
		var h string
		if json.Unmarshal(p.XMCPHeader, &h) == nil && h != "" {
			out = append(out, Binding{Path: path, Header: http.CanonicalHeaderKey(Prefix + h)})
		}
		if len(p.Properties) > 0 {
			out = collect(p.Properties, path, out)
		}
	}
	return out
}

// validAnnotations: annotated properties are primitive, header names are
// non-empty tokens, unique case-insensitively across the schema.
func validAnnotations(props map[string]schemaProperty, seen map[string]bool) bool {
	for _, p := range props {
		if p.XMCPHeader != nil {
			if p.Type != "string" && p.Type != "integer" && p.Type != "boolean" {
				return false
			}
			var h string
			if json.Unmarshal(p.XMCPHeader, &h) != nil || h == "" || !isToken(h) {
				return false
			}
			if seen[strings.ToLower(h)] {
				return false
			}
			seen[strings.ToLower(h)] = true
		}
		if len(p.Properties) > 0 && !validAnnotations(p.Properties, seen) {
			return false
		}
	}
	return true
}

func isToken(s string) bool {
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

// Values returns the header values a client sends for args (the raw
// arguments object).
func Values(bindings []Binding, args json.RawMessage) map[string]string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return nil
	}
	var out map[string]string
	for _, b := range bindings {
		v, ok := lookup(obj, b.Path)
		if !ok || string(v) == "null" {
			continue
		}
		s, ok := primitive(v)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[b.Header] = Encode(s)
	}
	return out
}

// Validate checks the parameter headers h of a tools/call whose arguments
// are args against bindings, as a server must; the error says what does
// not match.
//
// An argument on a binding's path that the arguments give twice, or also
// under another name that differs only in letter case, '_' or '-', is a
// mismatch too: the header matches one of them, and the upstream's
// decoder may read the other (Go's encoding/json keeps the last and
// matches struct fields case-insensitively).
func Validate(bindings []Binding, h http.Header, args json.RawMessage) error {
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(args, &obj) // absent or not an object: no argument is present
	for _, b := range bindings {
		if p, twice := givenTwice(args, b.Path); twice {
			return fmt.Errorf("header mismatch: parameter %q is given more than once (names that differ only in letter case, \"_\" or \"-\" are the same parameter)", p)
		}
		got := h.Get(b.Header)
		v, ok := lookup(obj, b.Path)
		if !ok || string(v) == "null" {
			if got != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent or null parameter %q", b.Header, strings.Join(b.Path, "."))
			}
			continue
		}
		if got == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %q", b.Header, strings.Join(b.Path, "."))
		}
		decoded, ok := decode(got)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", b.Header)
		}
		if !equal(decoded, v) {
			return fmt.Errorf("header mismatch: %s header value %q does not match body value", b.Header, got)
		}
	}
	return nil
}

// givenTwice reports whether the objects along path in args (raw JSON)
// give one of its members more than once, exactly or loosely (see
// jsonscan.LooseEqual), and which: the path up to it, dotted.
func givenTwice(args []byte, path []string) (string, bool) {
	cur := args
	for i, part := range path {
		if len(cur) == 0 || cur[0] != '{' {
			return "", false
		}
		var next []byte
		n, exact := 0, false
		jsonscan.Members(cur, func(k, v []byte) {
			if jsonscan.LooseEqual(k, part) {
				n++
				if jsonscan.KeyIs(k, part) {
					next, exact = v, true
				}
			}
		})
		if n > 1 || (n == 1 && !exact) {
			return strings.Join(path[:i+1], "."), true
		}
		cur = bytes.TrimSpace(next)
	}
	return "", false
}

func lookup(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[part]
	}
	return cur, ok
}

const maxSafe = 1<<53 - 1

// primitive formats a string, a boolean or an integer within the
// JavaScript safe range; anything else carries no header.
func primitive(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || v < -maxSafe || v > maxSafe {
			return "", false
		}
		return strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// equal compares a decoded header value with the body's value: numbers as
// safe integers, other primitives by their text.
func equal(header string, body json.RawMessage) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	if n, ok := v.(float64); ok {
		h, err := strconv.ParseFloat(header, 64)
		return err == nil && h == math.Trunc(h) && math.Abs(h) <= maxSafe && h == n && n == math.Trunc(n)
	}
	want, ok := primitive(body)
	return ok && header == want
}

// Encode wraps a value that is not plain printable ASCII (or has
// surrounding blanks, or looks like a wrapped value) as =?base64?…?=.
func Encode(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for _, c := range s {
		if c < 0x20 || c > 0x7E {
			plain = false
		}
	}
	if strings.HasPrefix(s, b64Prefix) && strings.HasSuffix(s, b64Suffix) {
		plain = false
	}
	if plain {
		return s
	}
	return b64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + b64Suffix
}

// Decode returns the value a header carries: the text of a =?base64?…?=
// wrapped value, else the value itself; ok is false for a wrapped value
// that is not valid base64. Surrounding blanks (RFC 9110 OWS) are dropped
// first.
func Decode(v string) (string, bool) { return decode(strings.Trim(v, " \t")) }

func decode(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, b64Prefix); ok {
		if enc, ok = strings.CutSuffix(enc, b64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			return string(b), err == nil
		}
	}
	return v, true
}
