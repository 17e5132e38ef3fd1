package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// The go-sdk answers params it cannot decode itself, before any handler of
// the edge runs, with its decoder's text: "handling 'tools/call': invalid
// params: unmarshaling "{\"name\":5}" into a *mcp.CallToolParamsRaw: json:
// cannot unmarshal ... into Go struct field mcp.CallToolParamsRaw.name of
// type string" (code -32602; code 0 for initialize). Clients are not to see
// Go's names for the SDK's types, so the edge rewrites such a message in
// what the SDK writes, keeping what it says about the params in JSON's
// terms: "Invalid params: params.name must be a string". Only the SDK's
// own decoding errors are rewritten: they, and nothing else it sends,
// start with "handling '" (handleReceive wraps only the params' decoding
// error); the errors the edge's handlers return, upstreams' among them,
// go out as they are.

// sdkErrorPrefix starts every message the SDK makes of a params decoding
// error, and no other.
const sdkErrorPrefix = "handling '"

// sdkErrorWriter passes what the SDK writes for one request through,
// rewriting the message of an error response that is the SDK's decoding
// error (see above). The SDK writes each message, SSE event or JSON body,
// with one Write (writeEvent; a JSON response is one message or one
// batch), so a message is never split between two.
//
// For a POST (a JSON-RPC message) it also turns the SDK's plain-text
// refusals (http.Error: 400, 403, 404, 405, 413, 415, 500) into JSON-RPC
// error responses with the same status and text: code -32600 for a 4xx
// status, -32603 otherwise, under the message's id when it has a valid
// one (id), null otherwise. finish writes such a response.
type sdkErrorWriter struct {
	http.ResponseWriter
	post  bool            // the request is a POST: plain-text refusals become JSON-RPC
	id    json.RawMessage // the message's id, if one request with a valid id
	plain int             // the status of a plain-text refusal held back, 0 if none
	text  []byte          // its text
}

func (w *sdkErrorWriter) Write(p []byte) (int, error) {
	if w.plain != 0 {
		w.text = append(w.text, p...)
		return len(p), nil
	}
	if !bytes.Contains(p, []byte(`"message":"`+sdkErrorPrefix)) {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write(scrubSDKErrors(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *sdkErrorWriter) WriteHeader(status int) {
	w.Header().Del("Content-Length") // the body's length may change
	if w.post && status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.plain = status // answered by finish
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

// finish writes the JSON-RPC error response of a plain-text refusal held
// back, if any. Call it once the SDK's handler returned.
func (w *sdkErrorWriter) finish() {
	if w.plain == 0 {
		return
	}
	w.Header().Del("X-Content-Type-Options")
	writeRPCError(w.ResponseWriter, w.plain, w.id, rpcCodeOfStatus(w.plain), plainText(w.text, w.plain))
}

// rpcCodeOfStatus is the JSON-RPC error code of an HTTP refusal: -32600
// (Invalid Request) for a 4xx status, -32603 (Internal error) otherwise.
func rpcCodeOfStatus(status int) int {
	if status >= 400 && status < 500 {
		return int(jsonrpc.CodeInvalidRequest)
	}
	return int(jsonrpc.CodeInternalError)
}

// plainText is the message of a plain-text refusal: its text trimmed, or
// the status's name when it has none.
func plainText(text []byte, status int) string {
	if t := strings.TrimSpace(string(text)); t != "" {
		return t
	}
	return http.StatusText(status)
}

// httpError answers r, refused before any JSON-RPC handling, with status
// and msg: a POST (a JSON-RPC message) gets a JSON-RPC error response
// with a null id (rpcCodeOfStatus), anything else msg as text
// (http.Error).
func httpError(w http.ResponseWriter, r *http.Request, msg string, status int) {
	if r.Method != http.MethodPost {
		http.Error(w, msg, status)
		return
	}
	writeRPCError(w, status, nil, rpcCodeOfStatus(status), msg)
}

func (w *sdkErrorWriter) Flush() {
	if w.plain != 0 {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sdkErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scrubSDKErrors returns p (one SSE event, or a JSON body of one message
// or a batch) with the SDK's decoding error messages rewritten.
func scrubSDKErrors(p []byte) []byte {
	trimmed := bytes.TrimSpace(p)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return scrubMessages(p)
	}
	lines := bytes.SplitAfter(p, []byte("\n"))
	for i, line := range lines {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			body := bytes.TrimRight(data, "\r\n")
			lines[i] = append(append([]byte("data: "), scrubMessages(body)...), data[len(body):]...)
		}
	}
	return bytes.Join(lines, nil)
}

// scrubMessages rewrites the JSON-RPC message, or batch of messages, msg;
// anything that does not decode is returned as it is.
func scrubMessages(msg []byte) []byte {
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return msg
		}
		for i, m := range batch {
			batch[i] = scrubMessages(m)
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return msg
		}
		return out
	}
	var raw []byte
	jsonscan.Members(msg, func(k, v []byte) {
		if jsonscan.KeyIs(k, "error") {
			raw = v
		}
	})
	var e jsonrpc.Error
	if raw == nil || json.Unmarshal(raw, &e) != nil || !strings.HasPrefix(e.Message, sdkErrorPrefix) {
		return msg
	}
	e.Message = paramsProblem(e.Message)
	if e.Code == 0 { // initialize's decoding error: invalid params all the same
		e.Code = jsonrpc.CodeInvalidParams
	}
	b, err := json.Marshal(&e)
	if err != nil {
		return msg
	}
	return replaceValue(msg, raw, string(b)) // the other members keep their bytes and order
}

var (
	// sdkField finds, in the decoder's text, the member ("Go struct field
	// mcp.GetPromptParams.name", or the SDK's odd
	// "mcp.GetPromptParamsmap[string]string.arguments.a") and the Go type
	// it wants.
	sdkField = regexp.MustCompile(`Go struct field (?:[a-z0-9_]+\.)?[^.\s]+\.(\S+) of type (\S+)`)
	// sdkValue finds a whole value of the wrong kind ("into Go value of
	// type mcp.PingParams").
	sdkValue = regexp.MustCompile(`into Go value of type (\S+)`)
	// sdkMethod finds the method in the SDK's prefix.
	sdkMethod = regexp.MustCompile(`^handling '([^']*)'`)
)

// paramsProblem turns the SDK's message for params it could not decode into
// one for the client: which member (as a path from params) must be which
// kind of JSON value, when the SDK's text says; else that the params do
// not match the method's schema. Go's names never appear in it.
func paramsProblem(sdk string) string {
	if m := sdkField.FindStringSubmatch(sdk); m != nil {
		if kind := jsonKindOf(m[2]); kind != "" {
			return "Invalid params: params." + m[1] + " must be " + kind
		}
	}
	if m := sdkValue.FindStringSubmatch(sdk); m != nil {
		if kind := jsonKindOf(m[1]); kind != "" {
			return "Invalid params: params must be " + kind
		}
	}
	if m := sdkMethod.FindStringSubmatch(sdk); m != nil && clientMethods[m[1]] {
		return "Invalid params: the params of " + m[1] + " do not match its schema"
	}
	return "Invalid params"
}

// objectTypes end the names of the SDK's struct and map types.
var objectTypes = []string{"Params", "Raw", "Reference", "Capabilities", "Implementation", "Meta", "Map", "Context", "Argument"}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// jsonKindOf names the JSON values a Go type, as Go prints it, decodes
// from; "" when it cannot tell.
func jsonKindOf(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["):
		return "an object"
	case strings.HasPrefix(t, "mcp.wire"), strings.HasPrefix(t, "mcp.") && hasAnySuffix(t, objectTypes):
		// The SDK's own structs (its params, references, capabilities,
		// wire forms) are objects; some of its named types are strings.
		return "an object"
	}
	return ""
}
