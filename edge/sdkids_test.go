package edge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
)

// TestRenameSDKRequestIDs: a request's integer id on an SSE data line is
// renamed to name the edge; responses, notifications, string ids and
// other lines are left as they are.
func TestRenameSDKRequestIDs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"elicitation/create\",\"params\":{}}\n\n",
			"event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"sy-sdk-edge-t-3\",\"method\":\"elicitation/create\",\"params\":{}}\n\n"},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"method\":\"x\"}}\n\n", ""},
		{"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", ""},
		{"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":4,\"reason\":\"x\"}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"sy-sdk-edge-t-4\",\"reason\":\"x\"}}\n\n"},
		{"data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}\n\n", ""},
		{"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", ""},
	} {
		want := c.want
		if want == "" {
			want = c.in
		}
		if got := string(renameSDKRequestIDs([]byte(c.in), "edge-t")); got != want {
			t.Errorf("rename(%q) = %q, want %q", c.in, got, want)
		}
	}
	for key, want := range map[string]string{"ssy-sdk-edge-t-3": "edge-t/3", "ssy-sdk-edge-t-x": "", "ssy-sdk--3": "", "n3": "", "ssy-relay-edge-t-3": ""} {
		e, id, ok := sdkRequestID(key)
		if got := e + "/" + id; ok && got != want || !ok && want != "" {
			t.Errorf("sdkRequestID(%q) = %q %v, want %q", key, got, ok, want)
		}
	}
}

// answerRouter sends every POST whose body is a JSON-RPC response (an
// answer to a server's request) to other: the client's answers always
// reach the edge that did not ask.
type answerRouter struct{ other string }

func (a answerRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if !bytes.Contains(body, []byte(`"method"`)) {
			u, _ := url.Parse(a.other)
			r.URL.Host, r.Host = u.Host, u.Host
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestEdgeSDKRequestAnsweredAtAnotherEdge: an upstream's elicitation
// during a call the SDK path serves reaches a 2025-era client, whose
// answer goes to the other edge: that edge forwards it to the edge whose
// SDK session asked, and the call completes with the client's answer.
func TestEdgeSDKRequestAnsweredAtAnotherEdge(t *testing.T) {
	var nc *nats.Conn
	a := newRigWith(t, chattyWorker(t, &nc), &rigOpts{sse: true, noFastPath: true})
	nc = a.nc
	b := newRigWith(t, nil, &rigOpts{sse: true, noFastPath: true, server: a.srv, id: "edge-u"})
	asked := 0
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"tags": []any{"a"}}}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: a.url, HTTPClient: &http.Client{Transport: answerRouter{other: b.url}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__x", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"action":"accept"`) || asked != 1 {
		t.Fatalf("the worker got %s after %d questions, want the client's answer after 1", text, asked)
	}
}
