package edge

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// rawConn dials the rig's edge over TCP.
func rawConn(t *testing.T, g *rig) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", g.e.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestEdgeSlowBodyCut: a client that sends its body slower than the read
// timeout is cut (its file descriptor freed) and a request on time is
// served.
func TestEdgeSlowBodyCut(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.ReadTimeout = 300 * time.Millisecond }})
	c := rawConn(t, g)
	_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+g.e.Addr()+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{\"jsonrpc\":")
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c) // whatever the answer, the edge must close
	if err != nil {
		t.Fatalf("connection not closed by the edge: %v (after %v)", err, time.Since(start))
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("cut after %v", time.Since(start))
	}
	if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 400") {
		t.Fatalf("answer %q", b)
	}
	g.initialize() // a client on time is served
}

// TestEdgeStreamsOutliveTimeouts: the read and write timeouts bound one
// body and one write, not a response stream: a legacy SSE stream idle
// for longer than both still delivers.
func TestEdgeStreamsOutliveTimeouts(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true, cfg: func(c *Config) {
		c.ReadTimeout, c.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(g.url, "/mcp")+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	endpoint := ""
	for endpoint == "" {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			endpoint = p
		}
	}
	time.Sleep(time.Second) // idle: longer than both timeouts
	pr, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+g.e.Addr()+endpoint, strings.NewReader(initBody))
	pr.Header.Set("Content-Type", "application/json")
	presp, err := http.DefaultClient.Do(pr)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if strings.Contains(line, `"protocolVersion"`) {
			return
		}
	}
}

// TestWriteTimeoutCutsStalledReader: a client that stops reading a
// response is cut once a write has waited the write timeout; one that
// reads steadily is not.
func TestWriteTimeoutCutsStalledReader(t *testing.T) {
	failed := make(chan error, 1)
	srv := httptest.NewServer(withDeadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for i := 0; i < 4096; i++ { // 256 MiB at most: far past any socket buffer
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				return
			}
			w.(http.Flusher).Flush()
		}
		failed <- nil
	}), 0, 200*time.Millisecond))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("the handler wrote everything to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write to a stalled client never timed out")
	}
}

// TestEdgeConnectionCap: a connection over the cap gets 503 with
// Retry-After and is closed; once one closes, a new one is served.
func TestEdgeConnectionCap(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.MaxConnections = 2 }})
	a, b := rawConn(t, g), rawConn(t, g)
	_ = b
	time.Sleep(100 * time.Millisecond) // both accepted
	over := rawConn(t, g)
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %v", resp.StatusCode, resp.Header)
	}
	_ = a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := rawConn(t, g)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a close: %v %v", resp, err)
		}
		_ = c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if n := labelled(gather(t, g.e), "switchyard_limit_rejections_total")["edge_connections"]; n < 1 {
		t.Fatalf("refusals counted: %v", n)
	}
}

// rpcErr decodes a JSON-RPC error response.
func rpcErr(t *testing.T, body string) (code int64, msg string, data map[string]any) {
	t.Helper()
	var r struct {
		Error *struct {
			Code    int64          `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return r.Error.Code, r.Error.Message, r.Error.Data
}

// TestEdgeSessionCaps: the edge's cap answers 503, the tenant's 429
// -32069 {"limit":"sessions"}, each with Retry-After; a closed session
// makes room; sessions are counted by their tenant.
func TestEdgeSessionCaps(t *testing.T) {
	tenants := []tenancy.Tenant{config.DefaultTenants()[0]}
	cases := []struct {
		name        string
		edge, per   int
		tenantLimit int
		status      int
		code        int64
	}{
		{"edge cap", 2, 10, 0, http.StatusServiceUnavailable, int64(proto.CodeUnavailable)},
		{"edge per-tenant cap", 10, 2, 0, http.StatusTooManyRequests, int64(proto.CodeLimited)},
		{"tenant's max_sessions", 10, 10, 2, http.StatusTooManyRequests, int64(proto.CodeLimited)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := append([]tenancy.Tenant(nil), tenants...)
			ts[0].Limits.MaxSessions = tc.tenantLimit
			g := newRigWith(t, nil, &rigOpts{
				tenancy: tenancy.Static{Snap: tenancy.NewSnapshot(ts, nil)},
				cfg:     func(c *Config) { c.MaxSessions, c.MaxTenantSessions = tc.edge, tc.per },
			})
			var sids []string
			for range 2 {
				g.sid = ""
				g.initialize()
				sids = append(sids, g.sid)
			}
			g.sid = ""
			code, body, h := g.post(initBody)
			if code != tc.status || h.Get("Retry-After") == "" {
				t.Fatalf("third session: %d %s %v", code, body, h)
			}
			c, _, data := rpcErr(t, body)
			if c != tc.code || (c == int64(proto.CodeLimited) && data["limit"] != limit.LimitSessions) {
				t.Fatalf("third session: %s", body)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, g.url, nil)
			req.Header.Set("Mcp-Session-Id", sids[0])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for g.e.sessions.count() != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("sessions after a DELETE: %d", g.e.sessions.count())
				}
				time.Sleep(5 * time.Millisecond)
			}
			g.sid = ""
			g.initialize() // room again
		})
	}
}

// TestEdgeSessionCapExact: sessions opened concurrently up to the cap all
// open (a session takes its reservation's place, not a second one), and
// the next is refused.
func TestEdgeSessionCapExact(t *testing.T) {
	const capN = 12
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.MaxSessions = capN }})
	var wg sync.WaitGroup
	codes := make(chan int, capN)
	for range capN {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url, strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(hdrSessionSlot, "forged") // ignored
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a session under the cap: HTTP %d", c)
		}
	}
	if n := g.e.sessions.count(); n != capN {
		t.Fatalf("sessions %d", n)
	}
	g.e.sessions.mu.RLock()
	pending, counted := g.e.sessions.pending, g.e.sessions.byTenant[config.DefaultTenant]
	g.e.sessions.mu.RUnlock()
	if pending != 0 || counted != capN {
		t.Fatalf("pending %d, counted for the tenant %d", pending, counted)
	}
	if code, body, _ := g.post(initBody); code != http.StatusServiceUnavailable {
		t.Fatalf("over the cap: %d %s", code, body)
	}
}

// TestEdgeSessionCountsRate: opening a session takes a token of the
// tenant's rate limit: past its burst, initialize is refused 429 with
// Retry-After, and no session is created.
func TestEdgeSessionCountsRate(t *testing.T) {
	ts := []tenancy.Tenant{config.DefaultTenants()[0]}
	ts[0].Limits = tenancy.Limits{Rate: 0.01, Burst: 2}
	g := newRigWith(t, nil, &rigOpts{tenancy: tenancy.Static{Snap: tenancy.NewSnapshot(ts, nil)}})
	for i := range 2 {
		code, body, _ := g.post(initBody)
		if code != http.StatusOK {
			t.Fatalf("session %d: %d %s", i, code, body)
		}
	}
	code, body, h := g.post(initBody)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || h.Get("Mcp-Session-Id") != "" {
		t.Fatalf("past the burst: %d %s %v", code, body, h)
	}
	if c, _, data := rpcErr(t, body); c != int64(proto.CodeLimited) || data["limit"] != limit.LimitTenantRate {
		t.Fatalf("past the burst: %s", body)
	}
	if n := g.e.sessions.count(); n != 2 {
		t.Fatalf("sessions: %d", n)
	}
}

// TestCapListenerCounts: the cap counts each connection once, however
// often it is closed.
func TestCapListenerCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &capListener{Listener: ln, max: 1}
	defer cl.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if cl.open.Load() != 1 {
		t.Fatalf("open %d", cl.open.Load())
	}
	_ = c.Close()
	_ = c.Close()
	if cl.open.Load() != 0 {
		t.Fatalf("open after two closes: %d", cl.open.Load())
	}
	_ = cl.Close()
	if _, err := cl.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
}

// TestEdgeDrainDelay: a stopping edge with a drain delay reports not
// ready at once, still serves the requests it gets meanwhile (each
// response closing its connection, so a balancer opens the next one
// elsewhere), and closes its listener only after the delay.
func TestEdgeDrainDelay(t *testing.T) {
	const delay = 700 * time.Millisecond
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.DrainDelay = delay }})
	if !g.e.Ready() {
		t.Fatal("edge not ready")
	}
	stopped := make(chan struct{})
	start := time.Now()
	go func() { g.stop(); close(stopped) }()
	for g.e.Ready() {
		if time.Since(start) > delay/2 {
			t.Fatal("still ready while draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, g.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request while draining: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 || !resp.Close {
		t.Fatalf("while draining: status %d, connection closed after it %v", resp.StatusCode, resp.Close)
	}
	<-stopped
	if d := time.Since(start); d < delay {
		t.Fatalf("stopped after %v, before the drain delay", d)
	}
}
