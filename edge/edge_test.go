package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// rig is an edge on embedded NATS with a fake router the test scripts.
type rig struct {
	t    testing.TB
	nc   *nats.Conn
	e    *Service
	url  string
	sid  string
	next int
	srv  *server.Server // its NATS server
	stop func()         // stops the edge (once; also at cleanup)
}

func newRig(t *testing.T, router nats.MsgHandler) *rig {
	return newRigWith(t, router, nil)
}

// rigOpts vary the edge of a rig.
type rigOpts struct {
	sse            bool           // answer POSTs with SSE (default JSON)
	noFastPath     bool           // every request through the SDK
	sessionTimeout time.Duration  // 0: the default
	tenancy        tenancy.Source // nil: the default tenant alone
	auth           AuthConfig
	audit          *audit.Config  // nil: no audit trail
	log            *slog.Logger   // nil: discard
	trustedProxies []netip.Prefix // besides loopback peers
	cfg            func(*Config)  // last changes to the edge's Config
	server         *server.Server // the NATS server to use (nil: a new one)
	id             string         // the edge's id ("": edge-t)
}

// newRigWith is newRig with an edge configured by o (nil: the defaults).
func newRigWith(t testing.TB, router nats.MsgHandler, o *rigOpts) *rig {
	if o == nil {
		o = &rigOpts{}
	}
	s := o.server
	if s == nil {
		s = provisiontest.Start(t)
	}
	nc := natstest.Connect(t, s)
	js, _ := jetstream.New(nc)
	kv, err := bus.Bucket(t.Context(), js, proto.BucketUpstreams)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := proto.Marshal(&proto.UpstreamSpec{Name: "up", Transport: proto.TransportStreamable, URL: "http://x"})
	if _, err := kv.Put(t.Context(), "up", spec); err != nil {
		t.Fatal(err)
	}
	if router != nil {
		if _, err := nc.QueueSubscribe(proto.SubjRouteAll, proto.QueueRouter, router); err != nil {
			t.Fatal(err)
		}
	}
	edgeID := o.id
	if edgeID == "" {
		edgeID = "edge-t"
	}
	cfg := Config{ID: edgeID, Listen: "127.0.0.1:0", JSONResponse: !o.sse, CallTimeout: 5 * time.Second,
		MaxRequestBodyBytes: 64 << 10, SessionTimeout: o.sessionTimeout, Tenancy: o.tenancy, Auth: o.auth, Audit: o.audit, TrustedProxies: o.trustedProxies}
	if cfg.Tenancy == nil {
		cfg.Tenancy = tenancy.Static{Snap: tenancy.NewSnapshot(config.DefaultTenants(), nil)}
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	e, err := New(cfg, natstest.Connect(t, s), o.log)
	if err != nil {
		t.Fatal(err)
	}
	e.noFastPath = o.noFastPath
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("edge did not stop")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(5 * time.Second)
	for !e.Ready() || e.Addr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("edge not ready")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return &rig{t: t, nc: nc, e: e, url: "http://" + e.Addr() + "/mcp", srv: s, stop: stop}
}

// post sends one JSON-RPC message and returns the status and body.
func (g *rig) post(body string, hdr ...string) (int, string, http.Header) {
	g.t.Helper()
	req, _ := http.NewRequestWithContext(g.t.Context(), http.MethodPost, g.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if g.sid != "" {
		req.Header.Set("Mcp-Session-Id", g.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not a Host header
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (g *rig) initialize() {
	g.t.Helper()
	code, body, h := g.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if code != 200 {
		g.t.Fatalf("initialize: %d %s", code, body)
	}
	g.sid = h.Get("Mcp-Session-Id")
	if code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		g.t.Fatalf("initialized: %d %s", code, body)
	}
	// The SDK handles the notification after answering 202; until then the
	// session's calls go through the SDK, not the fast path.
	deadline := time.Now().Add(5 * time.Second)
	for cs := g.e.sessions.get(g.sid); !g.e.noFastPath && (cs == nil || !cs.ready.Load()); cs = g.e.sessions.get(g.sid) {
		if time.Now().After(deadline) {
			g.t.Fatal("session not ready for the fast path")
		}
		time.Sleep(time.Millisecond)
	}
}

func (g *rig) call(method, params string) (result json.RawMessage, rpcErr *struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}) {
	g.t.Helper()
	g.next++
	code, body, _ := g.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, g.next, method, params))
	if code != 200 {
		g.t.Fatalf("%s: HTTP %d %s", method, code, body)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		g.t.Fatalf("%s: %v: %s", method, err, body)
	}
	return resp.Result, resp.Error
}

func reply(nc *nats.Conn, m *nats.Msg, r *proto.Reply) { _ = bus.RespondReply(nc, m.Reply, r) }

func TestEdgeSessionIDCarriesEdge(t *testing.T) {
	g := newRig(t, nil)
	g.initialize()
	if !strings.HasPrefix(g.sid, "edge-t-") {
		t.Fatalf("session id %q does not carry the edge id", g.sid)
	}
}

func TestEdgeRawResultPassesThrough(t *testing.T) {
	const raw = `{"content":[{"type":"hologram","depth":12345678901234567890}],"isError":false}`
	var got proto.Request
	var nc *nats.Conn
	g := newRig(t, func(m *nats.Msg) {
		_ = proto.Unmarshal(m.Data, &got)
		reply(nc, m, &proto.Reply{Result: []byte(raw)})
	})
	nc = g.nc
	g.initialize()
	res, e := g.call("tools/call", `{"name":"up__x","arguments":{"n":1}}`)
	if e != nil || string(res) != raw {
		t.Fatalf("got %s %+v, want the upstream's bytes", res, e)
	}
	if got.Method != "tools/call" || got.Name != "up__x" || got.Session != g.sid || got.Edge != "edge-t" || got.Protocol != "2025-11-25" ||
		string(got.ClientCaps) != `{}` {
		t.Fatalf("published %+v", got)
	}
	if !strings.Contains(string(got.Params), `"arguments":{"n":1}`) {
		t.Fatalf("params %s", got.Params)
	}
}

func TestEdgeErrors(t *testing.T) {
	var nc *nats.Conn
	g := newRig(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		switch req.Name {
		case "up__gone": // placed on a worker that then says goodbye
			note := &nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{"w-gone"}}}
			_ = nc.PublishMsg(note)
			hb, _ := proto.Marshal(&proto.Heartbeat{Worker: "w-gone", Boot: 1, IntervalMs: 500, Bye: true})
			subj, _ := proto.EvtWorkerSubject("w-gone")
			_ = nc.Publish(subj, hb)
		case "up__slow": // never answered
		default:
			reply(nc, m, &proto.Reply{Error: &proto.Error{Code: proto.CodeInvalidParams, Msg: "unknown tool " + req.Name}})
		}
	})
	nc = g.nc
	// Make w-gone known first, so that its goodbye is a departure.
	hb, _ := proto.Marshal(&proto.Heartbeat{Worker: "w-gone", Boot: 1, IntervalMs: 500})
	subj, _ := proto.EvtWorkerSubject("w-gone")
	deadline := time.Now().Add(5 * time.Second)
	for !g.e.presence.Alive("w-gone") && time.Now().Before(deadline) {
		_ = nc.Publish(subj, hb)
		select {
		case <-t.Context().Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	g.initialize()
	tests := []struct {
		name, method, params string
		code                 int64
	}{
		{"unknown tool", "tools/call", `{"name":"up__nope"}`, int64(proto.CodeInvalidParams)},
		{"unknown method", "bogus/method", `{}`, -32601},
		{"worker lost", "tools/call", `{"name":"up__gone"}`, int64(proto.CodeWorkerLost)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, e := g.call(tc.method, tc.params)
			if e == nil || e.Code != tc.code {
				t.Fatalf("got %+v, want code %d", e, tc.code)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("took %s: should fail fast", d)
			}
		})
	}
	t.Run("malformed JSON", func(t *testing.T) {
		code, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":`)
		if code != http.StatusBadRequest {
			t.Fatalf("got %d %s", code, body)
		}
	})
	t.Run("oversize body", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__x","arguments":{"s":"` + strings.Repeat("a", 70<<10) + `"}}}`
		code, body, _ := g.post(big)
		if code != http.StatusRequestEntityTooLarge {
			t.Fatalf("got %d %s", code, body)
		}
	})
	t.Run("missing session id is 400", func(t *testing.T) {
		sid := g.sid
		g.sid = ""
		code, body, _ := g.post(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`)
		g.sid = sid
		if code != http.StatusBadRequest || !strings.Contains(body, "-32600") {
			t.Fatalf("got %d %s", code, body)
		}
	})
	t.Run("unknown passthrough upstream is 404", func(t *testing.T) {
		resp, err := http.Post(strings.TrimSuffix(g.url, "/mcp")+"/mcp/nope", "application/json", bytes.NewReader([]byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("got %d", resp.StatusCode)
		}
	})
}

func TestEdgeNoRouterFailsFast(t *testing.T) {
	g := newRig(t, nil)
	g.initialize()
	start := time.Now()
	_, e := g.call("tools/call", `{"name":"up__x"}`)
	if e == nil || e.Code != int64(proto.CodeUnavailable) {
		t.Fatalf("got %+v", e)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestEdgeSessionClosedPublished(t *testing.T) {
	g := newRig(t, nil)
	events := make(chan *nats.Msg, 4)
	subj, _ := proto.EvtSessionClosedSubject("edge-t")
	if _, err := g.nc.ChanSubscribe(subj, events); err != nil {
		t.Fatal(err)
	}
	g.initialize()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, g.url, nil)
	req.Header.Set("Mcp-Session-Id", g.sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case m := <-events:
		var sc proto.SessionClosed
		if err := proto.Unmarshal(m.Data, &sc); err != nil || sc.Session != g.sid {
			t.Fatalf("got %+v %v", sc, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no session_closed event")
	}
	// The ended session is gone: 404.
	code, _, _ := g.post(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`)
	if code != http.StatusNotFound {
		t.Fatalf("ended session answered %d", code)
	}
}

var _ = errors.New
