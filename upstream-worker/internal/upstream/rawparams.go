package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Methods whose params the worker rewrites or whose requests differ.
const (
	methodToolsCall   = "tools/call"
	methodPromptsGet  = "prompts/get"
	methodComplete    = "completion/complete"
	methodRead        = "resources/read"
	methodSetLevel    = "logging/setLevel"
	methodSubscribe   = "resources/subscribe"
	methodUnsubscribe = "resources/unsubscribe"
)

// rawParams is a client request's params prepared for the raw paths
// (rawCall, pipeCall) and, decoded, for the SDK path.
//
// For tools/call (newRawParams) it means what the SDK path's
// mcp.CallToolParams (callParams) means: the name is the upstream's own
// tool name, the hop _meta keys are dropped, arguments default to {}, an
// empty inputResponses or requestState is left out. Unlike the SDK path it
// keeps every other member, byte for byte and in order, and forwards
// inputResponses without decoding it.
//
// For every other method (newForwardParams) the params are the client's
// byte for byte and in order, except: the hop _meta keys are dropped, and
// the upstream's own name (proto.Request.Name) replaces the client's in
// prompts/get "name" and in a completion/complete "ref" of type
// "ref/prompt".
type rawParams struct {
	method string
	hdr    []string // the Mcp-Method header value: [method]
	// name is the Mcp-Name header value of a 2026-07-28 session's request:
	// the tool (tools/call), the prompt (prompts/get) or the resource URI
	// (resources/read) or the task id (tasks/get, tasks/update,
	// tasks/cancel: SEP-2663); "" for other methods.
	name    string
	members []byte          // every member but _meta, encoded (tools/call: "name" first)
	meta    []byte          // the forwarded _meta members, encoded; may be empty
	args    json.RawMessage // tools/call: the arguments (for Mcp-Param headers)
	// noSessionMeta: the request does not get a 2026 session's SEP-2575
	// _meta members. The SDK client sends logging/setLevel without them,
	// and resources/(un)subscribe exist only before 2026-07-28 (the SDK
	// replaces them with subscriptions/listen there): a request without
	// them is the legacy request a 2026 server still serves on a session
	// it knows.
	noSessionMeta bool
	// caps are the capabilities of the request's own client (raw JSON
	// object): proto.Request.ClientCaps (a 2025-era client's), else the
	// client's clientCapabilities _meta member (a 2026-era client's); nil
	// when neither. On a 2026-07-28 session they replace the session's in
	// the request's _meta (requestMeta).
	caps []byte
	// level is the client's own SEP-2575 logLevel _meta member (a 2026-era
	// client's, encoded as `"<key>":<value>`), nil when it sent none: on a
	// 2026-07-28 session it tells the upstream which log messages to send.
	level []byte
}

var (
	jsonNull = []byte("null")
	hdrCall  = []string{methodToolsCall}
)

func isNull(b []byte) bool { return b == nil || bytes.Equal(b, jsonNull) }

func invalidParams(method, format string, a ...any) *proto.Error {
	return proto.Errorf(proto.CodeInvalidParams, "invalid "+method+" params: "+format, a...)
}

// decodeProblem says, for a client, what encoding/json found wrong in
// params it decoded into the SDK's types: which member has which JSON type
// where the MCP schema wants another. err's own text is not used: it names
// Go types and fields ("into Go struct field CallToolParams.name of type
// string").
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := "params"
		if te.Field != "" {
			where += "." + te.Field
		}
		value, _, _ := strings.Cut(te.Value, " ") // "number 1e999": the literal stays out
		return where + " is " + withArticle(value) + ", not " + jsonKind(te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "not valid JSON"
	}
	return "they do not match the MCP schema"
}

// jsonKind names the JSON values a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value of another type"
}

// withArticle is a JSON value kind as encoding/json names it ("number",
// "object", "array", "string", "bool") with its article.
func withArticle(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "":
		return "a value"
	}
	return "a " + kind
}

// objectParams returns the client's params if they are a JSON object, nil
// if they are absent or null, or an invalid-params error.
func objectParams(method string, params []byte) ([]byte, *proto.Error) {
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || bytes.Equal(raw, jsonNull) {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, invalidParams(method, "not valid JSON")
	}
	if raw[0] != '{' {
		return nil, invalidParams(method, "not an object")
	}
	return raw, nil
}

// newRawParams prepares the params of a tools/call.
func newRawParams(req *proto.Request) (*rawParams, *proto.Error) {
	raw, perr := objectParams(methodToolsCall, req.Params)
	if perr != nil {
		return nil, perr
	}
	var name, args, meta, state []byte
	sc := fields.Params.Scan()
	jsonscan.Members(raw, func(k, v []byte) {
		switch sc.Key(k) {
		case fields.ParamName:
			name = v
		case fields.ParamArguments:
			args = v
		case fields.ParamMeta:
			meta = v
		case fields.ParamRequestState:
			state = v
		}
	})
	// The name replaced below must be the only one: a second, or one in
	// another case, would reach the upstream beside ours.
	if perr := clashed(&sc, "params."); perr != nil {
		return nil, perr
	}
	// The members the SDK path types are checked as it checks them.
	switch {
	case !isNull(name) && name[0] != '"':
		return nil, invalidParams(methodToolsCall, "name is not a string")
	case !isNull(state) && state[0] != '"':
		return nil, invalidParams(methodToolsCall, "requestState is not a string")
	case !isNull(meta) && meta[0] != '{':
		return nil, invalidParams(methodToolsCall, "_meta is not an object")
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

	p := &rawParams{method: methodToolsCall, hdr: hdrCall, name: toolName, args: args}
	if p.meta, p.caps, p.level, perr = forwardMeta(meta); perr != nil {
		return nil, perr
	}
	p.caps = ownCaps(req, p.caps)
	m := make([]byte, 0, len(raw)+len(toolName)+32)
	m = append(m, `"name":`...)
	m = appendJSONString(m, toolName)
	m = append(m, `,"arguments":`...)
	m = append(m, args...)
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
	p.members = m
	return p, nil
}

// newForwardParams prepares the params of req, a forwarded method other
// than tools/call (see rawParams).
func newForwardParams(req *proto.Request) (*rawParams, *proto.Error) {
	method := req.Method
	raw, perr := objectParams(method, req.Params)
	if perr != nil {
		return nil, perr
	}
	p := &rawParams{
		method:        method,
		hdr:           []string{method},
		noSessionMeta: method == methodSetLevel || method == methodSubscribe || method == methodUnsubscribe,
	}
	var meta []byte
	m := make([]byte, 0, len(raw)+len(req.Name)+8)
	sawName := false
	sc := fields.Params.Scan()
	var refErr *proto.Error
	jsonscan.Members(raw, func(k, v []byte) {
		i := sc.Key(k)
		switch {
		case i == fields.ParamMeta:
			meta = v
			return
		case method == methodPromptsGet && i == fields.ParamName:
			sawName = true
			if req.Name != "" {
				v = appendJSONString(nil, req.Name)
			}
			if v[0] == '"' {
				p.name = jsonscan.Unquote(v)
			}
		case method == methodRead && i == fields.ParamURI,
			isTaskMethod(method) && i == fields.ParamTaskID:
			if v[0] == '"' {
				p.name = jsonscan.Unquote(v)
			}
		case method == methodComplete && i == fields.ParamRef && req.Name != "":
			v, refErr = renamePromptRef(v, req.Name)
		}
		if len(m) > 0 {
			m = append(m, ',')
		}
		m = append(append(append(m, k...), ':'), v...)
	})
	// What is replaced or routed by must be the only such member: a
	// second, or one in another case, would reach the upstream beside it.
	if perr := clashed(&sc, "params."); perr != nil {
		return nil, perr
	}
	if refErr != nil {
		return nil, refErr
	}
	if method == methodPromptsGet && !sawName && req.Name != "" {
		n := appendJSONString([]byte(`"name":`), req.Name)
		if len(m) > 0 {
			n = append(n, ',')
		}
		m = append(n, m...)
		p.name = req.Name
	}
	if !isNull(meta) && meta[0] != '{' {
		return nil, invalidParams(method, "_meta is not an object")
	}
	p.members = m
	var perr2 *proto.Error
	if p.meta, p.caps, p.level, perr2 = forwardMeta(meta); perr2 != nil {
		return nil, perr2
	}
	p.caps = ownCaps(req, p.caps)
	return p, nil
}

// clashed is the error for an object whose scan found a member given
// twice (package fields), prefix naming the object ("params." or
// "params._meta."); nil when none was.
func clashed(sc *jsonscan.Scan, prefix string) *proto.Error {
	if name, dup := sc.Clash(); dup {
		return &proto.Error{Code: proto.CodeInvalidRequest, Msg: fields.Clash(prefix + name).Message()}
	}
	return nil
}

// renamePromptRef returns ref (a completion/complete "ref" value) with its
// "name" replaced by name when it is an object of type "ref/prompt";
// other members keep their bytes and order. Any other ref is returned
// as is. A ref that gives its type, name or uri twice (package fields) is
// refused: the name replaced must be its only one.
func renamePromptRef(ref []byte, name string) ([]byte, *proto.Error) {
	isPrompt := false
	sc := fields.Ref.Scan()
	jsonscan.Members(ref, func(k, v []byte) {
		if sc.Key(k) == fields.RefType && v[0] == '"' && jsonscan.Unquote(v) == "ref/prompt" {
			isPrompt = true
		}
	})
	if perr := clashed(&sc, "params.ref."); perr != nil {
		return nil, perr
	}
	if !isPrompt {
		return ref, nil
	}
	out := make([]byte, 0, len(ref)+len(name)+10)
	out = append(out, '{')
	sawName := false
	jsonscan.Members(ref, func(k, v []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		if jsonscan.KeyIs(k, "name") {
			sawName = true
			v = appendJSONString(nil, name)
		}
		out = append(append(append(out, k...), ':'), v...)
	})
	if !sawName {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendJSONString(append(out, `"name":`...), name)
	}
	return append(out, '}'), nil
}

// forwardMeta returns the members of meta (a raw _meta object, or nil)
// that are forwarded: all but the hop keys, encoded, byte for byte; the
// hop key clientCapabilities' value, when it is an object; and the hop key
// logLevel as an encoded member, when it is a string. A _meta that gives
// one of the keys the gateway reads twice (package fields: the hop keys,
// the progress token) is refused: the one dropped or replaced must be the
// only one.
func forwardMeta(meta []byte) (out, caps, level []byte, perr *proto.Error) {
	if isNull(meta) {
		return nil, nil, nil, nil
	}
	sc := fields.Meta.Scan()
	jsonscan.Members(meta, func(k, v []byte) {
		sc.Key(k)
		if isHopKey(k) {
			switch {
			case jsonscan.KeyIs(k, mcp.MetaKeyClientCapabilities) && len(v) > 0 && v[0] == '{':
				caps = v
			case jsonscan.KeyIs(k, mcp.MetaKeyLogLevel) && len(v) > 0 && v[0] == '"':
				level = append([]byte(`"`+mcp.MetaKeyLogLevel+`":`), v...)
			}
			return
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
	})
	return out, caps, level, clashed(&sc, "params._meta.")
}

// ownCaps is the capabilities of req's own client: req.ClientCaps when it
// is an object, else metaCaps (from the client's _meta).
func ownCaps(req *proto.Request, metaCaps []byte) []byte {
	if c := bytes.TrimSpace(req.ClientCaps); isObject(c) {
		return c
	}
	return metaCaps
}

// isHopKey reports whether the raw key names one of hopMeta.
func isHopKey(k []byte) bool {
	if bytes.IndexByte(k, '\\') < 0 {
		return hopMeta[string(k[1:len(k)-1])]
	}
	return hopMeta[jsonscan.Unquote(k)]
}

// appendRequest appends the JSON-RPC request for p with the given id (raw
// JSON) and a 2026 session's _meta members (sessionMeta, or nil).
func (p *rawParams) appendRequest(dst, id, sessionMeta []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, p.method)
	dst = append(dst, `,"params":`...)
	return append(p.appendParams(dst, sessionMeta), '}')
}

// appendParams appends the params object for p with a 2026 session's
// _meta members (sessionMeta, or nil; ignored when p.noSessionMeta).
func (p *rawParams) appendParams(dst, sessionMeta []byte) []byte {
	if p.noSessionMeta {
		sessionMeta = nil
	}
	dst = append(dst, '{')
	if len(p.meta) > 0 || len(sessionMeta) > 0 {
		dst = append(dst, `"_meta":{`...)
		dst = append(dst, p.meta...)
		if len(p.meta) > 0 && len(sessionMeta) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, sessionMeta...)
		dst = append(dst, '}')
		if len(p.members) > 0 {
			dst = append(dst, ',')
		}
	}
	dst = append(dst, p.members...)
	return append(dst, '}')
}

func emptyObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}
