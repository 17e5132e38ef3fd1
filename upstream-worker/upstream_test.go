package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test upstream: an in-process go-sdk server with tools that exercise
// the worker. Raw results are served by a receiving middleware returning
// stored bytes (they must be compact JSON without HTML characters, since
// encoding/json compacts a Marshaler's output).

// stdioEnv makes the test binary act as a stdio MCP server (see TestMain).
const stdioEnv = "SWITCHYARD_WORKER_TEST_STDIO_SERVER"

// stdioHangEnv makes that stdio server refuse to exit.
const stdioHangEnv = "SWITCHYARD_WORKER_TEST_STDIO_HANG"

// stdioEraEnv "2025" makes that stdio server refuse server/discover, so
// the worker's session falls back to initialize (2025-11-25), where the
// server may send requests; otherwise it speaks 2026-07-28.
const stdioEraEnv = "SWITCHYARD_WORKER_TEST_STDIO_ERA"

const (
	holoRaw = `{"content":[{"type":"hologram","frames":[1.000000000000000001,3e400]}],"_meta":{"n":12345678901234567890}}`
	failRaw = `{"content":[{"type":"text","text":"boom"}],"isError":true}`
)

// bigRaw is a tools/call result of a little over 8 MiB: with natstest's
// 8 MiB max payload, its reply must travel in chunks.
var bigRaw = sync.OnceValue(func() []byte {
	return []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("a", 8<<20) + `"}]}`)
})

func TestMain(m *testing.M) {
	if os.Getenv(stdioEnv) == "1" {
		// The helper process's main, not a test: serve MCP on stdin/stdout.
		if os.Getenv(stdioHangEnv) == "1" {
			signal.Ignore(syscall.SIGTERM)
		}
		srv := newUpstream(0).srv
		if os.Getenv(stdioEraEnv) == "2025" {
			srv.AddReceivingMiddleware(refuseDiscover)
		}
		// This process lives until its stdin closes: no test context here.
		_ = srv.Run(context.Background(), &mcp.StdioTransport{})
		if os.Getenv(stdioHangEnv) == "1" {
			select {} // ignore stdin EOF and SIGTERM: only SIGKILL ends it
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refuseDiscover makes a server answer server/discover "method not
// found", as a 2025-era server does.
func refuseDiscover(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "server/discover" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no discover here"}
		}
		return next(ctx, method, req)
	}
}

// upstreamServer is one test upstream.
type upstreamServer struct {
	srv        *mcp.Server
	blocked    chan struct{}        // a "block" call started
	cancelled  chan struct{}        // a "block" call saw its ctx end
	elicitErrs chan string          // a "chatty" call's elicitation failed
	gate       chan context.Context // lets a "later" call's elicitation go, in that context
	later      chan string          // a "later" call's elicitation ended: "<action> <name>" or the error
	inits      atomic.Int32         // sessions initialized
	toolCalls  atomic.Int32         // tools/call requests received
	subMu      sync.Mutex
	subLog     []string // guarded by subMu: "subscribe <uri>", "unsubscribe <uri>", in order
}

func (u *upstreamServer) logSub(what string) {
	u.subMu.Lock()
	u.subLog = append(u.subLog, what)
	u.subMu.Unlock()
}

type rawResult struct {
	mcp.ResultBase
	raw []byte
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

var objSchema = json.RawMessage(`{"type":"object"}`)

// newUpstream builds the server: the fixed tools plus extra tools "x-NN"
// (served one per page), prompt "greet", resource test://text and template
// test://items/{id}.
func newUpstream(extra int) *upstreamServer {
	u := &upstreamServer{blocked: make(chan struct{}, 16), cancelled: make(chan struct{}, 16), elicitErrs: make(chan string, 16),
		gate: make(chan context.Context), later: make(chan string, 16)}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, &mcp.ServerOptions{
		PageSize:           1,
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { u.inits.Add(1) },
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			u.logSub("subscribe " + r.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			u.logSub("unsubscribe " + r.Params.URI)
			return nil
		},
	})
	raws := map[string][]byte{"hologram": []byte(holoRaw), "fail": []byte(failRaw)}
	u.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				u.toolCalls.Add(1)
			}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				if raw, ok := raws[p.Name]; ok {
					return &rawResult{raw: raw}, nil
				}
				if p.Name == "big" {
					return &rawResult{raw: bigRaw()}, nil
				}
			}
			return next(ctx, method, req)
		}
	})
	add := func(name string, h mcp.ToolHandler) {
		u.srv.AddTool(&mcp.Tool{Name: name, InputSchema: objSchema}, h)
	}
	for _, n := range []string{"hologram", "fail", "big"} {
		add(n, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("unreachable")
		})
	}
	add("echo", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Text string }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil
	})
	add("meta", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		keys := []string{}
		for k := range r.Params.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b, _ := json.Marshal(map[string]any{"keys": keys, "custom": r.Params.Meta["custom"]})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	add("pid", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
	})
	add("sleep", func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Ms int }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		select {
		case <-time.After(time.Duration(a.Ms) * time.Millisecond):
			return textResult("slept"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	add("block", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.blocked <- struct{}{}
		<-ctx.Done()
		u.cancelled <- struct{}{}
		return nil, ctx.Err()
	})
	add("exit", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if os.Getenv(stdioEnv) != "1" {
			return nil, fmt.Errorf("exit only works in the stdio helper")
		}
		os.Exit(3)
		return nil, nil
	})
	add("badparams", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad widget", Data: json.RawMessage(`{"field":"w"}`)}
	})
	u.addRelayTools()
	for i := 1; i <= extra; i++ {
		u.addTool(fmt.Sprintf("x-%02d", i))
	}
	u.addPrompt("greet")
	u.srv.AddResource(&mcp.Resource{URI: "test://text", Name: "text", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "hello text"}}}, nil
	})
	u.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://items/{id}", Name: "item"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "item " + r.Params.URI}}}, nil
	})
	return u
}

// addPrompt adds a prompt with argument "who" that answers
// "<name>: hello <who>" (the server then sends
// notifications/prompts/list_changed to its sessions).
func (u *upstreamServer) addPrompt(name string) {
	u.srv.AddPrompt(&mcp.Prompt{Name: name, Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name + ": hello " + r.Params.Arguments["who"]}}}}, nil
	})
}

// fixedTools is the number of tools besides the extras.
const fixedTools = 16

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func askFor(field string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Message:         field + "?",
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"` + field + `":{"type":"string"}}}`),
	}
}

// addRelayTools adds the tools that talk to the client during a call:
//   - chatty logs "chatty log" (at info), reports progress 1/2 and 2/2
//     with the call's token, elicits a name, and answers
//     "token=<the token it saw> action=<action> name=<name>" (2025-era
//     sessions: a server-to-client request); with argument "quiet" true
//     it does not elicit and answers "token=<the token> quiet";
//   - mrtr asks for a name, then a color, as input_required results
//     (SEP-2322; the name travels in the requestState), and answers
//     "hello <name>, <color> (<requestState>)";
//   - caps answers which capabilities its session's client declared:
//     "elicitation=<bool> form=<bool> url=<bool> sampling=<bool> roots=<bool>";
//   - touch sends notifications/resources/updated for its argument "uri"
//     to the sessions that subscribed to it;
//   - later returns at once, and elicits a name once the test passes it a
//     context on gate (outside any call), reporting "<action> <name>" or the error on
//     the later channel.
func (u *upstreamServer) addRelayTools() {
	add := func(name string, h mcp.ToolHandler) {
		u.srv.AddTool(&mcp.Tool{Name: name, InputSchema: objSchema}, h)
	}
	add("chatty", func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := r.Params.GetProgressToken()
		_ = r.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "chatty log"})
		if tok != nil {
			for i := 1; i <= 2; i++ {
				_ = r.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2})
			}
		}
		var a struct{ Quiet bool }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		if a.Quiet {
			return textResult(fmt.Sprintf("token=%v quiet", tok)), nil
		}
		res, err := r.Session.Elicit(ctx, askFor("name"))
		if err != nil {
			select {
			case u.elicitErrs <- err.Error():
			default:
			}
			return nil, err
		}
		name, _ := res.Content["name"].(string)
		return textResult(fmt.Sprintf("token=%v action=%s name=%s", tok, res.Action, name)), nil
	})
	add("mrtr", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		answer := func(key, field string) string {
			if res, ok := r.Params.InputResponses[key].(*mcp.ElicitResult); ok && res.Action == "accept" {
				v, _ := res.Content[field].(string)
				return v
			}
			return ""
		}
		state := r.Params.RequestState
		if name, ok := strings.CutPrefix(state, "name="); ok {
			if color := answer("color", "color"); color != "" {
				return textResult(fmt.Sprintf("hello %s, %s (%s)", name, color, state)), nil
			}
		}
		if name := answer("name", "name"); name != "" {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": askFor("color")}, RequestState: "name=" + name}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": askFor("name")}, RequestState: "start"}, nil
	})
	add("caps", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := &mcp.ClientCapabilities{}
		if ip := r.Session.InitializeParams(); ip != nil && ip.Capabilities != nil {
			c = ip.Capabilities
		}
		e := c.Elicitation
		return textResult(fmt.Sprintf("elicitation=%v form=%v url=%v sampling=%v roots=%v",
			e != nil, e != nil && e.Form != nil, e != nil && e.URL != nil, c.Sampling != nil, c.RootsV2 != nil)), nil
	})
	add("later", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ss := r.Session
		go func() {
			// Not the call's context: the elicitation belongs to no request.
			res, err := ss.Elicit(<-u.gate, askFor("name"))
			if err != nil {
				u.later <- err.Error()
				return
			}
			name, _ := res.Content["name"].(string)
			u.later <- res.Action + " " + name
		}()
		return textResult("later"), nil
	})
	add("subscriptions", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.subMu.Lock()
		defer u.subMu.Unlock()
		return textResult(strings.Join(u.subLog, ";")), nil
	})
	add("touch", func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ URI string }
		_ = json.Unmarshal(r.Params.Arguments, &a)
		if err := u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI}); err != nil {
			return nil, err
		}
		return textResult("touched " + a.URI), nil
	})
}

// httpUpstream serves u over HTTP: streamable (SSE or JSON responses) or
// legacy SSE. It can expire sessions (404) and counts DELETEs.
type httpUpstream struct {
	*upstreamServer
	ts      *httptest.Server
	mu      sync.Mutex
	seen    map[string]bool // session ids seen
	expired map[string]bool
	deletes atomic.Int32
	// answers counts the POSTed JSON-RPC responses (answers to the
	// server's requests), by "result" or the error's message.
	answers sync.Map // string -> *atomic.Int32
}

// answered returns how many answers with the error message msg (or
// "result") were POSTed.
func (h *httpUpstream) answered(msg string) int32 {
	if n, ok := h.answers.Load(msg); ok {
		return n.(*atomic.Int32).Load()
	}
	return 0
}

func serveHTTP(t *testing.T, u *upstreamServer, kind string) *httpUpstream {
	t.Helper()
	return serveHTTPOn(t, u, kind, nil)
}

// serveHTTPAt serves u (streamable) on a fixed address, e.g. one a killed
// server used.
func serveHTTPAt(t *testing.T, u *upstreamServer, addr string) *httpUpstream {
	t.Helper()
	var ln net.Listener
	var err error
	eventually(t, 5*time.Second, "listen on "+addr, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	return serveHTTPOn(t, u, "streamable", ln)
}

func serveHTTPOn(t *testing.T, u *upstreamServer, kind string, ln net.Listener) *httpUpstream {
	t.Helper()
	h := &httpUpstream{upstreamServer: u, seen: map[string]bool{}, expired: map[string]bool{}}
	get := func(*http.Request) *mcp.Server { return u.srv }
	var inner http.Handler
	switch kind {
	case "sse":
		inner = mcp.NewSSEHandler(get, nil)
	case "json":
		inner = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true})
	case "stateless":
		inner = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	default:
		inner = mcp.NewStreamableHTTPHandler(get, nil)
	}
	h.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		h.mu.Lock()
		gone := h.expired[id]
		if id != "" && !gone {
			h.seen[id] = true
		}
		h.mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodDelete {
			h.deletes.Add(1)
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string
				Result json.RawMessage
				Error  *struct{ Message string }
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "" {
				key := "result"
				if m.Error != nil {
					key = m.Error.Message
				}
				n, _ := h.answers.LoadOrStore(key, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
		}
		inner.ServeHTTP(w, r)
	}))
	if ln != nil {
		h.ts.Listener.Close()
		h.ts.Listener = ln
	}
	h.ts.Start()
	t.Cleanup(h.kill)
	return h
}

// expireAll makes the server forget every session it has seen (404).
func (h *httpUpstream) expireAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.seen {
		h.expired[id] = true
	}
	h.seen = map[string]bool{}
}

// kill stops the server, cutting its open streams.
func (h *httpUpstream) kill() {
	h.ts.CloseClientConnections()
	h.ts.Close()
}

// addTool adds a tool that returns an empty result (the server then sends
// notifications/tools/list_changed to its sessions).
func (u *upstreamServer) addTool(name string) {
	u.srv.AddTool(&mcp.Tool{Name: name, InputSchema: objSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
}
