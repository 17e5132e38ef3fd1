package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// The test upstream: an in-process go-sdk server behind a handler that
// records every POST and can expire sessions or script responses.

const (
	holoRaw = `{"content":[{"type":"hologram","frames":[1.000000000000000001,3e400]}],"_meta":{"n":12345678901234567890}}`
	bigSize = 2 << 20
)

// Raw results the SDK's typed decoder would reject or alter: a prompt
// message of an unknown content type, a blob that is not base64.
const (
	holoPromptRaw = `{"messages":[{"role":"user","content":{"type":"hologram","x":1.000000000000000001}}],"_meta":{"n":12345678901234567890}}`
	rawBlobRaw    = `{"contents":[{"uri":"test://rawblob","blob":"not base64!","size":1e400}]}`
)

var bigRaw = `{"content":[{"type":"text","text":"` + strings.Repeat("b", bigSize) + `"}]}`

type rawResult struct {
	mcp.ResultBase
	raw []byte
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// posted is one recorded POST.
type posted struct {
	header http.Header
	body   []byte
	msg    struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	toolName string
}

func (p *posted) raw() bool { return bytes.HasPrefix(p.msg.ID, []byte(`"sy-`)) }

// interceptor may answer a recorded POST itself (returning true).
type interceptor func(w http.ResponseWriter, r *http.Request, p *posted) bool

type testServer struct {
	srv       *mcp.Server
	ts        *httptest.Server
	blocked   chan struct{} // a "block" call started
	cancelled chan struct{} // a "block" call saw its ctx end
	inits     atomic.Int32  // sessions initialized
	resumes   atomic.Int32  // GETs with a Last-Event-ID and a session id
	// intercept, if set, may answer a POST itself (returning true).
	intercept interceptor
	// onEvent, if set, receives the server's events (see event) instead of
	// events.
	onEvent func(string)

	mu      sync.Mutex
	events  []string        // guarded by mu: "setLevel <level>", "subscribe <uri>", "unsubscribe <uri>"
	posts   []*posted       // guarded by mu
	seen    map[string]bool // guarded by mu: session ids
	expired map[string]bool // guarded by mu
}

var annotatedSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"region":{"type":"string","x-mcp-header":"Region"},` +
	`"n":{"type":"integer","x-mcp-header":"N"},` +
	`"deep":{"type":"object","properties":{"flag":{"type":"boolean","x-mcp-header":"Flag"}}}}}`)

// newTestServer serves the test tools, prompts and resources: kind "sse"
// (stateful, SSE responses), "json" (stateful, JSON responses),
// "stateless" (2026-07-28 capable), "resumable" (stateful with an event
// store) or "legacy" (the legacy SSE transport). intercept may be nil.
func newTestServer(t testing.TB, kind string, intercept interceptor) *testServer {
	return newServer(t, kind, intercept, true)
}

// newServer is newTestServer; record false skips recording POSTs (and
// decoding them) unless intercept is set.
func newServer(t testing.TB, kind string, intercept interceptor, record bool) *testServer {
	t.Helper()
	s := &testServer{intercept: intercept, blocked: make(chan struct{}, 16), cancelled: make(chan struct{}, 16), seen: map[string]bool{}, expired: map[string]bool{}}
	s.srv = newToolServer(s)

	get := func(*http.Request) *mcp.Server { return s.srv }
	var opts mcp.StreamableHTTPOptions
	var legacy http.Handler
	switch kind {
	case "legacy":
		legacy = mcp.NewSSEHandler(get, nil)
	case "json":
		opts.JSONResponse = true
	case "stateless":
		opts.Stateless = true
	case "resumable":
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	case "sse":
	default:
		t.Fatalf("unknown server kind %q", kind)
	}
	var inner http.Handler = mcp.NewStreamableHTTPHandler(get, &opts)
	if legacy != nil {
		inner = legacy
	}
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		s.mu.Lock()
		gone := s.expired[id]
		if id != "" && !gone {
			s.seen[id] = true
		}
		s.mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" && id != "" &&
			r.Header.Get("Mcp-Protocol-Version") != "" && r.Header.Get("Accept") == "text/event-stream" {
			s.resumes.Add(1)
		}
		if r.Method == http.MethodPost && (record || intercept != nil) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			p := &posted{header: r.Header.Clone(), body: body}
			_ = json.Unmarshal(body, &p.msg)
			if p.msg.Method == "tools/call" {
				var n struct{ Name string }
				_ = json.Unmarshal(p.msg.Params, &n)
				p.toolName = n.Name
			}
			if record {
				s.mu.Lock()
				s.posts = append(s.posts, p)
				s.mu.Unlock()
			}
			if s.intercept != nil && s.intercept(w, r, p) {
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
	return s
}

// blobBytes is the content of resource test://blob.
var blobBytes = []byte{0, 1, 2, 0xfe, 0xff}

// newToolServer is the test upstream's go-sdk server with the test tools,
// prompt "greet", resources test://text and test://blob, template
// test://items/{id}, completions, subscriptions and logging; s receives its
// events.
func newToolServer(s *testServer) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { s.inits.Add(1) },
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			ref := r.Params.Ref
			if ref.Type == "ref/prompt" && ref.Name != "greet" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt " + ref.Name}
			}
			v := ref.Type + ":" + ref.Name + ref.URI + ":" + r.Params.Argument.Name + "=" + r.Params.Argument.Value
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{v}, Total: 1}}, nil
		},
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			s.event("subscribe " + r.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			s.event("unsubscribe " + r.Params.URI)
			return nil
		},
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch p := req.GetParams().(type) {
			case *mcp.SetLoggingLevelParams:
				s.event("setLevel " + string(p.Level))
			case *mcp.GetPromptParams:
				if p.Name == "holo" {
					return &rawResult{raw: []byte(holoPromptRaw)}, nil
				}
			case *mcp.ReadResourceParams:
				if p.URI == "test://rawblob" {
					return &rawResult{raw: []byte(rawBlobRaw)}, nil
				}
			}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				switch p.Name {
				case "hologram":
					return &rawResult{raw: []byte(holoRaw)}, nil
				case "big":
					return &rawResult{raw: []byte(bigRaw)}, nil
				}
			}
			return next(ctx, method, req)
		}
	})
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(name string, h mcp.ToolHandler) { srv.AddTool(&mcp.Tool{Name: name, InputSchema: obj}, h) }
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, n := range []string{"hologram", "big"} {
		add(n, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("unreachable")
		})
	}
	add("echo", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(string(r.Params.Arguments)), nil
	})
	add("structured", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text(`{"n":1}`)
		r.StructuredContent = map[string]any{"n": 1, "s": "x"}
		return r, nil
	})
	add("fail", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text("boom")
		r.IsError = true
		return r, nil
	})
	add("badparams", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad widget", Data: json.RawMessage(`{"field":"w"}`)}
	})
	add("meta", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		keys := []string{}
		for k := range r.Params.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b, _ := json.Marshal(map[string]any{"keys": keys, "custom": r.Params.Meta["custom"], "progressToken": r.Params.Meta["progressToken"]})
		return text(string(b)), nil
	})
	add("probe", func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var out []string
		note := func(what string, v any, err error) {
			if err != nil {
				out = append(out, what+" error: "+err.Error())
				return
			}
			b, _ := json.Marshal(v)
			out = append(out, what+": "+string(b))
		}
		note("ping", nil, r.Session.Ping(ctx, nil))
		roots, err := r.Session.ListRoots(ctx, nil)
		note("roots", roots, err)
		msg, err := r.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1})
		note("sampling", msg, err)
		return text(strings.Join(out, "\n")), nil
	})
	add("block", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.blocked <- struct{}{}
		<-ctx.Done()
		s.cancelled <- struct{}{}
		return nil, ctx.Err()
	})
	add("resume", func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r.Extra != nil && r.Extra.CloseSSEStream != nil {
			r.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: time.Millisecond})
		}
		return text("resumed"), nil
	})
	srv.AddTool(&mcp.Tool{Name: "hdr", InputSchema: annotatedSchema}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := r.Extra.Header
		return text(fmt.Sprintf("region=%q n=%q flag=%q", h.Get("Mcp-Param-Region"), h.Get("Mcp-Param-N"), h.Get("Mcp-Param-Flag"))), nil
	})
	addPrompt(srv, "greet")
	srv.AddResource(&mcp.Resource{URI: "test://text", Name: "text", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "hello text"}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://blob", Name: "blob", MIMEType: "application/octet-stream"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Blob: blobBytes}}}, nil
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://items/{id}", Name: "item"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "item " + r.Params.URI}}}, nil
	})
	return srv
}

// addPrompt adds a prompt with argument "who" that answers
// "<name>: hello <who>" (the server then sends
// notifications/prompts/list_changed to its sessions).
func addPrompt(srv *mcp.Server, name string) {
	srv.AddPrompt(&mcp.Prompt{Name: name, Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name + ": hello " + r.Params.Arguments["who"]}}}}, nil
	})
}

// event records one server event.
func (s *testServer) event(e string) {
	if s.onEvent != nil {
		s.onEvent(e)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// eventLog returns the recorded events, one a line.
func (s *testServer) eventLog() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.events, "\n")
}

func (s *testServer) url() string { return s.ts.URL }

// expireAll makes the server forget every session it has seen (404).
func (s *testServer) expireAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.seen {
		s.expired[id] = true
	}
	s.seen = map[string]bool{}
}

// recorded returns the recorded POSTs that match f.
func (s *testServer) recorded(f func(*posted) bool) []*posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*posted
	for _, p := range s.posts {
		if f(p) {
			out = append(out, p)
		}
	}
	return out
}

// memTools is a ToolStore that keeps the latest set of each kind.
type memTools struct {
	mu       sync.Mutex
	sets     map[string]*proto.ListSet // guarded by mu: by kind
	stores   map[string]int            // guarded by mu: Store calls by kind
	notified map[string]int            // guarded by mu: Store calls with Notified set, by kind
}

func (m *memTools) Store(_ context.Context, set *proto.ListSet) error {
	m.mu.Lock()
	if m.sets == nil {
		m.sets, m.stores, m.notified = map[string]*proto.ListSet{}, map[string]int{}, map[string]int{}
	}
	m.sets[set.Kind] = set
	m.stores[set.Kind]++
	if set.Notified != 0 {
		m.notified[set.Kind]++
	}
	m.mu.Unlock()
	return nil
}

// count returns the number of Store calls of kind, and how many of them
// were stamped Notified.
func (m *memTools) count(kind string) (stores, notified int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stores[kind], m.notified[kind]
}

// get returns the latest set of kind, or nil.
func (m *memTools) get(kind string) *proto.ListSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets[kind]
}

// startUpstream runs an Upstream for the streamable server at url until the
// test ends, and waits until it is up. sdk forces the SDK call path.
func startUpstream(tb testing.TB, url string, sdk bool, tune func(*Options)) *Upstream {
	tb.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	o := Options{
		Spec:       proto.UpstreamSpec{Name: "up", Transport: proto.TransportStreamable, URL: url},
		HTTPClient: &http.Client{Transport: tr},
		Tools:      &memTools{},
		Closer:     NewCloser(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
	if tune != nil {
		tune(&o)
	}
	u := New(o)
	if sdk {
		u.rawCalls = false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		u.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		wctx, stop := context.WithTimeout(context.WithoutCancel(tb.Context()), 10*time.Second)
		defer stop()
		o.Closer.Wait(wctx)
		tr.CloseIdleConnections()
	})
	eventually(tb, 15*time.Second, "upstream up", func() bool { return u.State().Up })
	return u
}

// poolVersion is the protocol version the pool session negotiated.
func poolVersion(tb testing.TB, u *Upstream) string {
	tb.Helper()
	s, err := u.pool.get(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	return s.cs.InitializeResult().ProtocolVersion
}

// call is a tools/call of tool with raw JSON params (the client's, whose
// name is the gateway's prefixed one) on session ("" for the pool).
func call(tool, session, params string) *proto.Request {
	return &proto.Request{Method: "tools/call", Upstream: "up", Name: tool, Edge: "e1", Session: session, Params: []byte(params)}
}

// startEverything runs the go-sdk conformance server over streamable HTTP
// and returns its URL.
func startEverything(t *testing.T, stateless bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bins.Everything(t), "-http", addr, fmt.Sprintf("-stateless=%v", stateless))
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	eventually(t, 15*time.Second, "everything-server listening", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/"
}

// eventually polls cond every 5ms until it holds or d passes.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// recv waits for one value on c.
func recv[T any](tb testing.TB, c <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(15 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
	var zero T // Fatalf does not return
	return zero
}
