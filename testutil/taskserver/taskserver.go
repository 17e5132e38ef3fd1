package taskserver

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// ExtensionID is the tasks extension's identifier, the key under
// capabilities.extensions (SEP-2663).
const ExtensionID = "io.modelcontextprotocol/tasks"

// JSON-RPC error codes the fixture answers with.
const (
	CodeMethodNotFound                  = -32601
	CodeInvalidParams                   = -32602
	CodeInternalError                   = -32603
	CodeHeaderMismatch                  = -32020 // SEP-2243
	CodeMissingRequiredClientCapability = -32021 // SEP-2575
	CodeUnsupportedProtocolVersion      = -32022 // SEP-2575
)

const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// version20260728 is the first revision with the SEP-2243 routing headers
	// and the SEP-2575 error-to-HTTP-status mapping. Revisions are dates, so
	// string order is time order (the go-sdk compares them the same way).
	version20260728 = "2026-07-28"

	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// Options configures a [Server]. The zero value is usable.
type Options struct {
	// TTL is how long a task stays readable after its last change while it
	// is not running (terminal, or parked in input_required); it goes out as
	// ttlMs. Zero means 5 minutes.
	TTL time.Duration
	// PollInterval is the polling interval suggested to clients, sent as
	// pollIntervalMs. Zero means 250ms.
	PollInterval time.Duration
	// Greet makes the fixture serve the sync tool greet itself and list it.
	// Leave it false when the wrapped handler has its own greet.
	Greet bool
	// Now is the clock. Nil means time.Now. Task progress is worked out from
	// it whenever a task is read, so a fake clock makes tests deterministic;
	// only the synchronous (non-task) slow_compute really sleeps.
	Now func() time.Time
	// MaxBodyBytes bounds the request bodies the fixture inspects; a larger
	// body goes to the wrapped handler unread. Zero means 4 MiB.
	MaxBodyBytes int64
	// Logger receives debug records of task transitions. Nil discards them.
	Logger *slog.Logger
}

// Server is the tasks fixture: an http.Handler in front of a streamable-HTTP
// MCP handler. Create it with [New]. It is safe for concurrent use. It starts
// no goroutines: task progress is computed on read.
type Server struct {
	next  http.Handler
	opts  Options
	log   *slog.Logger
	tools []fixtureTool // the tools this fixture lists and serves

	mu    sync.Mutex
	tasks map[string]*task // guarded by mu; keyed by taskId
}

// New returns a Server that answers the tasks surface itself and hands
// everything else to next. It panics if next is nil.
func New(next http.Handler, opts Options) *Server {
	if next == nil {
		panic("taskserver: nil next handler")
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		next:  next,
		opts:  opts,
		log:   log.With("component", "taskserver"),
		tools: fixtureTools(opts.Greet),
		tasks: make(map[string]*task),
	}
}

// request is the part of a JSON-RPC request the fixture dispatches on.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Body == nil {
		s.next.ServeHTTP(w, r)
		return
	}
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, s.opts.MaxBodyBytes+1))
	if err != nil {
		http.Error(w, "taskserver: reading request body failed", http.StatusBadRequest)
		return
	}
	if int64(len(body)) > s.opts.MaxBodyBytes {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), orig), orig}
		s.next.ServeHTTP(w, r)
		return
	}
	orig.Close()
	setBody(r, body)

	var req request
	// A batch (an array) fails to decode into a struct and passes through.
	if json.Unmarshal(body, &req) != nil || req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
		s.next.ServeHTTP(w, r)
		return
	}
	c := &call{w: w, r: r, req: req, version: requestVersion(r, req.Params)}
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		s.serveTasks(c)
	case "tools/call":
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if t := s.tool(p.Name); t != nil {
			s.serveToolCall(c, t)
			return
		}
		s.next.ServeHTTP(w, r)
	case "tools/list":
		s.forwardPatched(w, r, body, s.patchToolsList)
	case "server/discover", "initialize":
		s.forwardPatched(w, r, body, patchCapabilities)
	default:
		s.next.ServeHTTP(w, r)
	}
}

func setBody(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
}

// requestVersion is the protocol revision of a request: the
// Mcp-Protocol-Version header, else the SEP-2575 _meta protocolVersion.
func requestVersion(r *http.Request, params json.RawMessage) string {
	if v := r.Header.Get(headerProtocolVersion); v != "" {
		return v
	}
	var p struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta.Version
}

// declaresTasks reports whether a request's SEP-2575 _meta client
// capabilities name the tasks extension.
func declaresTasks(meta map[string]json.RawMessage) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(meta[metaClientCapabilities], &caps) != nil {
		return false
	}
	v, ok := caps.Extensions[ExtensionID]
	return ok && string(v) != "null"
}

// rpcError is a JSON-RPC error object, as sent and as inlined in a failed
// task.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// missingCapability is the -32021 error naming the tasks extension.
func missingCapability(what string) *rpcError {
	return &rpcError{
		Code:    CodeMissingRequiredClientCapability,
		Message: what + " requires the client capability extensions[\"" + ExtensionID + "\"]",
		Data: map[string]any{
			"requiredCapabilities": map[string]any{
				"extensions": map[string]any{ExtensionID: map[string]any{}},
			},
		},
	}
}

func invalidParams(msg string) *rpcError {
	return &rpcError{Code: CodeInvalidParams, Message: msg}
}

// call is one JSON-RPC request the fixture answers itself.
type call struct {
	w       http.ResponseWriter
	r       *http.Request
	req     request
	version string
}

// checkHeaders applies SEP-2243 to a request the fixture answers: from
// 2026-07-28 on, Mcp-Method must equal the body method and Mcp-Name the
// body's name-shaped field. Like the go-sdk, it checks nothing for older
// revisions.
func (c *call) checkHeaders(name string) *rpcError {
	if v := c.r.Header.Get(headerProtocolVersion); v == "" || v < version20260728 {
		return nil
	}
	switch m := c.r.Header.Get(headerMethod); {
	case m == "":
		return &rpcError{Code: CodeHeaderMismatch, Message: "missing required Mcp-Method header"}
	case m != c.req.Method:
		return &rpcError{Code: CodeHeaderMismatch, Message: "header mismatch: Mcp-Method header value '" + m + "' does not match body value '" + c.req.Method + "'"}
	}
	n, ok := decodeHeaderValue(c.r.Header.Get(headerName))
	switch {
	case !ok:
		return &rpcError{Code: CodeHeaderMismatch, Message: "header mismatch: Mcp-Name header carries invalid Base64"}
	case n == "":
		return &rpcError{Code: CodeHeaderMismatch, Message: "missing required Mcp-Name header for method " + c.req.Method}
	case n != name:
		return &rpcError{Code: CodeHeaderMismatch, Message: "header mismatch: Mcp-Name header value '" + n + "' does not match body value '" + name + "'"}
	}
	return nil
}

func (c *call) reply(result any) {
	c.write(http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": c.req.ID, "result": result})
}

// fail sends a JSON-RPC error. From 2026-07-28 on, the HTTP status follows
// SEP-2575 (and SEP-2243 for -32020): 404 for -32601, 400 for -32602,
// -32020, -32021 and -32022, else 200.
func (c *call) fail(e *rpcError) {
	status := http.StatusOK
	if c.version >= version20260728 {
		switch e.Code {
		case CodeMethodNotFound:
			status = http.StatusNotFound
		case CodeInvalidParams, CodeHeaderMismatch, CodeMissingRequiredClientCapability, CodeUnsupportedProtocolVersion:
			status = http.StatusBadRequest
		}
	}
	c.write(status, map[string]any{"jsonrpc": "2.0", "id": c.req.ID, "error": e})
}

func (c *call) write(status int, msg any) {
	data, err := json.Marshal(msg)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.req.ID,
			"error": rpcError{Code: CodeInternalError, Message: "taskserver: encoding the response failed"}})
		status = http.StatusOK
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	_, _ = c.w.Write(data)
}
