package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeCancelledCallGetsNoAnswer: after notifications/cancelled for a
// call in flight, the client gets no response to it, though the upstream
// answers anyway, on the fast path and the SDK path, JSON and SSE
// responses: the call's POST ends with an SSE stream holding no response.
// A cancellation of a request not in flight (an unknown id, the session's
// initialize) is accepted with 202 and no body, and the session goes on.
func TestEdgeCancelledCallGetsNoAnswer(t *testing.T) {
	for _, o := range []rigOpts{{}, {sse: true}, {noFastPath: true}, {noFastPath: true, sse: true}} {
		t.Run(fmt.Sprintf("sse=%v/fast=%v", o.sse, !o.noFastPath), func(t *testing.T) {
			var nc *nats.Conn
			held := make(chan *nats.Msg, 1)
			answer := make(chan struct{})
			g := newRigWith(t, func(m *nats.Msg) {
				var req proto.Request
				if proto.Unmarshal(m.Data, &req) != nil {
					return
				}
				if req.Name != "up__late" {
					scriptedRouter(&nc, nil)(m)
					return
				}
				held <- m
				go func() {
					<-answer // the upstream answers after the cancellation
					reply(nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"late"}]}`)})
				}()
			}, &o)
			nc = g.nc
			g.initialize()
			type result struct {
				code int
				body string
				ct   string
			}
			first := make(chan result, 1)
			go func() {
				code, body, h := g.post(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__late"}}`)
				first <- result{code, body, h.Get("Content-Type")}
			}()
			select {
			case <-held:
			case <-time.After(5 * time.Second):
				t.Fatal("the call never reached the router")
			}
			code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"reason":"test"}}`)
			if code != http.StatusAccepted || body != "" {
				t.Fatalf("cancel: %d %q", code, body)
			}
			time.Sleep(100 * time.Millisecond)
			close(answer)
			select {
			case r := <-first:
				if r.code != http.StatusOK || !strings.HasPrefix(r.ct, "text/event-stream") {
					t.Errorf("cancelled call's POST: %d %q %q, want 200 and an SSE stream", r.code, r.ct, r.body)
				}
				for _, line := range strings.Split(r.body, "\n") {
					if d, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(d) != "" {
						var msg struct {
							ID     json.RawMessage `json:"id"`
							Method string          `json:"method"`
						}
						if json.Unmarshal([]byte(d), &msg) == nil && msg.Method == "" && len(msg.ID) > 0 {
							t.Errorf("cancelled call answered: %s", d)
						}
					}
				}
			case <-time.After(5 * time.Second):
				t.Fatal("cancelled call's POST still open")
			}
			for _, id := range []string{`4242`, `"nobody"`, `0`} { // 0: the initialize
				code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`)
				if code != http.StatusAccepted || body != "" {
					t.Errorf("cancel of %s: %d %q", id, code, body)
				}
			}
			// The id is free again, and the session serves calls.
			if ex := g.exchange(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__odd"}}`); !strings.Contains(fmt.Sprint(ex.Body), "hologram") {
				t.Fatalf("a call after the cancellation: %+v", ex)
			}
		})
	}
}

// TestEdgeCancelAtAnotherEdge: a client whose POSTs a load balancer
// spreads over the edges cancels a call running at edge A with a
// notifications/cancelled that reaches edge B: B forwards it, and A
// cancels the call (no response), on the fast path and the SDK path.
func TestEdgeCancelAtAnotherEdge(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", !sdk), func(t *testing.T) {
			var nc *nats.Conn
			held := make(chan *nats.Msg, 1)
			a := newRigWith(t, func(m *nats.Msg) {
				var req proto.Request
				if proto.Unmarshal(m.Data, &req) != nil {
					return
				}
				if req.Name == "up__late" {
					held <- m // never answered: only a cancellation ends it
					return
				}
				scriptedRouter(&nc, nil)(m)
			}, &rigOpts{sse: true, noFastPath: sdk})
			nc = a.nc
			b := newRigWith(t, nil, &rigOpts{sse: true, noFastPath: sdk, server: a.srv, id: "edge-u"})
			a.initialize()
			b.sid = a.sid
			done := make(chan string, 1)
			go func() {
				_, body, _ := a.post(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__late"}}`)
				done <- body
			}()
			select {
			case <-held:
			case <-time.After(5 * time.Second):
				t.Fatal("the call never reached the router")
			}
			if code, body, _ := b.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42}}`); code != http.StatusAccepted {
				t.Fatalf("cancel at the other edge: %d %s", code, body)
			}
			select {
			case body := <-done:
				if strings.Contains(body, `"id":42`) {
					t.Errorf("the cancelled call was answered: %s", body)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the call at edge A still runs after its cancellation at edge B")
			}
		})
	}
}
