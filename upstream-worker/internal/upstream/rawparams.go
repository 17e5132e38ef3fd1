package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// rawParams is a client's tools/call params prepared for the raw path. It
// means what the SDK path's mcp.CallToolParams (callParams) means: the name
// is the upstream's own tool name, the hop _meta keys are dropped,
// arguments default to {}, an empty inputResponses or requestState is left
// out. Unlike the SDK path it keeps every other member, byte for byte and
// in order, and forwards inputResponses without decoding it.
type rawParams struct {
	name    string
	members []byte          // every member but _meta, encoded, "name" first
	meta    []byte          // the forwarded _meta members, encoded; may be empty
	args    json.RawMessage // the arguments (for Mcp-Param headers)
}

var jsonNull = []byte("null")

func isNull(b []byte) bool { return b == nil || bytes.Equal(b, jsonNull) }

func invalidParams(format string, a ...any) *proto.Error {
	return proto.Errorf(proto.CodeInvalidParams, "invalid tools/call params: "+format, a...)
}

func newRawParams(req *proto.Request) (*rawParams, *proto.Error) {
	raw := bytes.TrimSpace(req.Params)
	var name, args, meta, state []byte
	if len(raw) > 0 && !bytes.Equal(raw, jsonNull) {
		if !json.Valid(raw) {
			return nil, invalidParams("not valid JSON")
		}
		isObject := jsonscan.Members(raw, func(k, v []byte) {
			switch {
			case jsonscan.KeyIs(k, "name"):
				name = v
			case jsonscan.KeyIs(k, "arguments"):
				args = v
			case jsonscan.KeyIs(k, "_meta"):
				meta = v
			case jsonscan.KeyIs(k, "requestState"):
				state = v
			}
		})
		if !isObject {
			return nil, invalidParams("not an object")
		}
	}
	// The members the SDK path types are checked as it checks them.
	switch {
	case !isNull(name) && name[0] != '"':
		return nil, invalidParams("name is not a string")
	case !isNull(state) && state[0] != '"':
		return nil, invalidParams("requestState is not a string")
	case !isNull(meta) && meta[0] != '{':
		return nil, invalidParams("_meta is not an object")
	}
	toolName := req.Name
	if toolName == "" && !isNull(name) {
		toolName = jsonscan.Unquote(name)
	}
	if toolName == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, "tools/call without a tool name")
	}
	if isNull(args) {
		args = []byte("{}")
	}
	dropState := isNull(state) || string(state) == `""`

	p := &rawParams{name: toolName, args: args}
	m := make([]byte, 0, len(raw)+len(toolName)+32)
	m = append(m, `"name":`...)
	m = appendJSONString(m, toolName)
	m = append(m, `,"arguments":`...)
	m = append(m, args...)
	if len(raw) > 0 {
		jsonscan.Members(raw, func(k, v []byte) {
			switch {
			case jsonscan.KeyIs(k, "name"), jsonscan.KeyIs(k, "arguments"), jsonscan.KeyIs(k, "_meta"):
				return
			case jsonscan.KeyIs(k, "inputResponses") && (isNull(v) || emptyObject(v)):
				return
			case jsonscan.KeyIs(k, "requestState") && dropState:
				return
			}
			m = append(append(append(append(m, ','), k...), ':'), v...)
		})
	}
	p.members = m

	if !isNull(meta) {
		jsonscan.Members(meta, func(k, v []byte) {
			if isHopKey(k) {
				return
			}
			if len(p.meta) > 0 {
				p.meta = append(p.meta, ',')
			}
			p.meta = append(append(append(p.meta, k...), ':'), v...)
		})
	}
	return p, nil
}

// isHopKey reports whether the raw key names one of hopMeta.
func isHopKey(k []byte) bool {
	if bytes.IndexByte(k, '\\') < 0 {
		return hopMeta[string(k[1:len(k)-1])]
	}
	return hopMeta[jsonscan.Unquote(k)]
}

// appendRequest appends the JSON-RPC request for p with the given id (raw
// JSON) and extra _meta members (a 2026 session's, or nil).
func (p *rawParams) appendRequest(dst, id, extraMeta []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":"tools/call","params":`...)
	return append(p.appendParams(dst, extraMeta), '}')
}

// appendParams appends the tools/call params object for p with extra _meta
// members (a 2026 session's, or nil).
func (p *rawParams) appendParams(dst, extraMeta []byte) []byte {
	dst = append(dst, '{')
	if len(p.meta) > 0 || len(extraMeta) > 0 {
		dst = append(dst, `"_meta":{`...)
		dst = append(dst, p.meta...)
		if len(p.meta) > 0 && len(extraMeta) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, extraMeta...)
		dst = append(dst, "},"...)
	}
	dst = append(dst, p.members...)
	return append(dst, '}')
}

func emptyObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}
