package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

// Helpers of the tenancy tests: API keys, clients that present them, and a
// raw JSON-RPC client that returns the wire bytes of an answer so that two
// answers can be compared byte for byte.

// mintKey returns a new API key's plaintext (syk_...); the tests seed it
// through key_env or key_file, or get one from key.create.
func mintKey(t *testing.T) string {
	t.Helper()
	key, _, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// bearer is an http.RoundTripper that sets Authorization on every request.
type bearer struct {
	auth string // the whole header value; "" sends none
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.auth != "" {
		r.Header.Set("Authorization", b.auth)
	}
	return b.base.RoundTrip(r)
}

// connectKey opens a go-sdk client session at version that presents key
// as a bearer token.
func connectKey(t *testing.T, endpoint, version, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := dialKey(t.Context(), endpoint, version, key, opts)
	if err != nil {
		t.Fatalf("connect %s at %s: %v", endpoint, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func dialKey(ctx context.Context, endpoint, version, key string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "switchyard-tenancy-test", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{auth: "Bearer " + key, base: http.DefaultTransport}},
	}
	return c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// rpcError is a JSON-RPC error as the tests compare it.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	HTTP    int             `json:"-"` // the HTTP status it came with (raw clients only)
}

func (e *rpcError) String() string {
	if e == nil {
		return "<no error>"
	}
	return fmt.Sprintf("%d %q data=%s (HTTP %d)", e.Code, e.Message, e.Data, e.HTTP)
}

// sdkCall sends method with params (any JSON-encodable value of the
// method's params shape) on a go-sdk session, through the session's typed
// method. It returns the result as JSON, or the JSON-RPC error; any other
// failure fails the test.
func sdkCall(t *testing.T, cs *mcp.ClientSession, method string, params any) (json.RawMessage, *rpcError) {
	t.Helper()
	ctx := t.Context()
	var res any
	var err error
	switch method {
	case "tools/list":
		res, err = sdkDo(params, func(p *mcp.ListToolsParams) (any, error) { return cs.ListTools(ctx, p) })
	case "tools/call":
		res, err = sdkDo(params, func(p *mcp.CallToolParams) (any, error) { return cs.CallTool(ctx, p) })
	case "prompts/list":
		res, err = sdkDo(params, func(p *mcp.ListPromptsParams) (any, error) { return cs.ListPrompts(ctx, p) })
	case "prompts/get":
		res, err = sdkDo(params, func(p *mcp.GetPromptParams) (any, error) { return cs.GetPrompt(ctx, p) })
	case "resources/list":
		res, err = sdkDo(params, func(p *mcp.ListResourcesParams) (any, error) { return cs.ListResources(ctx, p) })
	case "resources/templates/list":
		res, err = sdkDo(params, func(p *mcp.ListResourceTemplatesParams) (any, error) { return cs.ListResourceTemplates(ctx, p) })
	case "resources/read":
		res, err = sdkDo(params, func(p *mcp.ReadResourceParams) (any, error) { return cs.ReadResource(ctx, p) })
	case "resources/subscribe":
		res, err = sdkDo(params, func(p *mcp.SubscribeParams) (any, error) { return struct{}{}, cs.Subscribe(ctx, p) })
	case "resources/unsubscribe":
		res, err = sdkDo(params, func(p *mcp.UnsubscribeParams) (any, error) { return struct{}{}, cs.Unsubscribe(ctx, p) })
	case "completion/complete":
		res, err = sdkDo(params, func(p *mcp.CompleteParams) (any, error) { return cs.Complete(ctx, p) })
	case "logging/setLevel":
		res, err = sdkDo(params, func(p *mcp.SetLoggingLevelParams) (any, error) { return struct{}{}, cs.SetLoggingLevel(ctx, p) })
	default:
		t.Fatalf("sdkCall: no typed method for %s", method)
	}
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, &rpcError{Code: je.Code, Message: je.Message, Data: je.Data}
		}
		t.Fatalf("%s %v: %v", method, params, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b, nil
}

// sdkDo decodes params into P and runs f.
func sdkDo[P any](params any, f func(*P) (any, error)) (any, error) {
	p := new(P)
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, p); err != nil {
			return nil, err
		}
	}
	return f(p)
}

// keyClient speaks MCP over plain HTTP POSTs: stateless 2026-07-28 calls
// (Mcp-Method, Mcp-Name, the _meta triple) when sid is empty, else calls
// on the 2025-11-25 session sid. auth is the Authorization header ("" for
// none).
type keyClient struct {
	url, auth, sid string
	nextID         int
}

// rawAnswer is one HTTP exchange: the status, the headers, the body and,
// when the body holds a JSON-RPC response (plain or the last SSE message
// event with an id), its result and error members as sent.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
	result json.RawMessage
	err    json.RawMessage
}

// rpcErr decodes the error member; nil when the answer has none.
func (a *rawAnswer) rpcErr(t *testing.T) *rpcError {
	t.Helper()
	if len(a.err) == 0 {
		return nil
	}
	var e rpcError
	if err := json.Unmarshal(a.err, &e); err != nil {
		t.Fatalf("error member %s: %v", a.err, err)
	}
	return &e
}

const meta2026 = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"tenancy-test","version":"1"}}`

// call sends one request. name is the Mcp-Name header of a 2026 call
// (the tool or prompt name, the resource URI); ignored on a session.
func (c *keyClient) call(t *testing.T, method, name string, params map[string]any) *rawAnswer {
	t.Helper()
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	if c.sid == "" {
		p["_meta"] = json.RawMessage(meta2026)
	}
	c.nextID++
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": p})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", v2025)
	} else {
		req.Header.Set("Mcp-Protocol-Version", v2026)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	return doRaw(t, req)
}

// doRaw sends req and reads the whole answer.
func doRaw(t *testing.T, req *http.Request) *rawAnswer {
	t.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := &rawAnswer{status: resp.StatusCode, header: resp.Header, body: data}
	msg := data
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(d, []byte(`"id"`)) {
				msg = append([]byte(nil), d...)
			}
		}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &m) == nil {
		a.result, a.err = m.Result, m.Error
	}
	return a
}

// rawRequest builds a request to url with the Authorization header auth
// (none when empty) and the extra headers hdr (name, value pairs).
func rawRequest(t *testing.T, method, url, auth, body string, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// initBody is a 2025-11-25 initialize request.
const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tenancy-test","version":"1"}}}`

// as2025Session opens a 2025-11-25 session with raw POSTs and returns a
// keyClient on it.
func as2025Session(t *testing.T, url, auth string) *keyClient {
	t.Helper()
	a := doRaw(t, rawRequest(t, http.MethodPost, url, auth, initBody))
	sid := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize %s: %d %s", url, a.status, a.body)
	}
	n := doRaw(t, rawRequest(t, http.MethodPost, url, auth, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v2025))
	if n.status/100 != 2 {
		t.Fatalf("notifications/initialized: %d %s", n.status, n.body)
	}
	return &keyClient{url: url, auth: auth, sid: sid}
}
