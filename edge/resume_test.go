package edge

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
