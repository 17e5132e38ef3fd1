package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeFastPathResumable: a 2025-era fast-path SSE response starts with
// a priming event (an id, empty data, a retry delay); a client whose
// stream broke gets the response by resuming with Last-Event-ID (SEP-1699),
// served from the event store the SDK shares with the fast path.
func TestEdgeFastPathResumable(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) {
		go func() {
			time.Sleep(300 * time.Millisecond)
			reply(nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"late"}]}`)})
		}()
	}, &rigOpts{sse: true})
	nc = g.nc
	g.initialize()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url,
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": g.sid, "Mcp-Protocol-Version": "2025-11-25"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var lastID string
	var sawRetry bool
	for line, err := br.ReadString('\n'); ; line, err = br.ReadString('\n') {
		if err != nil {
			t.Fatalf("stream ended before its priming event: %v", err)
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			lastID = strings.TrimSpace(id)
		}
		sawRetry = sawRetry || strings.HasPrefix(line, "retry: ")
		if line == "\n" {
			break // the end of the first event
		}
	}
	resp.Body.Close() // the stream breaks before the response
	if lastID == "" || !sawRetry {
		t.Fatalf("priming event without id (%q) or retry (%v)", lastID, sawRetry)
	}
	time.Sleep(500 * time.Millisecond) // the call completes meanwhile
	get, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url, nil)
	for k, v := range map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": g.sid,
		"Mcp-Protocol-Version": "2025-11-25", "Last-Event-ID": lastID} {
		get.Header.Set(k, v)
	}
	gresp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer gresp.Body.Close()
	body, _ := io.ReadAll(gresp.Body)
	if gresp.StatusCode != 200 || !strings.Contains(string(body), `"id":9,"result":{"content":[{"type":"text","text":"late"}]}`) {
		t.Fatalf("resumed stream: HTTP %d %s", gresp.StatusCode, body)
	}
}

// TestEdgeQuickCallUnprimed: a call answered before the stream needs
// priming goes out as one event without an id (nothing to resume).
func TestEdgeQuickCallUnprimed(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) {
		reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)})
	}, &rigOpts{sse: true})
	nc = g.nc
	g.initialize()
	code, body, h := g.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, `"id":3,"result":{"content":[]}`) {
		t.Fatalf("HTTP %d %s %s", code, h.Get("Content-Type"), body)
	}
	if strings.Contains(body, "id: ") || !strings.Contains(body, "retry: ") {
		t.Fatalf("a quick call's stream carries ids, or no retry delay: %q", body)
	}
}

// bodyRouter sends the POSTs whose body holds a requestState to other
// and everything else to the URL the client was given: a follow-up always
// lands on the edge that did not suspend the call.
type bodyRouter struct{ other string }

func (b bodyRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if bytes.Contains(body, []byte(`"requestState"`)) {
			u, _ := url.Parse(b.other)
			r.URL.Host = u.Host
			r.Host = u.Host
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestEdgeResumesAtHoldingEdge: a 2026-07-28 client whose follow-up to a
// call suspended for its input (SEP-2322) reaches another edge gets the
// rest of the same call: the receiving edge sends the follow-up to the
// edge holding the call, on the fast path and the SDK path.
func TestEdgeResumesAtHoldingEdge(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			var nc *nats.Conn
			var calls atomic.Int32
			a := newRigWith(t, countCalls(&calls, chattyWorker(t, &nc)), &rigOpts{sse: true, noFastPath: !fast})
			nc = a.nc
			b := newRigWith(t, nil, &rigOpts{sse: true, noFastPath: !fast, server: a.srv, id: "edge-u"})
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"tags": []any{"b"}}}, nil
				},
			})
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: a.url, HTTPClient: &http.Client{Transport: bodyRouter{other: b.url}}},
				&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__x", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"action":"accept"`) || !strings.Contains(text, `"tags":["b"]`) {
				t.Fatalf("the worker got %s, want the client's answer", text)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d calls reached the router, want 1 (the follow-up resumes the same call)", n)
			}
		})
	}
}

// TestEdgeResumeAtHoldingEdgeRelaysMessages: the messages the upstream
// sends after the client's answer (here a progress notification), and the
// next input request, reach the client through the edge its follow-up
// reached; a follow-up of another tenant's caller or for another tool is
// refused there as at the holding edge, and one whose holding edge is
// gone is -32602 naming it.
func TestEdgeResumeAtHoldingEdgeRelaysMessages(t *testing.T) {
	var nc *nats.Conn
	const elicit = `{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}`
	a := newRigWith(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		if req.Method != "tools/call" {
			reply(nc, m, &proto.Reply{Result: []byte(`{"tools":[]}`)})
			return
		}
		go func() {
			inbox := nc.NewInbox()
			sub, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Error(err)
				return
			}
			defer sub.Unsubscribe()
			var answers []string
			for range 2 { // asks twice: the second question suspends the call again
				_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Reply: inbox, Data: []byte(elicit), Header: nats.Header{proto.HdrMessage: []string{"1"}}})
				ans, err := sub.NextMsg(5 * time.Second)
				if err != nil {
					return
				}
				answers = append(answers, string(ans.Data))
				_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"pt","progress":` + fmt.Sprint(len(answers)) + `}}`),
					Header: nats.Header{proto.HdrMessage: []string{"1"}}})
			}
			q, _ := json.Marshal(strings.Join(answers, "|"))
			reply(nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":` + string(q) + `}]}`)})
		}()
	}, &rigOpts{sse: true})
	nc = a.nc
	b := newRigWith(t, nil, &rigOpts{sse: true, server: a.srv, id: "edge-u"})
	const meta = `"_meta":{"progressToken":"pt","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	call := func(g *rig, name, extra string) string {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{}`+extra+`,`+meta+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		return body
	}
	stateOf := func(body string) string {
		i := strings.Index(body, `"requestState":"`)
		if i < 0 || !strings.Contains(body, "input_required") {
			t.Fatalf("no input_required result in %s", body)
		}
		rest := body[i+len(`"requestState":"`):]
		return rest[:strings.IndexByte(rest, '"')]
	}
	retry := func(state, answer string) string {
		return `,"requestState":"` + state + `","inputResponses":{"` + inputKey + `":{"action":"accept","content":{"n":"` + answer + `"}}}`
	}
	first := stateOf(call(a, "up__x", ""))
	if !strings.HasPrefix(first, bridgePrefix+"edge-t.") {
		t.Fatalf("requestState %q does not name its edge", first)
	}
	if other := call(b, "up__other", retry(first, "1")); !strings.Contains(other, "belongs to another request") {
		t.Fatalf("a follow-up for another tool at the other edge got %s", other)
	}
	second := call(b, "up__x", retry(first, "1"))
	if !strings.Contains(second, `"progress":1`) {
		t.Fatalf("the progress after the answer did not reach the client through the other edge: %s", second)
	}
	next := stateOf(second)
	if !strings.HasPrefix(next, bridgePrefix+"edge-t.") {
		t.Fatalf("the second requestState %q does not name the holding edge", next)
	}
	last := call(b, "up__x", retry(next, "2"))
	if !strings.Contains(last, `"progress":2`) || !strings.Contains(last, `\"n\":\"1\"`) || !strings.Contains(last, `\"n\":\"2\"`) {
		t.Fatalf("the last follow-up got %s, want the progress and both answers", last)
	}
	if again := call(b, "up__x", retry(next, "2")); !strings.Contains(again, "-32602") {
		t.Fatalf("a spent requestState got %s", again)
	}

	// The holding edge gone: its calls are gone with it.
	held := stateOf(call(a, "up__x", ""))
	a.stop()
	a.e.nc.Close() // off the bus
	if gone := call(b, "up__x", retry(held, "1")); !strings.Contains(gone, "-32602") || !strings.Contains(gone, "edge that held the call is gone") {
		t.Fatalf("a follow-up to a gone edge got %s", gone)
	}
}
