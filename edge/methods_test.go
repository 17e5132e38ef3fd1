package edge

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeForwardsEveryMethod: each forwarded MCP method is published on
// its route subject with the name or URI the router routes by, and the
// worker's result bytes reach the client.
func TestEdgeForwardsEveryMethod(t *testing.T) {
	var mu sync.Mutex
	var got []proto.Request
	var subjects []string
	var nc *nats.Conn
	g := newRig(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		mu.Lock()
		got, subjects = append(got, req), append(subjects, m.Subject)
		mu.Unlock()
		reply(nc, m, &proto.Reply{Result: []byte(`{"x-from":"upstream"}`)})
	})
	nc = g.nc
	g.initialize()
	tests := []struct {
		method, params, op, name string
	}{
		{"prompts/list", `{}`, proto.OpPromptsList, ""},
		{"prompts/get", `{"name":"up__greet","arguments":{"who":"w"}}`, proto.OpPromptsGet, "up__greet"},
		{"resources/list", `{}`, proto.OpResourcesList, ""},
		{"resources/templates/list", `{}`, proto.OpResourceTemplatesList, ""},
		{"resources/read", `{"uri":"test://a"}`, proto.OpResourcesRead, "test://a"},
		{"resources/subscribe", `{"uri":"test://a"}`, proto.OpResourcesSubscribe, "test://a"},
		{"resources/unsubscribe", `{"uri":"test://a"}`, proto.OpResourcesUnsubscribe, "test://a"},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"up__greet"},"argument":{"name":"who","value":"a"}}`, proto.OpCompletionComplete, ""},
		{"logging/setLevel", `{"level":"debug"}`, proto.OpLoggingSetLevel, ""},
	}
	for i, tc := range tests {
		res, e := g.call(tc.method, tc.params)
		if e != nil {
			t.Fatalf("%s: error %+v", tc.method, e)
		}
		if tc.method != "logging/setLevel" && tc.method != "resources/subscribe" && tc.method != "resources/unsubscribe" &&
			!strings.Contains(string(res), `"x-from":"upstream"`) {
			t.Errorf("%s: result %s, want the upstream's bytes", tc.method, res)
		}
		mu.Lock()
		if len(got) != i+1 {
			mu.Unlock()
			t.Fatalf("%s: %d requests published, want %d", tc.method, len(got), i+1)
		}
		req, subj := got[i], subjects[i]
		mu.Unlock()
		if proto.LastToken(subj) != tc.op || req.Method != tc.method || req.Name != tc.name || req.Session != g.sid {
			t.Errorf("%s: published on %s %+v, want op %s name %q", tc.method, subj, req, tc.op, tc.name)
		}
	}
}

// TestEdgeListChangedPerKind: a list_changed event of each kind makes the
// client session receive that kind's notification.
func TestEdgeListChangedPerKind(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true})
	g.initialize()
	stream := g.openGET()
	for _, c := range []struct{ kind, notification string }{
		{proto.KindPrompts, "notifications/prompts/list_changed"},
		{proto.KindResourceTemplates, "notifications/resources/list_changed"},
		{proto.KindTools, "notifications/tools/list_changed"},
	} {
		subj, _ := proto.EvtListChangedSubject("default")
		data, _ := proto.Marshal(&proto.ListChanged{Tenant: "default", Kind: c.kind, Upstreams: []string{"up"}})
		if err := g.nc.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
		if !stream.waitFor(c.notification, 5*time.Second) {
			t.Fatalf("%s: no %s on the GET stream", c.kind, c.notification)
		}
	}
}

// sseStream is a session's GET stream, read in the background.
type sseStream struct {
	mu   sync.Mutex
	data strings.Builder
}

// openGET opens the session's standalone GET stream.
func (g *rig) openGET() *sseStream {
	g.t.Helper()
	req, _ := http.NewRequestWithContext(g.t.Context(), http.MethodGet, g.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", g.sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	s := &sseStream{}
	go func() {
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			s.mu.Lock()
			s.data.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitFor reports whether text appeared on the stream within d.
func (s *sseStream) waitFor(text string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		ok := strings.Contains(s.data.String(), text)
		s.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// TestEdgeListChanged2026: a 2026-07-28 client hears of a list change on
// its subscriptions/listen stream, which the go-sdk client opens for its
// list-changed handlers.
func TestEdgeListChanged2026(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true})
	got := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { got <- struct{}{} },
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	time.Sleep(300 * time.Millisecond) // the client opens its listen stream after connecting
	subj, _ := proto.EvtListChangedSubject("default")
	data, _ := proto.Marshal(&proto.ListChanged{Tenant: "default", Kind: proto.KindTools, Upstreams: []string{"up"}})
	_ = g.nc.Publish(subj, data)
	select {
	case <-got:
	case <-time.After(3 * time.Second):
		t.Fatal("no list_changed on the 2026 subscription")
	}
}
