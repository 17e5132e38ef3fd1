package worker

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func streamableSpec(name, url string) proto.UpstreamSpec {
	return proto.UpstreamSpec{Name: name, Transport: proto.TransportStreamable, URL: url}
}

func stdioSpec(name string, procs int) proto.UpstreamSpec {
	return proto.UpstreamSpec{
		Name: name, Transport: proto.TransportStdio, Processes: procs,
		Command: []string{os.Args[0]},
		// A -race child sleeps 1s at exit by default (atexit_sleep_ms).
		Env: map[string]string{stdioEnv: "1", "GORACE": "atexit_sleep_ms=0"},
	}
}

// TestWorkerCallTransports runs the same calls over every transport: raw
// results (unknown content type, big numbers) pass intact, an isError
// result passes as a result, an upstream -32602 passes unchanged.
func TestWorkerCallTransports(t *testing.T) {
	cases := []struct {
		name string
		spec func(t *testing.T) proto.UpstreamSpec
	}{
		{"streamable-sse", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL)
		}},
		{"streamable-json", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "json").ts.URL)
		}},
		{"streamable-stateless", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "stateless").ts.URL)
		}},
		{"legacy-sse", func(t *testing.T) proto.UpstreamSpec {
			return proto.UpstreamSpec{Name: "up", Transport: proto.TransportSSE, URL: serveHTTP(t, newUpstream(0), "sse").ts.URL}
		}},
		{"stdio", func(*testing.T) proto.UpstreamSpec { return stdioSpec("up", 1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startWorker(t, Config{}, tc.spec(t))
			e.waitUp("up")
			if tc.name != "stdio" {
				e.waitPings("up", 3)
			}
			for _, session := range []string{"", "sess-1"} {
				call := func(tool, args string) *proto.Reply {
					req := toolCall("up", tool, args)
					req.Session = session
					return e.call(req)
				}
				wantText(t, call("echo", `{"text":"hi"}`), "hi")
				wantResult(t, call("hologram", `{}`), holoRaw)
				wantResult(t, call("fail", `null`), failRaw)
				r := call("badparams", `{}`)
				wantError(t, r, proto.CodeInvalidParams, "bad widget")
				if string(r.Error.Data) != `{"field":"w"}` {
					t.Errorf("error data = %s", r.Error.Data)
				}
				wantError(t, call("nope", `{}`), proto.CodeInvalidParams, "unknown tool")
			}
		})
	}
}

// TestWorkerReplyServedBy: a worker's reply to a call it dispatched names
// the upstream and carries the worker's time on it (a result, an upstream
// error, a call on the pool subject); its reply to a call it could not
// dispatch carries neither.
func TestWorkerReplyServedBy(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	pool := func(req proto.Request) *proto.Reply {
		subj, _ := proto.AppendPoolSubject(nil, "up", proto.OpToolsCall)
		req.Upstream = "" // the pool subject names it
		data, _ := proto.Marshal(&req)
		raw, err := e.caller.Request(t.Context(), string(subj), data)
		if err != nil {
			t.Fatal(err)
		}
		var r proto.Reply
		if err := proto.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	for _, tc := range []struct {
		name     string
		send     func(proto.Request) *proto.Reply
		req      proto.Request
		code     int32 // 0: a result
		upstream string
	}{
		{"result", e.call, toolCall("up", "hologram", `{}`), 0, "up"},
		{"upstream error", e.call, toolCall("up", "badparams", `{}`), proto.CodeInvalidParams, "up"},
		{"pool subject", pool, toolCall("up", "echo", `{"text":"p"}`), 0, "up"},
		{"not served", e.call, toolCall("elsewhere", "echo", `{}`), proto.CodeUpstreamUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			r := tc.send(tc.req)
			elapsed := time.Since(before)
			switch {
			case tc.code == 0 && r.Error != nil:
				t.Fatalf("reply error %v, want a result", r.Error)
			case tc.code != 0 && (r.Error == nil || r.Error.Code != tc.code):
				t.Fatalf("reply error %v, want code %d", r.Error, tc.code)
			}
			if r.Upstream != tc.upstream {
				t.Errorf("reply.Upstream = %q, want %q", r.Upstream, tc.upstream)
			}
			// Not a timing bound: the worker's span lies within the
			// caller's, on one machine, so this holds however slow it is
			// (and catches a wrong unit or a wall-clock timestamp).
			switch {
			case tc.upstream == "" && r.ServiceNs != 0:
				t.Errorf("reply.ServiceNs = %d for an undispatched call, want 0", r.ServiceNs)
			case tc.upstream != "" && (r.ServiceNs <= 0 || r.ServiceNs > elapsed.Nanoseconds()):
				t.Errorf("reply.ServiceNs = %d, want within (0, %d]: the caller's own wait", r.ServiceNs, elapsed.Nanoseconds())
			}
		})
	}
}

// TestWorkerBigResult: an 8 MiB result exceeds the 8 MiB max payload and
// arrives intact in chunks, from the SSE and the JSON response paths.
func TestWorkerBigResult(t *testing.T) {
	for _, kind := range []string{"streamable", "json"} {
		t.Run(kind, func(t *testing.T) {
			h := serveHTTP(t, newUpstream(0), kind)
			e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
			e.waitUp("up")
			r := e.call(toolCall("up", "big", `{}`))
			if r.Error != nil {
				t.Fatalf("big: %v", r.Error)
			}
			if !bytes.Equal(r.Result, bigRaw()) {
				t.Fatalf("big result: %d bytes, want %d identical bytes", len(r.Result), len(bigRaw()))
			}
			if len(r.Result) <= 8<<20 {
				t.Fatalf("test broken: result of %d bytes would not need chunking", len(r.Result))
			}
		})
	}
}

// TestWorkerStdioProcesses: a client session sticks to one process,
// stateless calls spread over all of them.
func TestWorkerStdioProcesses(t *testing.T) {
	e := startWorker(t, Config{}, stdioSpec("up", 2))
	e.waitUp("up")
	pid := func(session string) string {
		req := toolCall("up", "pid", `{}`)
		req.Session = session
		r := e.call(req)
		if r.Error != nil {
			t.Fatalf("pid: %v", r.Error)
		}
		var res struct{ Content []struct{ Text string } }
		if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) != 1 {
			t.Fatalf("pid result %s: %v", r.Result, err)
		}
		return res.Content[0].Text
	}
	first := pid("sticky")
	for range 5 {
		if p := pid("sticky"); p != first {
			t.Fatalf("session moved from process %s to %s", first, p)
		}
	}
	seen := map[string]bool{}
	for range 4 {
		seen[pid("")] = true
	}
	if len(seen) != 2 {
		t.Fatalf("stateless calls reached %d processes, want 2", len(seen))
	}
}

// TestWorkerBadEnvelope: undecodable messages and unknown ops get an error
// reply, and the worker keeps serving. The replies name neither the
// worker (an operator's name for a host: here one that looks like it) nor
// the decoder's text.
func TestWorkerBadEnvelope(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	const id = "ip-10-0-3-7"
	e := startWorker(t, Config{ID: id}, streamableSpec("up", h.ts.URL))
	for _, op := range []string{proto.OpToolsCall, proto.OpCancel, proto.OpCatalog} {
		r, err := e.request(t.Context(), op, []byte{0xc1, 0xff, 0x00})
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, r, proto.CodeBadEnvelope, "decode")
		if strings.Contains(r.Error.Msg, id) || strings.Contains(r.Error.Msg, "msgpack") {
			t.Fatalf("%s: %q", op, r.Error.Msg)
		}
	}
	r, err := e.callErr(t.Context(), "tools_frobnicate", toolCall("up", "echo", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, proto.CodeMethodNotFound, "tools_frobnicate")
	if strings.Contains(r.Error.Msg, id) {
		t.Fatalf("unknown op: %q", r.Error.Msg)
	}
	r, err = e.callErr(t.Context(), proto.OpToolsCall, toolCall("other", "echo", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, proto.CodeUpstreamUnavailable, "other")
	e.waitUp("up")
	wantText(t, e.call(toolCall("up", "echo", `{"text":"still"}`)), "still")
}

// TestWorkerToolSet: the tool set lands in KV with every tool across pages
// (one tool per page), in order, before the upstream is reported up; a
// catalog request on the pool subject refreshes it.
func TestWorkerToolSet(t *testing.T) {
	const extra = 5
	u := newUpstream(extra)
	h := serveHTTP(t, u, "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	set := e.toolSet("up")
	if set.Upstream != "up" || len(set.Items) != fixedTools+extra {
		t.Fatalf("tool set of %q has %d tools, want %d", set.Upstream, len(set.Items), fixedTools+extra)
	}
	var names []string
	for _, raw := range set.Items {
		var tl struct{ Name string }
		if err := json.Unmarshal(raw, &tl); err != nil {
			t.Fatalf("tool %s: %v", raw, err)
		}
		names = append(names, tl.Name)
	}
	if got := strings.Join(names[fixedTools:], ","); got != "x-01,x-02,x-03,x-04,x-05" {
		t.Errorf("extra tools in order: %s", got)
	}
	rev := e.toolSetRevision("up")

	// Same tools: a refresh writes nothing.
	e.poolCatalog("up")
	if r := e.toolSetRevision("up"); r != rev {
		t.Errorf("unchanged tool set rewritten (revision %d -> %d)", rev, r)
	}
	// A new tool: list_changed reaches the worker, which rewrites the set.
	u.addTool("late")
	eventually(t, 10*time.Second, "tool set with the late tool", func() bool {
		return len(e.toolSet("up").Items) == fixedTools+extra+1
	})
}

// TestWorkerUpstreamKilled: once the upstream dies, calls fail as
// unavailable naming it (why, in a fixed phrase) and heartbeats report it
// down (why, in detail, for operators).
func TestWorkerUpstreamKilled(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	wantResult(t, e.call(toolCall("up", "echo", `{"text":"a"}`)), `{"content":[{"type":"text","text":"a"}]}`)
	h.kill()
	wantError(t, e.call(toolCall("up", "echo", `{}`)), proto.CodeUpstreamUnavailable, "upstream up is unavailable")
	wantError(t, e.call(toolCall("up", "echo", `{}`)), proto.CodeUpstreamUnavailable, "upstream up is unavailable")
	eventually(t, 10*time.Second, "heartbeat with the upstream down", func() bool {
		s, ok := e.state("up")
		return ok && !s.Up && s.Err != ""
	})
	// The heartbeat's detail is the operators' (it names the upstream's
	// address); the client gets the fixed phrase for it.
	s, _ := e.state("up")
	r := e.call(toolCall("up", "echo", `{}`))
	wantError(t, r, proto.CodeUpstreamUnavailable, "("+bus.UnavailableReason(s.Err)+")")
	if strings.Contains(r.Error.Msg, "127.0.0.1") || !strings.Contains(s.Err, "127.0.0.1") {
		t.Fatalf("client error %q, heartbeat detail %q", r.Error.Msg, s.Err)
	}
}

// TestWorkerCancel: a cancel stops a blocked call, the upstream hears of
// it, and the in-flight slot is freed even though the call never returned
// a result.
func TestWorkerCancel(t *testing.T) {
	u := newUpstream(0)
	h := serveHTTP(t, u, "streamable")
	e := startWorker(t, Config{MaxInFlight: 1}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	req := toolCall("up", "block", `{}`)
	req.ID = 42
	replies := make(chan *proto.Reply, 1)
	go func() {
		r, err := e.callErr(t.Context(), proto.OpToolsCall, req)
		if err != nil {
			t.Errorf("blocked call: %v", err)
		}
		replies <- r
	}()
	recv(t, u.blocked, 10*time.Second, "the upstream to start the call")
	// MaxInFlight 1: a second call is refused at once, naming the upstream
	// it was meant for.
	refused := e.call(toolCall("up", "echo", `{}`))
	wantError(t, refused, proto.CodeOverloaded, "in flight")
	if refused.Upstream != "up" {
		t.Errorf("refusal's Upstream = %q, want up", refused.Upstream)
	}

	data, _ := proto.Marshal(&proto.Cancel{Edge: "e1", ID: 42})
	if _, err := e.request(t.Context(), proto.OpCancel, data); err != nil {
		t.Fatal(err)
	}
	r := recv(t, replies, 10*time.Second, "the cancelled call's reply")
	if r == nil || r.Error == nil {
		t.Fatalf("cancelled call replied %+v", r)
	}
	if r.Upstream != "up" || r.ServiceNs <= 0 {
		t.Errorf("cancelled call's reply: Upstream %q ServiceNs %d, want up and > 0", r.Upstream, r.ServiceNs)
	}
	recv(t, u.cancelled, 10*time.Second, "the upstream handler to see the cancellation")
	eventually(t, 5*time.Second, "the in-flight slot to be freed", func() bool { return len(e.svc.sem) == 0 })
	wantResult(t, e.call(toolCall("up", "echo", `{"text":"b"}`)), `{"content":[{"type":"text","text":"b"}]}`)
}

// TestWorkerDeadline: a call whose deadline passes answers CodeTimeout
// naming the upstream.
func TestWorkerDeadline(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	req := toolCall("up", "block", `{}`)
	req.DeadlineUnixMs = time.Now().Add(300 * time.Millisecond).UnixMilli()
	wantError(t, e.call(req), proto.CodeTimeout, "upstream up")
}

// TestWorkerSessionExpiry: when the upstream forgets a session (404), the
// worker opens a new one and the call succeeds; a closed client session
// closes its dedicated upstream session.
func TestWorkerSessionExpiry(t *testing.T) {
	u := newUpstream(0)
	h := serveHTTP(t, u, "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	for _, session := range []string{"", "sess-1"} {
		req := toolCall("up", "echo", `{"text":"x"}`)
		req.Session = session
		wantResult(t, e.call(req), `{"content":[{"type":"text","text":"x"}]}`)
		before := u.inits.Load()
		h.expireAll()
		wantResult(t, e.call(req), `{"content":[{"type":"text","text":"x"}]}`)
		if u.inits.Load() <= before {
			t.Errorf("session %q: no new upstream session after expiry", session)
		}
	}
	up := e.svc.mgr.get("up")
	if n := up.Dedicated(); n != 1 {
		t.Fatalf("%d dedicated sessions, want 1", n)
	}
	deletes := h.deletes.Load()
	subj, _ := proto.EvtSessionClosedSubject("e1")
	data, _ := proto.Marshal(&proto.SessionClosed{Edge: "e1", Session: "sess-1"})
	if err := e.nc.Publish(subj, data); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the dedicated session to close", func() bool {
		return up.Dedicated() == 0 && h.deletes.Load() > deletes
	})
}

// TestWorkerCatalogChanges: deleting a spec stops serving it, a changed spec
// restarts it, and heartbeats follow (also on a presence query).
func TestWorkerCatalogChanges(t *testing.T) {
	h1 := serveHTTP(t, newUpstream(0), "streamable")
	h2 := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{Upstreams: []string{"up", "later"}}, streamableSpec("up", h1.ts.URL), streamableSpec("ignored", h1.ts.URL))
	e.waitUp("up")
	if s, ok := e.state("later"); !ok || s.Up {
		t.Fatalf("unknown configured upstream: %+v %v", s, ok)
	}
	if _, ok := e.state("ignored"); ok {
		t.Fatal("heartbeat lists an upstream the worker does not serve")
	}
	e.putSpec(streamableSpec("up", h2.ts.URL))
	eventually(t, 10*time.Second, "up again on the new URL", func() bool {
		u := e.svc.mgr.get("up")
		return u.Spec().URL == h2.ts.URL && u.State().Up
	})
	wantResult(t, e.call(toolCall("up", "echo", `{"text":"2"}`)), `{"content":[{"type":"text","text":"2"}]}`)

	if err := e.specs.Delete(t.Context(), "up"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the deleted upstream to be dropped", func() bool {
		s, ok := e.state("up")
		return ok && !s.Up && e.svc.mgr.get("up") == nil
	})
	wantError(t, e.call(toolCall("up", "echo", `{}`)), proto.CodeUpstreamUnavailable, "not served")

	e.mu.Lock()
	e.hb = nil
	e.mu.Unlock()
	if err := e.nc.Publish(proto.SubjEvtPresence, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a heartbeat after the presence query", func() bool { return e.lastHeartbeat() != nil })
}

// TestWorkerRunStops: Run returns promptly after ctx ends, with a goodbye
// heartbeat, while HTTP and stdio sessions are open.
func TestWorkerRunStops(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL), stdioSpec("io", 2))
	e.waitUp("up")
	e.waitUp("io")
	req := toolCall("up", "echo", `{}`)
	req.Session = "s"
	e.call(req)
	start := time.Now()
	e.stop()
	select {
	case err := <-e.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.done <- nil // for the cleanup
	case <-time.After(4 * time.Second):
		t.Fatal("Run did not return within 4s of cancel")
	}
	t.Logf("Run returned %v after cancel", time.Since(start))
	if e.svc.Ready() {
		t.Error("Ready after Run returned")
	}
	eventually(t, 2*time.Second, "the goodbye heartbeat", func() bool {
		hb := e.lastHeartbeat()
		return hb != nil && hb.Bye
	})
}

// TestWorkerStdioRestart: a stdio process that exits marks the upstream
// down; the worker starts a new process and serves again.
func TestWorkerStdioRestart(t *testing.T) {
	e := startWorker(t, Config{}, stdioSpec("io", 1))
	e.waitUp("io")
	before := e.call(toolCall("io", "pid", `{}`)).Result
	r := e.call(toolCall("io", "exit", `{}`))
	wantError(t, r, proto.CodeUpstreamUnavailable, "upstream io is unavailable")
	eventually(t, 10*time.Second, "the upstream down after the exit", func() bool {
		s, ok := e.state("io")
		return ok && !s.Up && strings.Contains(s.Err, "exited")
	})
	e.waitUp("io")
	after := e.call(toolCall("io", "pid", `{}`))
	if after.Error != nil || bytes.Equal(after.Result, before) {
		t.Fatalf("after restart: %s %v (before: %s)", after.Result, after.Error, before)
	}
}

// TestWorkerHTTPRecovers: an HTTP upstream that comes back on its address
// is reconnected, re-catalogued and reported up.
func TestWorkerHTTPRecovers(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	addr := h.ts.Listener.Addr().String()
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	h.kill()
	eventually(t, 10*time.Second, "the upstream down", func() bool {
		s, ok := e.state("up")
		return ok && !s.Up
	})
	h2 := serveHTTPAt(t, newUpstream(0), addr)
	e.waitUp("up")
	wantText(t, e.call(toolCall("up", "echo", `{"text":"back"}`)), "back")
	if h2.inits.Load() == 0 {
		t.Error("no session on the restarted upstream")
	}
}

// TestWorkerIdleSession: a dedicated upstream session is closed after
// SessionIdleTimeout without calls.
func TestWorkerIdleSession(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{SessionIdleTimeout: 200 * time.Millisecond}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	req := toolCall("up", "echo", `{"text":"i"}`)
	req.Session = "idle"
	wantText(t, e.call(req), "i")
	up := e.svc.mgr.get("up")
	eventually(t, 5*time.Second, "the idle session to close", func() bool {
		return up.Dedicated() == 0 && h.deletes.Load() > 0
	})
}

// TestWorkerPoolCall: a tools_call on the pool subject (queue group) is
// served like a pinned one.
func TestWorkerPoolCall(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	subj, _ := proto.AppendPoolSubject(nil, "up", proto.OpToolsCall)
	req := toolCall("up", "hologram", `{}`)
	req.Upstream = "" // the pool subject names it
	data, _ := proto.Marshal(&req)
	raw, err := e.caller.Request(t.Context(), string(subj), data)
	if err != nil {
		t.Fatal(err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	wantResult(t, &r, holoRaw)
}

// TestWorkerShutdownKillsHungProcess: a stdio server that ignores stdin
// EOF and SIGTERM does not hold Run beyond the grace.
func TestWorkerShutdownKillsHungProcess(t *testing.T) {
	sp := stdioSpec("io", 1)
	sp.Env[stdioHangEnv] = "1"
	e := startWorker(t, Config{ShutdownGrace: 300 * time.Millisecond}, sp)
	e.waitUp("io")
	start := time.Now()
	e.stop()
	select {
	case <-e.done:
		e.done <- nil
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return within 3s with a 300ms grace")
	}
	t.Logf("Run returned %v after cancel", time.Since(start))
}

// TestWorkerReplyToHeader: a call forwarded by a router is answered on the
// edge's subject from proto.HdrReplyTo, not on the message's reply subject
// (the router's, for no-responders).
func TestWorkerReplyToHeader(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	routerInbox, err := e.nc.SubscribeSync(e.nc.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	k := e.caller.New()
	defer k.Close()
	data, _ := proto.Marshal(&proto.Request{Method: "tools/call", Upstream: "up", Name: "hologram", Params: []byte(`{}`)})
	subj, _ := proto.AppendWorkerSubject(nil, "w1", proto.OpToolsCall)
	m := &nats.Msg{Subject: string(subj), Reply: routerInbox.Subject, Data: data, Header: nats.Header{proto.HdrReplyTo: []string{k.Reply()}}}
	if err := e.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	raw, err := k.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	wantResult(t, &r, holoRaw)
	if m, err := routerInbox.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("the router's inbox got %q", m.Data)
	}
}

// TestWorkerMetaPassThrough: the client's own _meta (progress token, custom
// keys, big numbers) reaches the upstream byte for byte; the client's
// SEP-2575 per-request keys (its hop's protocol version) do not, so a 2026
// client can call a 2025-only upstream.
func TestWorkerMetaPassThrough(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable") // stateful: 2025 only
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	for _, session := range []string{"", "s1"} {
		req := toolCall("up", "meta", `{}`)
		req.Session = session
		req.Params = []byte(`{"name":"up__meta","arguments":{},"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},` +
			`"progressToken":7,"custom":{"n":1}}}`)
		wantText(t, e.call(req), `{"custom":{"n":1},"keys":["custom","progressToken"]}`)
	}
}

func TestWorkerDuplicateIDRefused(t *testing.T) {
	e := startWorker(t, Config{ID: "dup"})
	nc2 := natstest.Connect(t, e.ns)
	second, err := New(Config{ID: "dup"}, nc2, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- second.Run(t.Context()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("second worker with the same id: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second worker with the same id kept running")
	}
}

// TestWorkerPresenceKicksCoalesced: a flood of presence queries (anyone
// who may publish one can send thousands) is answered with at most one
// heartbeat per minKickGap, and at least one.
func TestWorkerPresenceKicksCoalesced(t *testing.T) {
	e := startWorker(t, Config{HeartbeatInterval: time.Hour})
	e.mu.Lock()
	before := e.hbN
	e.mu.Unlock()
	start := time.Now()
	for range 5000 {
		if err := e.nc.Publish(proto.SubjEvtPresence, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a heartbeat after the queries", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.hbN > before
	})
	// Let the coalesced ones come, then count against the time elapsed.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	e.mu.Lock()
	n := e.hbN - before
	e.mu.Unlock()
	if limit := int(elapsed/minKickGap) + 2; n > limit {
		t.Fatalf("%d heartbeats for 5000 presence queries in %v: want at most %d (one per %v)", n, elapsed, limit, minKickGap)
	}
}

// TestWorkerGracefulStopDrains: a worker told to stop with a call in
// flight says it is draining (alive, taking nothing new), keeps beating
// while the call runs, answers it, and only then says goodbye: no edge
// fails the call as "worker lost", and it runs once.
func TestWorkerGracefulStopDrains(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{HeartbeatInterval: 50 * time.Millisecond, ShutdownGrace: 10 * time.Second}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	type answer struct {
		r   *proto.Reply
		err error
		at  time.Time
	}
	answered := make(chan answer, 1)
	before := h.toolCalls.Load()
	go func() {
		r, err := e.callErr(t.Context(), proto.OpToolsCall, toolCall("up", "sleep", `{"ms":600}`))
		answered <- answer{r, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "the call in flight", func() bool { return h.toolCalls.Load() > before })
	stopped := time.Now()
	e.stop()
	a := recv(t, answered, 10*time.Second, "the call's answer")
	if a.err != nil || a.r.Error != nil {
		t.Fatalf("the call in flight at stop: %v %+v", a.err, a.r.Error)
	}
	wantText(t, a.r, "slept")
	if n := h.toolCalls.Load() - before; n != 1 {
		t.Fatalf("the upstream ran the call %d times", n)
	}
	eventually(t, 5*time.Second, "the goodbye", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.hbs) > 0 && e.hbs[len(e.hbs)-1].bye
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	var after []hbSeen
	for _, hb := range e.hbs {
		if hb.at.After(stopped) {
			after = append(after, hb)
		}
	}
	if len(after) < 3 || !after[0].draining || after[0].bye {
		t.Fatalf("heartbeats after the stop %+v: want draining ones first", after)
	}
	for _, hb := range after[:len(after)-1] {
		if hb.bye || !hb.draining {
			t.Fatalf("heartbeats after the stop %+v: a goodbye before the end, or one not draining", after)
		}
	}
	// (The answer and the heartbeats are read on two goroutines of the
	// test's connection: a goodbye sent right after the answer may be
	// timed a little before it.)
	if bye := after[len(after)-1]; bye.at.Before(a.at.Add(-100 * time.Millisecond)) {
		t.Fatalf("goodbye at %v, before the call's answer at %v", bye.at, a.at)
	}
}

// TestWorkerAnswersInFlight: asked which of some calls it still runs, a
// worker names those running and none other; once the call is done, it
// names it among those whose kept reply it sent again, and is sure of the
// others (it never saw them).
func TestWorkerAnswersInFlight(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	before := h.toolCalls.Load()
	slow := toolCall("up", "sleep", `{"ms":800}`)
	slow.ID = 77
	answered := make(chan error, 1)
	go func() {
		_, err := e.callErr(t.Context(), proto.OpToolsCall, slow)
		answered <- err
	}()
	eventually(t, 5*time.Second, "the call in flight", func() bool { return h.toolCalls.Load() > before })
	var last proto.InFlight
	ask := func() []proto.Cancel {
		data, _ := proto.Marshal(&proto.InFlight{Calls: []proto.Cancel{{Edge: "e1", ID: 77}, {Edge: "e1", ID: 78}, {Edge: "e2", ID: 77}}})
		subj, _ := proto.AppendWorkerSubject(nil, e.svc.cfg.ID, proto.OpInFlight)
		m, err := e.nc.Request(string(subj), data, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var a proto.InFlight
		if err := proto.Unmarshal(m.Data, &a); err != nil {
			t.Fatal(err)
		}
		last = a
		return a.Calls
	}
	if got := ask(); len(got) != 1 || got[0].Edge != "e1" || got[0].ID != 77 {
		t.Fatalf("running: %+v, want e1/77 alone", got)
	}
	if err := recv(t, answered, 10*time.Second, "the call's answer"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the call done", func() bool { return len(ask()) == 0 })
	if len(last.Resent) != 1 || last.Resent[0].Edge != "e1" || last.Resent[0].ID != 77 || last.Unsure || last.Backlog {
		t.Fatalf("after the call: %+v, want e1/77 resent alone, sure, no backlog", last)
	}
}

// TestWorkerReannouncesListsAfterStoreLoss: when the fleet's keys change
// (tenancy-svc made the store again after it was lost), the worker moves
// to the new key and writes its lists again into the empty lists bucket.
func TestWorkerReannouncesListsAfterStoreLoss(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	lists, err := e.js.KeyValue(t.Context(), proto.BucketLists)
	if err != nil {
		t.Fatal(err)
	}
	key := proto.ListKey("up", proto.KindTools)
	eventually(t, 10*time.Second, "the tools list written", func() bool { _, err := lists.Get(t.Context(), key); return err == nil })
	// The store is lost: the lists are gone, and tenancy-svc makes new keys.
	if err := lists.Purge(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	keys, err := e.js.KeyValue(t.Context(), proto.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Put(t.Context(), proto.KeyTasks, bytes.Repeat([]byte{9}, taskid.KeyLen)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*bus.SecretFollowInterval, "the tools list written again", func() bool { _, err := lists.Get(t.Context(), key); return err == nil })
}
