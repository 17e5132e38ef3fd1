package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// fakeRelay records notifications and answers requests with answer.
type fakeRelay struct {
	answer string // the client's response object; "" blocks until ctx ends

	mu    sync.Mutex
	notes []string
	asks  []string
}

func (f *fakeRelay) Notify(msg []byte) {
	f.mu.Lock()
	f.notes = append(f.notes, string(msg))
	f.mu.Unlock()
}

func (f *fakeRelay) Ask(ctx context.Context, msg []byte) ([]byte, error) {
	f.mu.Lock()
	f.asks = append(f.asks, string(msg))
	f.mu.Unlock()
	if f.answer == "" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []byte(f.answer), nil
}

func (f *fakeRelay) seen() (notes, asks []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.notes...), append([]string(nil), f.asks...)
}

// fakeConn records what the worker writes to the upstream.
type fakeConn struct {
	mcp.Connection
	wrote chan *jsonrpc.Response
}

func (c *fakeConn) Write(_ context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Response); ok {
		c.wrote <- r
	}
	return nil
}

func newBareUpstream(t *testing.T) *Upstream {
	t.Helper()
	c := NewCloser()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		c.Wait(ctx)
	})
	return New(Options{Spec: proto.UpstreamSpec{Name: "up", Transport: proto.TransportStdio}, Worker: "w", Tools: &memTools{}, Closer: c})
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestUpstreamRelayRouteShared: on a shared session (a stdio process) a
// message that names no call goes to the one call in flight, else to
// nobody: a notification is dropped, a request answered -32603; a call
// without a relay leaves the message to the SDK.
func TestUpstreamRelayRouteShared(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":0,"result":{"action":"decline"}}`
	cases := []struct {
		name     string
		calls    []Relay // calls in flight (nil: a call without a relay)
		request  bool
		taken    bool   // routeConn took the message from the SDK
		notified bool   // the first call's relay got the notification
		wrote    string // the answer written upstream ("" none)
	}{
		{name: "note, one call", calls: []Relay{&fakeRelay{}}, taken: true, notified: true},
		{name: "note, two calls", calls: []Relay{&fakeRelay{}, &fakeRelay{}}, taken: true},
		{name: "note, no call", taken: true},
		{name: "note, call without relay", calls: []Relay{nil}},
		{name: "request, one call", calls: []Relay{&fakeRelay{answer: answer}}, request: true, taken: true, wrote: `result {"action":"decline"}`},
		{name: "request, two calls", calls: []Relay{&fakeRelay{answer: answer}, &fakeRelay{answer: answer}}, request: true, taken: true, wrote: "error -32603 no client to ask"},
		{name: "request, no call", request: true, taken: true, wrote: "error -32603 no client to ask"},
		{name: "request, call without relay", calls: []Relay{nil}, request: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newBareUpstream(t)
			s := &session{}
			var first *fakeRelay
			for i, r := range tc.calls {
				ctx := t.Context()
				if r != nil {
					ctx = WithRelay(ctx, r)
				}
				st := u.beginCall(ctx, &proto.Request{Method: "tools/call"})
				s.enter(st)
				if i == 0 && r != nil {
					first = r.(*fakeRelay)
				}
			}
			c := &fakeConn{wrote: make(chan *jsonrpc.Response, 1)}
			msg := &jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":"x"}`)}
			if tc.request {
				msg = &jsonrpc.Request{ID: mustID(t, float64(7)), Method: "elicitation/create", Params: json.RawMessage(`{"message":"m"}`)}
			}
			if got := u.routeConn(s, c, msg); got != tc.taken {
				t.Fatalf("taken %v, want %v", got, tc.taken)
			}
			if first != nil {
				notes, _ := first.seen()
				if (len(notes) == 1) != tc.notified {
					t.Errorf("first call's notifications %q, want notified %v", notes, tc.notified)
				}
			}
			if tc.wrote == "" {
				return
			}
			var resp *jsonrpc.Response
			select {
			case resp = <-c.wrote:
			case <-time.After(5 * time.Second):
				t.Fatal("nothing written upstream")
			}
			got := "result " + string(resp.Result)
			if resp.Error != nil {
				we := resp.Error.(*jsonrpc.Error)
				got = "error " + itoa(we.Code) + " " + we.Message
			}
			if !strings.HasPrefix(got, tc.wrote) || resp.ID != mustID(t, float64(7)) {
				t.Errorf("wrote %s to id %v, want %s to 7", got, resp.ID.Raw(), tc.wrote)
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestUpstreamRelayAskCancelled: a relayed request whose call ends before
// the client answers is answered -32603 "request cancelled".
func TestUpstreamRelayAskCancelled(t *testing.T) {
	u := newBareUpstream(t)
	s := &session{}
	ctx, cancel := context.WithCancel(t.Context())
	r := &fakeRelay{}
	st := u.beginCall(WithRelay(ctx, r), &proto.Request{Method: "tools/call"})
	s.enter(st)
	c := &fakeConn{wrote: make(chan *jsonrpc.Response, 1)}
	u.routeConn(s, c, &jsonrpc.Request{ID: mustID(t, "q"), Method: "sampling/createMessage", Params: json.RawMessage(`{}`)})
	eventually(t, 5*time.Second, "the request relayed", func() bool { _, asks := r.seen(); return len(asks) == 1 })
	cancel()
	resp := recv(t, c.wrote, "the answer upstream")
	if we, ok := resp.Error.(*jsonrpc.Error); !ok || we.Code != jsonrpc.CodeInternalError || we.Message != "request cancelled" {
		t.Fatalf("answered %v %s", resp.Error, resp.Result)
	}
}

// TestUpstreamRelayProgressToken: a client's progress token goes upstream
// as one of ours; the upstream's progress with it comes back with the
// client's token byte for byte, until the call ends; calls without a relay
// keep their token.
func TestUpstreamRelayProgressToken(t *testing.T) {
	u := newBareUpstream(t)
	for _, tok := range []string{`9007199254740993`, `"tok"`, `1.50`} {
		st := u.beginCall(WithRelay(t.Context(), &fakeRelay{}), &proto.Request{})
		meta := st.rewriteMeta([]byte(`"custom":{"progressToken":1},"progressToken":` + tok))
		var m map[string]json.RawMessage
		if err := json.Unmarshal(append(append([]byte{'{'}, meta...), '}'), &m); err != nil {
			t.Fatalf("%s: rewritten meta %s: %v", tok, meta, err)
		}
		ours := string(m["progressToken"])
		if !strings.HasPrefix(ours, `"sy-`) || strings.Contains(ours, `"sy-w-`) || string(m["custom"]) != `{"progressToken":1}` {
			t.Fatalf("%s: rewritten meta %s", tok, meta)
		}
		params := []byte(`{"progress":1,"progressToken":` + ours + `,"total":2}`)
		got, p := u.progressTarget(params)
		if got != st || string(p) != `{"progress":1,"progressToken":`+tok+`,"total":2}` {
			t.Fatalf("%s: progress %s -> %s (call %v)", tok, params, p, got == st)
		}
		st.end()
		if got, _ := u.progressTarget(params); got != nil {
			t.Fatalf("%s: token still mapped after the call ended", tok)
		}
	}
	st := u.beginCall(t.Context(), &proto.Request{})
	if meta := string(st.rewriteMeta([]byte(`"progressToken":7`))); meta != `"progressToken":7` {
		t.Fatalf("without a relay: %s", meta)
	}
	if st, _ := u.progressTarget([]byte(`{"progressToken":"sy-w-999"}`)); st != nil {
		t.Fatal("an unknown token found a call")
	}
}

func TestUpstreamRelayParseAnswer(t *testing.T) {
	cases := []struct{ in, result, err string }{
		{`{"jsonrpc":"2.0","id":0,"result":{"a": [1, 2]}}`, `{"a": [1, 2]}`, ""},
		{`{"id":"x","error":{"code":-1,"message":"no","data":{"k":1}}}`, "", "-1 no"},
		{`{"id":1,"result":null}`, "null", ""},
		{`{"id":1}`, "", "-32603 the client answered neither"},
		{`{"error":"bad"}`, "", "-32603 the client's error is malformed"},
		{`nope`, "", "-32603 the client's answer is not JSON"},
	}
	for _, c := range cases {
		res, werr := parseAnswer([]byte(c.in))
		got := string(res)
		if werr != nil {
			got = itoa(werr.Code) + " " + werr.Message
		}
		want := c.result
		if c.err != "" {
			want = c.err
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("parseAnswer(%s) = %s, want %s", c.in, got, want)
		}
	}
}

func TestUpstreamBridgeParams(t *testing.T) {
	cases := []struct{ name, members, state, want string }{
		{"tools/call", `"name":"t","arguments":{}`, `"s1"`, `{"name":"t","arguments":{},"inputResponses":{"k":{"action":"accept"}},"requestState":"s1"}`},
		{"replaces the client's", `"uri":"x","inputResponses":{"old":1},"requestState":"old"`, `"s2"`, `{"uri":"x","inputResponses":{"k":{"action":"accept"}},"requestState":"s2"}`},
		{"no members, no state", ``, ``, `{"inputResponses":{"k":{"action":"accept"}}}`},
	}
	for _, c := range cases {
		p := &rawParams{method: methodRead, members: []byte(c.members)}
		var state []byte
		if c.state != "" {
			state = []byte(c.state)
		}
		q := p.withInput([]byte(`{"k":{"action":"accept"}}`), state)
		if got := string(q.appendParams(nil, nil)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if string(p.members) != c.members {
			t.Errorf("%s: the original params changed", c.name)
		}
	}
	reqs, state, ok := inputRequired([]byte(`{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"z"}`))
	if !ok || string(reqs) != `{"a":{"method":"roots/list"}}` || string(state) != `"z"` {
		t.Errorf("inputRequired: %s %s %v", reqs, state, ok)
	}
	if _, _, ok := inputRequired([]byte(`{"resultType":"complete","content":[]}`)); ok {
		t.Error("a complete result is input_required")
	}
	for in, want := range map[string]string{
		` {"content":[],"inputRequests":{"k":{}},"requestState":"r"}`: ` {"resultType":"input_required","content":[],"inputRequests":{"k":{}},"requestState":"r"}`,
		`{"resultType":"complete","inputRequests":{"k":{}}}`:          `{"resultType":"complete","inputRequests":{"k":{}}}`,
		`{"content":[{"type":"text","text":"\"inputRequests\""}]}`:    `{"content":[{"type":"text","text":"\"inputRequests\""}]}`,
		`{"inputRequests":null}`:                                      `{"inputRequests":null}`,
	} {
		if got := string(markInputRequired([]byte(in))); got != want {
			t.Errorf("markInputRequired(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestUpstreamParseCaps(t *testing.T) {
	cases := []struct{ in, want string }{
		{``, `{}`},
		{`not json`, `{}`},
		{`[]`, `{}`},
		{`{"roots":{}}`, `{"roots":{}}`},
		{`{"roots":{"listChanged":true},"sampling":{"tools":{}},"elicitation":{"url":{}},"experimental":{"x":1}}`,
			`{"experimental":{"x":1},"sampling":{"tools":{}},"elicitation":{"url":{}},"roots":{"listChanged":true}}`},
	}
	for _, c := range cases {
		if got := string(capsJSON(parseCaps([]byte(c.in)))); !jsonEqual([]byte(got), []byte(c.want)) {
			t.Errorf("parseCaps(%s) declares %s, want %s", c.in, got, c.want)
		}
	}
	if got := string(capsJSON(sharedCaps())); !jsonEqual([]byte(got), []byte(`{"roots":{},"sampling":{},"elicitation":{"form":{},"url":{}}}`)) {
		t.Errorf("shared sessions declare %s", got)
	}
}
