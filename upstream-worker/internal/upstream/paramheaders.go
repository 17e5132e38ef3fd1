package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// SEP-2243 parameter headers, as go-sdk v1.8.0 sends them
// (mcp/streamable_headers.go): on a session that negotiated 2026-07-28 or
// later, a tools/call carries one Mcp-Param-<Name> header for every
// argument whose input-schema property is annotated "x-mcp-header": <Name>
// and whose value is a string, a boolean or a safe integer. A server that
// knows the annotation rejects the call when the header is missing, so the
// raw call path must send them too. The SDK takes the tool definitions from
// its session's tools/list cache; the raw path takes them from the catalog
// (refreshCatalog), parsed once per fetch.

const paramHeaderPrefix = "Mcp-Param-"

// paramBinding maps a (possibly nested) argument to the header it carries.
type paramBinding struct {
	path   []string
	header string // canonical, with the prefix
}

// headerSchemaProperty is the part of a JSON schema the annotations live in
// (the SDK's own shape: a schema whose "type" is not a string, e.g. an
// array, makes the whole schema carry no bindings, as in the SDK).
type headerSchemaProperty struct {
	Type       string                          `json:"type"`
	XMCPHeader json.RawMessage                 `json:"x-mcp-header,omitempty"`
	Properties map[string]headerSchemaProperty `json:"properties,omitempty"`
}

// paramBindings returns the header bindings of every tool in tools (raw
// tool objects) that has valid annotations. A tool whose annotations are
// invalid gets none: the SDK drops such a tool from its tools/list result.
func paramBindings(tools [][]byte) map[string][]paramBinding {
	var out map[string][]paramBinding
	for _, raw := range tools {
		var t struct {
			Name        string               `json:"name"`
			InputSchema headerSchemaProperty `json:"inputSchema"`
		}
		// Cheap test first: almost no tool has an annotation.
		if !bytes.Contains(raw, []byte("x-mcp-header")) || json.Unmarshal(raw, &t) != nil {
			continue
		}
		props := t.InputSchema.Properties
		if len(props) == 0 || !validParamHeaders(props, map[string]bool{}) {
			continue
		}
		if b := collectBindings(props, nil, nil); len(b) > 0 {
			if out == nil {
				out = map[string][]paramBinding{}
			}
			out[t.Name] = b
		}
	}
	return out
}

func collectBindings(props map[string]headerSchemaProperty, prefix []string, out []paramBinding) []paramBinding {
	for name, p := range props {
		path := append(append(make([]string, 0, len(prefix)+1), prefix...), name)
		var h string
		if json.Unmarshal(p.XMCPHeader, &h) == nil && h != "" {
			out = append(out, paramBinding{path: path, header: paramHeaderPrefix + h})
		}
		if len(p.Properties) > 0 {
			out = collectBindings(p.Properties, path, out)
		}
	}
	return out
}

// validParamHeaders is the SDK's validateParamHeaderAnnotations: annotated
// properties are primitive, header names are non-empty tokens, unique
// case-insensitively across the schema.
func validParamHeaders(props map[string]headerSchemaProperty, seen map[string]bool) bool {
	for _, p := range props {
		if p.XMCPHeader != nil {
			if p.Type != "string" && p.Type != "integer" && p.Type != "boolean" {
				return false
			}
			var h string
			if json.Unmarshal(p.XMCPHeader, &h) != nil || h == "" || !isToken(h) {
				return false
			}
			lower := strings.ToLower(h)
			if seen[lower] {
				return false
			}
			seen[lower] = true
		}
		if len(p.Properties) > 0 && !validParamHeaders(p.Properties, seen) {
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

// paramHeaderValues returns the header values for args (the raw arguments
// object), in the SDK's encoding.
func paramHeaderValues(bindings []paramBinding, args json.RawMessage) map[string]string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return nil
	}
	var out map[string]string
	for _, b := range bindings {
		v, ok := lookupArgument(obj, b.path)
		if !ok || string(v) == "null" {
			continue
		}
		s, ok := headerPrimitive(v)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[b.header] = encodeHeaderValue(s)
	}
	return out
}

func lookupArgument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
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

// headerPrimitive formats a string, a boolean or an integer within the
// JavaScript safe range; anything else carries no header.
func headerPrimitive(raw json.RawMessage) (string, bool) {
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
		const safe = 1<<53 - 1
		if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || v < -safe || v > safe {
			return "", false
		}
		return strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// encodeHeaderValue wraps a value that is not plain printable ASCII (or
// has surrounding blanks, or looks like a wrapped value) as =?base64?…?=.
func encodeHeaderValue(s string) string {
	const pre, suf = "=?base64?", "?="
	plain := true
	if s != "" && (s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		plain = false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7E {
			plain = false
		}
	}
	if strings.HasPrefix(s, pre) && strings.HasSuffix(s, suf) {
		plain = false
	}
	if plain {
		return s
	}
	return pre + base64.StdEncoding.EncodeToString([]byte(s)) + suf
}
