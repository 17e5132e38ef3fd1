package edge

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/switchyard-mcp/switchyard/proto"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
)

// TestEdgeAdoptWhileListenStreamOpen: a 2026-07-28 client's
// subscriptions/listen stream (a POST without a session id, held open)
// does not hold the view's newIDs lock, so an adoption on that view, and
// the new sessions after it, go on while the stream is open.
func TestEdgeAdoptWhileListenStreamOpen(t *testing.T) {
	var got seen
	var nc *nats.Conn
	a := newRigWith(t, adoptRouter(&nc, &got), &rigOpts{})
	nc = a.nc
	b := newRigWith(t, nil, &rigOpts{server: a.srv, id: "edge-u", sse: true})
	a.initialize()

	// A 2026 client on B keeps a listen stream open (as the go-sdk client
	// does for its list-changed handlers).
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: b.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	time.Sleep(500 * time.Millisecond) // the client opens its listen stream after connecting

	// A's session reaches B: B adopts it.
	b.sid = a.sid
	done := make(chan int, 1)
	go func() {
		code, _, _ := b.post(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		done <- code
	}()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("ping on B: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("adoption on B hangs while a 2026 listen stream is open on the view (view.newIDs)")
	}
}

// TestEdgeLateRouterCallRunsOnce: a router that is late, not dead (its
// heartbeats stop, then it resumes and places what it held) does not get
// its calls run twice: the edge fails them "may still run" and never
// sends them to another router.
func TestEdgeLateRouterCallRunsOnce(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 30 * time.Second }})
	g.initialize()
	var runs atomic.Int32
	resumed := make(chan struct{})
	late := startFakeRouter(t, g, "router-late", func(fr *fakeRouter, m *nats.Msg) {
		data := append([]byte(nil), m.Data...)
		reply := m.Reply
		go func() {
			<-resumed // the router is back: it places what it held
			var r proto.Request
			if proto.Unmarshal(data, &r) == nil && r.DeadlineUnixMs > time.Now().UnixMilli() {
				runs.Add(1) // placed on a worker, which runs it
				_ = reply
			}
		}()
	})
	deadline := time.Now().Add(5 * time.Second)
	for !g.e.routers.Live("router-late") {
		if time.Now().After(deadline) {
			t.Fatal("router not seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
		out <- body
	}()
	for late.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	late.die() // its heartbeats stop arriving (reconnecting), it is not dead
	startFakeRouter(t, g, "router-good", func(fr *fakeRouter, m *nats.Msg) {
		runs.Add(1)
		reply(fr.nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"ok"}]}`)})
	})
	select {
	case body := <-out:
		t.Logf("client got %s", body)
	case <-time.After(20 * time.Second):
		t.Fatal("call not answered")
	}
	close(resumed)
	time.Sleep(200 * time.Millisecond)
	if n := runs.Load(); n != 1 {
		t.Fatalf("one tools/call was placed %d times (re-sent while the late router still held it)", n)
	}
}

// TestEdgeAdoptAtCapNot404: an edge at its session cap refuses to adopt a
// live session with 503 and Retry-After, not a 404 that would tell the
// client its session is over.
func TestEdgeAdoptAtCapNot404(t *testing.T) {
	var got seen
	var nc *nats.Conn
	a := newRigWith(t, adoptRouter(&nc, &got), &rigOpts{})
	nc = a.nc
	b := newRigWith(t, nil, &rigOpts{server: a.srv, id: "edge-u", cfg: func(c *Config) { c.MaxSessions = 1 }})
	b.initialize() // B holds its one session
	a.initialize()
	b.sid = a.sid
	code, body, _ := b.post(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	if code == http.StatusNotFound {
		t.Fatalf("a live session reaching a full edge is answered %d %q: the client must start over", code, body)
	}
}

// TestEdgeAdoptionRecordsActivity: the adopting edge's first request
// rewrites the record's activity time, so the origin edge's idle timer
// sees the session in use and drops only its own copy.
func TestEdgeAdoptionRecordsActivity(t *testing.T) {
	const idle = 2 * time.Second
	var got seen
	var nc *nats.Conn
	a := newRigWith(t, adoptRouter(&nc, &got), &rigOpts{sessionTimeout: idle})
	nc = a.nc
	b := newRigWith(t, nil, &rigOpts{server: a.srv, id: "edge-u", sessionTimeout: idle})
	start := time.Now()
	a.initialize() // record Active = start
	time.Sleep(250 * time.Millisecond)
	a.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`) // A's idle timer: ~start+2.25s
	time.Sleep(250 * time.Millisecond)
	b.sid = a.sid
	if code, body, _ := b.post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); code != http.StatusOK { // adopted at ~0.5s
		t.Fatalf("ping on B: %d %s", code, body)
	}
	time.Sleep(250 * time.Millisecond)
	if code, body, _ := b.post(`{"jsonrpc":"2.0","id":4,"method":"ping"}`); code != http.StatusOK { // last use ~0.75s
		t.Fatalf("ping on B: %d %s", code, body)
	}
	time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
	// Last use ~0.75 s ago... 1.75 s: within the 2 s idle timeout.
	if code, body, _ := b.post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); code != http.StatusOK {
		t.Fatalf("session used %v ago on B ended by A's idle timer: %d %q", time.Since(start)-750*time.Millisecond, code, body)
	}
}
