package stdiofront

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// rawGateway is a hand-written streamable HTTP server: it echoes ids as
// they were sent (the go-sdk server turns them into float64), answers in
// pretty-printed JSON or in SSE events whose data spans several lines,
// and fails on demand.
type rawGateway struct {
	url     string
	sse     bool
	deletes atomic.Int32
	// get serves the GETs (nil: 405).
	get func(w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	headers map[string]http.Header // guarded by mu: the headers of each POST, by method
}

func newRawGateway(t *testing.T, sse bool) *rawGateway {
	g := &rawGateway{sse: sse, headers: map[string]http.Header{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/mcp"
	return g
}

func (g *rawGateway) posted(method string) http.Header {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.headers[method]
}

func (g *rawGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodHead:
		return
	case http.MethodGet:
		if g.get == nil {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
			return
		}
		g.get(w, r)
		return
	case http.MethodDelete:
		g.deletes.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var id []byte
	var method string
	jsonscan.Members(body, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "id"):
			id = v
		case jsonscan.KeyIs(k, "method"):
			method = jsonscan.Unquote(v)
		}
	})
	g.mu.Lock()
	g.headers[method] = r.Header.Clone()
	g.mu.Unlock()
	result := fmt.Sprintf(`{"method": %q}`, method)
	switch method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "raw-1")
		result = `{"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "raw", "version": "1"}}`
	case "fail/text", "fail/notify":
		http.Error(w, "boom\nmore detail", http.StatusInternalServerError)
		return
	case "fail/rpc":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32042,"message":"nope"}}`)
		return
	case "fail/rpc200":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
		return
	case "empty/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": nothing to say\n\n")
		return
	case "resume/me":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: p-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		return // the stream ends before the answer
	}
	if id == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	msg := fmt.Sprintf("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"result\": %s\n}", id, result)
	if !g.sse {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, msg+"\n")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: message\nid: e-1\ndata: "+strings.ReplaceAll(msg, "\n", "\ndata: ")+"\n\n")
}

// TestStdioFrontIDsExact: ids reach the client byte for byte, integers
// beyond 2^53 included, from a JSON body and from SSE data spread over
// several lines (joined, then compacted onto one line); the session and
// protocol version headers follow the initialize exchange.
func TestStdioFrontIDsExact(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			g := newRawGateway(t, sse)
			r := startBridge(t, g.url, nil)
			r.send(initLine)
			r.expect(`"id":0`)
			if h := g.posted("initialize"); h.Get("Mcp-Session-Id") != "" || h.Get("Mcp-Protocol-Version") != "" {
				t.Fatalf("initialize sent session headers: %v", h)
			}
			r.send(initializedLine)
			for _, id := range []string{`9007199254740993`, `-12345678901234567890123`, `1.50`, `"caf\u00e9"`, `"s-1"`} {
				r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
				if got, want := r.line(), `{"jsonrpc":"2.0","id":`+id+`,"result":{"method":"tools/list"}}`; got != want {
					t.Fatalf("stdout\n got %s\nwant %s", got, want)
				}
			}
			h := g.posted("tools/list")
			if h.Get("Mcp-Session-Id") != "raw-1" || h.Get("Mcp-Protocol-Version") != "2025-11-25" {
				t.Fatalf("tools/list headers: session %q version %q", h.Get("Mcp-Session-Id"), h.Get("Mcp-Protocol-Version"))
			}
			if h.Get("Accept") != "application/json, text/event-stream" || h.Get("Content-Type") != "application/json" {
				t.Fatalf("tools/list headers: %v", h)
			}
			if err := r.finish(); err != nil {
				t.Fatal(err)
			}
			if g.deletes.Load() != 1 {
				t.Fatalf("%d DELETEs", g.deletes.Load())
			}
		})
	}
}

// TestStdioFrontHTTPErrors: every request gets an answer, whatever the
// gateway did; a failed notification writes nothing.
func TestStdioFrontHTTPErrors(t *testing.T) {
	g := newRawGateway(t, false)
	r := startBridge(t, g.url, func(c *Config) { c.Header = http.Header{"Authorization": {"Bearer t0k"}} })
	r.send(`{"jsonrpc":"2.0","id":1,"method":"fail/text"}`)
	r.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"switchyard stdio: the gateway answered HTTP 500 Internal Server Error: boom"}}`)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"fail/rpc"}`)
	if got, want := r.line(), `{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"nope"}}`; got != want {
		t.Fatalf("stdout\n got %s\nwant %s", got, want)
	}
	r.send(`{"jsonrpc":"2.0","id":"x","method":"fail/rpc200"}`)
	if got, want := r.line(), `{"jsonrpc":"2.0","id":"x","error":{"code":-32700,"message":"Parse error"}}`; got != want {
		t.Fatalf("stdout\n got %s\nwant %s", got, want)
	}
	r.send(`{"jsonrpc":"2.0","method":"fail/notify"}`)
	r.send(`{"jsonrpc":"2.0","id":3,"method":"empty/stream"}`)
	r.expect(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,`, `without answering`)
	r.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	r.expect(`{"jsonrpc":"2.0","id":4,"result":`)
	if got := g.posted("ping").Get("Authorization"); got != "Bearer t0k" {
		t.Fatalf("Authorization %q", got)
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
}

// TestStdioFrontGETStream: the GET stream opens after
// notifications/initialized with the session headers, and when it drops
// it reconnects with Last-Event-ID. A POST stream that ends before its
// answer is resumed with GET and Last-Event-ID too.
func TestStdioFrontGETStream(t *testing.T) {
	g := newRawGateway(t, true)
	var gets atomic.Int32
	lastIDs := make(chan string, 8)
	g.get = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "raw-1" || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "bad headers", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		last := r.Header.Get("Last-Event-ID")
		if last == "p-1" { // resuming the POST stream of resume/me
			_, _ = io.WriteString(w, "id: p-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"resumed\":true}}\n\n")
			return
		}
		lastIDs <- last
		switch gets.Add(1) {
		case 1:
			_, _ = io.WriteString(w, "retry: 1\nid: ev-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"A\"}}\n\n")
		default:
			_, _ = io.WriteString(w, "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"B\"}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}
	r := startBridge(t, g.url, nil)
	r.send(initLine)
	r.expect(`"id":0`)
	r.send(initializedLine)
	r.expect(`"data":"A"`)
	r.expect(`"data":"B"`)
	if first, second := recv(t, lastIDs, "first GET"), recv(t, lastIDs, "second GET"); first != "" || second != "ev-1" {
		t.Fatalf("Last-Event-ID %q then %q, want none then ev-1", first, second)
	}
	r.send(`{"jsonrpc":"2.0","id":5,"method":"resume/me"}`)
	r.expect(`"method":"notifications/progress"`)
	if got, want := r.line(), `{"jsonrpc":"2.0","id":5,"result":{"resumed":true}}`; got != want {
		t.Fatalf("stdout\n got %s\nwant %s", got, want)
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if g.deletes.Load() != 1 {
		t.Fatalf("%d DELETEs", g.deletes.Load())
	}
}

// TestStdioFrontHeaders2026: a message naming protocol version 2026-07-28
// in _meta goes out with that version and the Mcp-Method and Mcp-Name
// headers; a later notification keeps the version.
func TestStdioFrontHeaders2026(t *testing.T) {
	g := newRawGateway(t, false)
	r := startBridge(t, g.url, nil)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	r.expect(`"id":1,"result"`)
	h := g.posted("tools/call")
	if h.Get("Mcp-Protocol-Version") != "2026-07-28" || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "echo" || h.Get("Mcp-Session-Id") != "" {
		t.Fatalf("headers %v", h)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	r.expect(`"id":2,"result"`)
	// The notification's POST went out before the ping's, on its own
	// connection: the server may see it a little later.
	eventually(t, "the notification reaches the gateway", func() bool { return g.posted("notifications/cancelled") != nil })
	if v := g.posted("notifications/cancelled").Get("Mcp-Protocol-Version"); v != "2026-07-28" {
		t.Fatalf("notification version %q", v)
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if g.deletes.Load() != 0 {
		t.Fatalf("DELETE without a session")
	}
}
