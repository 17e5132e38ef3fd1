package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// countCalls counts the tools/call requests next is given.
func countCalls(n *atomic.Int32, next nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		var req proto.Request
		if proto.Unmarshal(m.Data, &req) == nil && req.Method == "tools/call" {
			n.Add(1)
		}
		next(m)
	}
}

// chattyWorker answers every tools/call the way a worker relays an upstream
// that logs, reports progress (when the call has a token) and elicits
// before it answers: the result carries the client's elicitation answer.
func chattyWorker(t *testing.T, nc **nats.Conn) nats.MsgHandler {
	return func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		if req.Method != "tools/call" {
			reply(*nc, m, &proto.Reply{Result: []byte(`{"tools":[]}`)})
			return
		}
		go func() {
			c := *nc
			send := func(msg string, replyTo string) {
				_ = c.PublishMsg(&nats.Msg{Subject: m.Reply, Reply: replyTo, Data: []byte(msg),
					Header: nats.Header{proto.HdrMessage: []string{"1"}}})
			}
			send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`, "")
			var token json.RawMessage
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			_ = json.Unmarshal(req.Params, &p)
			if tok, ok := p.Meta["progressToken"]; ok {
				token = tok
				send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1,"total":2}}`, token), "")
			}
			inbox := c.NewInbox()
			sub, err := c.SubscribeSync(inbox)
			if err != nil {
				t.Error(err)
				return
			}
			defer sub.Unsubscribe()
			send(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"tags":{"type":"array","items":{"anyOf":[{"const":"a","title":"A"},{"const":"b","title":"B"}]}}}}}}`, inbox)
			ans, err := sub.NextMsg(5 * time.Second)
			result := `{"content":[{"type":"text","text":"no answer"}]}`
			if err == nil {
				q, _ := json.Marshal(string(ans.Data))
				result = `{"content":[{"type":"text","text":` + string(q) + `}]}`
			}
			_ = bus.RespondReply(c, m.Reply, &proto.Reply{Result: []byte(result)})
		}()
	}
}

// TestEdgeRelaysUpstreamMessages: logging, progress and an elicitation
// request from the upstream reach a go-sdk client during its call, and the
// client's answer reaches the worker, on the fast path and the SDK path,
// with SSE and JSON responses.
func TestEdgeRelaysUpstreamMessages(t *testing.T) {
	for _, o := range []rigOpts{{sse: true}, {sse: true, noFastPath: true}, {}, {noFastPath: true}} {
		for _, progress := range []bool{false, true} {
			t.Run(fmt.Sprintf("sse=%v/fast=%v/progress=%v", o.sse, !o.noFastPath, progress), func(t *testing.T) {
				var nc *nats.Conn
				g := newRigWith(t, chattyWorker(t, &nc), &o)
				nc = g.nc
				var mu sync.Mutex
				var logs, progresses []string
				client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
					LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
						mu.Lock()
						logs = append(logs, fmt.Sprint(r.Params.Data))
						mu.Unlock()
					},
					ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
						mu.Lock()
						progresses = append(progresses, fmt.Sprint(r.Params.Progress))
						mu.Unlock()
					},
					ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"tags": []any{"a"}}}, nil
					},
				})
				cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
				params := &mcp.CallToolParams{Name: "up__x", Arguments: map[string]any{}}
				if progress {
					params.Meta = mcp.Meta{"progressToken": "tok-1"}
				}
				res, err := cs.CallTool(t.Context(), params)
				if err != nil {
					t.Fatal(err)
				}
				text := res.Content[0].(*mcp.TextContent).Text
				if !strings.Contains(text, `"action":"accept"`) || !strings.Contains(text, `"tags":["a"]`) {
					t.Fatalf("the worker got %s, want the client's elicitation answer", text)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					mu.Lock()
					done := len(logs) == 1 && (!progress || len(progresses) == 1)
					l, p := append([]string(nil), logs...), append([]string(nil), progresses...)
					mu.Unlock()
					if done {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("logs %v, progress %v", l, p)
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
	}
}

// TestEdgeLegacySSE: a go-sdk client on the legacy HTTP+SSE transport gets
// its calls answered over the bus, its session carries an edge-made id to
// the workers, and upstream messages reach it.
func TestEdgeLegacySSE(t *testing.T) {
	var nc *nats.Conn
	var mu sync.Mutex
	sessions := map[string]bool{}
	chatty := chattyWorker(t, &nc)
	g := newRig(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		mu.Lock()
		sessions[req.Session] = true
		mu.Unlock()
		chatty(m)
	})
	nc = g.nc
	var logs int
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs++
			mu.Unlock()
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.SSEClientTransport{Endpoint: strings.Replace(g.url, "/mcp", "/sse/up", 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "x", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"action":"decline"`) {
		t.Fatalf("the worker got %s", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sessions) != 1 || sessions[""] {
		t.Fatalf("sessions seen by the workers: %v, want one edge-made id", sessions)
	}
	for id := range sessions {
		if !strings.HasPrefix(id, "edge-t-sse-") {
			t.Fatalf("session id %q", id)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); logs != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d log messages, want 1", logs)
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
	}
}

// TestEdgeBridgesRequestsFor2026 : a 2026-07-28 client cannot be sent an
// elicitation request, so the edge answers its call with an input_required
// result, and the go-sdk client's retry (inputResponses + requestState)
// brings the answer to the waiting worker and the rest of the same call
// back, on the fast path and the SDK path.
func TestEdgeBridgesRequestsFor2026(t *testing.T) {
	for _, o := range []rigOpts{{sse: true}, {sse: true, noFastPath: true}, {}} {
		t.Run(fmt.Sprintf("sse=%v/fast=%v", o.sse, !o.noFastPath), func(t *testing.T) {
			var nc *nats.Conn
			var calls atomic.Int32
			g := newRigWith(t, countCalls(&calls, chattyWorker(t, &nc)), &o)
			nc = g.nc
			asked := 0
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"tags": []any{"b"}}}, nil
				},
			})
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__x", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, `"action":"accept"`) || !strings.Contains(text, `"tags":["b"]`) || asked != 1 {
				t.Fatalf("the worker got %s after %d questions, want the client's answer after 1", text, asked)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d calls reached the router, want 1 (the retry resumes the same call)", n)
			}
		})
	}
}

// TestEdgeBridgeUnknownState: a retry naming a requestState the edge does
// not hold is invalid params, and nothing reaches the router.
func TestEdgeBridgeUnknownState(t *testing.T) {
	reached := make(chan struct{}, 1)
	g := newRig(t, func(*nats.Msg) { reached <- struct{}{} })
	code, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},"requestState":"sy-bridge:nope","inputResponses":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x")
	if !strings.Contains(body, `-32602`) || !strings.Contains(body, "requestState") {
		t.Fatalf("HTTP %d %s, want -32602 about the requestState", code, body)
	}
	select {
	case <-reached:
		t.Fatal("the retry reached the router")
	default:
	}
}

// TestEdgeBridgeRespectsCapabilities: a 2026-07-28 client that did not
// declare elicitation is not asked for it (SEP-2322): the upstream's
// request is refused and the call goes on without an input_required.
func TestEdgeBridgeRespectsCapabilities(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, chattyWorker(t, &nc), &rigOpts{sse: true})
	nc = g.nc
	code, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x")
	if code != 200 || strings.Contains(body, "input_required") || !strings.Contains(body, "did not declare the elicitation capability") {
		t.Fatalf("HTTP %d %s", code, body)
	}
}

// TestEdgeBridgeStateBelongsToItsCall: a requestState is honoured only for
// the request it was given to; another request gets -32602 and the state
// stays valid for its own.
func TestEdgeBridgeStateBelongsToItsCall(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, chattyWorker(t, &nc), nil)
	nc = g.nc
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	call := func(name, extra string) string {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{}`+extra+`,`+meta+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		return body
	}
	first := call("up__x", "")
	var res struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &res); err != nil || !strings.HasPrefix(res.Result.RequestState, bridgePrefix) {
		t.Fatalf("first answer %s", first)
	}
	retry := `,"requestState":"` + res.Result.RequestState + `","inputResponses":{"` + inputKey + `":{"action":"accept","content":{"tags":["a"]}}}`
	if other := call("up__other", retry); !strings.Contains(other, "belongs to another request") {
		t.Fatalf("a retry of another tool got %s", other)
	}
	if own := call("up__x", retry); !strings.Contains(own, `\"action\":\"accept\"`) {
		t.Fatalf("the call's own retry got %s", own)
	}
}

// TestEdgeLogLevelGate: a 2026-07-28 call receives the upstream's log
// messages only at or above the level its _meta asks for, none without one
// (SEP-2575); other messages are not affected.
func TestEdgeLogLevelGate(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, chattyWorker(t, &nc), &rigOpts{sse: true})
	nc = g.nc
	for _, c := range []struct {
		level string // "" : none
		logs  bool
	}{{`"debug"`, true}, {`"info"`, true}, {`"error"`, false}, {"", false}} {
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
		if c.level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":` + c.level
		}
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},"_meta":{`+meta+`}}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x")
		if got := strings.Contains(body, "notifications/message"); got != c.logs {
			t.Errorf("level %s: log message delivered %v, want %v: %s", c.level, got, c.logs, body)
		}
	}
}
