package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// relayed is one upstream message a call's edge received (proto.HdrMessage).
type relayed struct {
	method string
	params json.RawMessage
	id     json.RawMessage // nil for a notification
	reply  string          // where the answer goes (requests)
}

func parseRelayed(t *testing.T, m *nats.Msg) relayed {
	t.Helper()
	if m.Header.Get(proto.HdrMessage) != "1" {
		t.Errorf("upstream message without %s: %v", proto.HdrMessage, m.Header)
	}
	var r relayed
	var method []byte
	if !json.Valid(m.Data) || !jsonscan.Members(m.Data, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "method"):
			method = v
		case jsonscan.KeyIs(k, "params"):
			r.params = json.RawMessage(v)
		case jsonscan.KeyIs(k, "id"):
			r.id = json.RawMessage(v)
		}
	}) || len(method) == 0 {
		t.Fatalf("upstream message %s is not a JSON-RPC notification or request", m.Data)
	}
	r.method = jsonscan.Unquote(method)
	r.reply = m.Reply
	return r
}

// member is the raw value of key in the JSON object obj.
func member(obj []byte, key string) string {
	var out string
	jsonscan.Members(obj, func(k, v []byte) {
		if jsonscan.KeyIs(k, key) {
			out = string(v)
		}
	})
	return out
}

// edgeCall sends req on the worker subject of op as the router forwards it
// (the edge's reply subject in proto.HdrReplyTo), acts as the edge for the
// call's upstream messages, and returns the reply and the messages, in
// order. A request is answered with answer's JSON-RPC response object
// (nothing is published when it returns ""); onMsg, if set, sees each
// message first.
func (e *env) edgeCall(ctx context.Context, op string, req proto.Request, answer func(relayed) string, onMsg func(relayed)) (*proto.Reply, []relayed) {
	e.t.Helper()
	return e.edgeCallHeader(ctx, op, req, nil, answer, onMsg)
}

// edgeCallHeader is edgeCall with the further headers hdr on the call.
func (e *env) edgeCallHeader(ctx context.Context, op string, req proto.Request, hdr nats.Header, answer func(relayed) string, onMsg func(relayed)) (*proto.Reply, []relayed) {
	e.t.Helper()
	data, err := proto.Marshal(&req)
	if err != nil {
		e.t.Fatal(err)
	}
	subj, _ := proto.AppendWorkerSubject(nil, e.svc.cfg.ID, op)
	k := e.caller.New()
	defer k.Close()
	m := &nats.Msg{Subject: string(subj), Reply: e.nc.NewInbox(), Data: data, Header: nats.Header{proto.HdrReplyTo: []string{k.Reply()}}}
	for h, v := range hdr {
		m.Header[h] = v
	}
	if err := e.nc.PublishMsg(m); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got []relayed
	raw, err := k.WaitWith(ctx, func(m *nats.Msg) bool {
		r := parseRelayed(e.t, m)
		got = append(got, r)
		if onMsg != nil {
			onMsg(r)
		}
		if r.id != nil && answer != nil {
			if body := answer(r); body != "" {
				if err := e.nc.Publish(r.reply, []byte(body)); err != nil {
					e.t.Error(err)
				}
			}
		}
		return false
	})
	if err != nil {
		e.t.Fatalf("%s: %v", req.Method, err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil {
		e.t.Fatal(err)
	}
	return &r, got
}

// setLevel sets the logging level of the client session's upstream
// session, for a client that declares caps (as the edge sends them with
// every call of the session).
func (e *env) setLevel(session, level, caps string) {
	e.t.Helper()
	req := proto.Request{Method: "logging/setLevel", Upstream: "up", Edge: "e1", Session: session, ClientCaps: []byte(caps), Params: []byte(`{"level":"` + level + `"}`)}
	r, err := e.callErr(e.t.Context(), proto.OpLoggingSetLevel, req)
	if err != nil || r.Error != nil {
		e.t.Fatalf("logging/setLevel: %v %v", err, r.Error)
	}
}

// elicited answers an elicitation/create for one field with "accept" and
// the value of that field in values ("" answers nothing).
func elicited(values map[string]string) func(relayed) string {
	return func(r relayed) string {
		if r.method != "elicitation/create" {
			return `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"not here"}}`
		}
		var p struct{ Message string }
		_ = json.Unmarshal(r.params, &p)
		field := strings.TrimSuffix(p.Message, "?")
		v, ok := values[field]
		if !ok {
			return ""
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":"whatever","result":{"action":"accept","content":{%q:%q}}}`, field, v)
	}
}

func stdio2025(name string) proto.UpstreamSpec {
	sp := stdioSpec(name, 1)
	sp.Env[stdioEraEnv] = "2025"
	return sp
}

// TestWorkerRelayCall: a tool that logs, reports progress and elicits
// during a call, on every transport: the edge gets the log, the progress
// with its own token restored byte for byte (the upstream saw a worker
// token), and the elicitation, whose answer reaches the tool and its
// result; everything before the reply.
func TestWorkerRelayCall(t *testing.T) {
	transports := []struct {
		name string
		spec func(t *testing.T) proto.UpstreamSpec
	}{
		{"streamable-sse", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL)
		}},
		{"streamable-json", func(t *testing.T) proto.UpstreamSpec { // the messages come on the GET stream
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "json").ts.URL)
		}},
		{"legacy-sse", func(t *testing.T) proto.UpstreamSpec {
			return proto.UpstreamSpec{Name: "up", Transport: proto.TransportSSE, URL: serveHTTP(t, newUpstream(0), "sse").ts.URL}
		}},
		{"stdio", func(*testing.T) proto.UpstreamSpec { return stdio2025("up") }},
	}
	tokens := []string{`9007199254740993`, `"tok"`}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := startWorker(t, Config{}, tr.spec(t))
			e.waitUp("up")
			e.setLevel("s1", "debug", `{"elicitation":{}}`)
			for _, tok := range tokens {
				req := toolCall("up", "chatty", `{}`)
				req.Session, req.ID, req.Protocol, req.ClientCaps = "s1", 5, "2025-11-25", []byte(`{"elicitation":{}}`)
				req.Params = []byte(`{"name":"up__chatty","arguments":{},"_meta":{"progressToken":` + tok + `}}`)
				r, msgs := e.edgeCall(t.Context(), proto.OpToolsCall, req, elicited(map[string]string{"name": "ada"}), nil)
				if r.Error != nil {
					t.Fatalf("token %s: %v", tok, r.Error)
				}
				var res struct{ Content []struct{ Text string } }
				_ = json.Unmarshal(r.Result, &res)
				if len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, "token=sy-") || strings.Contains(res.Content[0].Text, "sy-w1-") || !strings.HasSuffix(res.Content[0].Text, " action=accept name=ada") {
					t.Fatalf("token %s: result %s, want the worker's token and the elicited name", tok, r.Result)
				}
				var logs, progress, asks int
				for _, m := range msgs {
					switch m.method {
					case "notifications/message":
						logs++
						if member(m.params, "data") != `"chatty log"` {
							t.Errorf("log %s", m.params)
						}
					case "notifications/progress":
						progress++
						if got := member(m.params, "progressToken"); got != tok {
							t.Errorf("progress token %s, want the client's %s", got, tok)
						}
					case "elicitation/create":
						asks++
						if m.reply == "" {
							t.Error("elicitation without a reply subject")
						}
					default:
						t.Errorf("unexpected message %s %s", m.method, m.params)
					}
				}
				if logs != 1 || progress != 2 || asks != 1 {
					t.Errorf("token %s: %d logs, %d progress, %d elicitations; want 1, 2, 1", tok, logs, progress, asks)
				}
			}
		})
	}
}

// TestWorkerRelayCancelled: a call cancelled while its elicitation waits
// for the client stops waiting: its reply comes back at once, and the
// upstream's request is answered "request cancelled" (the upstream, told
// of the cancellation too, may give up on it first).
func TestWorkerRelayCancelled(t *testing.T) {
	u := newUpstream(0)
	h := serveHTTP(t, u, "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	req := toolCall("up", "chatty", `{}`)
	req.Session, req.ID, req.ClientCaps = "s1", 77, []byte(`{"elicitation":{}}`)
	asked := make(chan struct{}, 1)
	replies := make(chan *proto.Reply, 1)
	go func() {
		r, _ := e.edgeCall(t.Context(), proto.OpToolsCall, req, func(relayed) string { return "" }, func(m relayed) {
			if m.method == "elicitation/create" {
				asked <- struct{}{}
			}
		})
		replies <- r
	}()
	recv(t, asked, 10*time.Second, "the relayed elicitation")
	data, _ := proto.Marshal(&proto.Cancel{Edge: "e1", ID: 77})
	if _, err := e.request(t.Context(), proto.OpCancel, data); err != nil {
		t.Fatal(err)
	}
	r := recv(t, replies, 10*time.Second, "the cancelled call's reply")
	wantError(t, r, proto.CodeInternal, "cancelled")
	eventually(t, 10*time.Second, "the upstream's request answered \"request cancelled\"", func() bool {
		return h.answered("request cancelled") == 1
	})
	if msg := recv(t, u.elicitErrs, 10*time.Second, "the upstream's elicitation to fail"); !strings.Contains(msg, "request cancelled") && !strings.Contains(msg, "context canceled") {
		t.Errorf("the upstream's elicitation failed with %q", msg)
	}
}

// sessionMsgs collects the session-level messages of edge e1.
type sessionMsgs struct {
	t  *testing.T
	ch chan string // "<session> <method> <uri>"
}

func (e *env) watchSessions() *sessionMsgs {
	subj, _ := proto.EdgeMsgSubject("e1")
	sm := &sessionMsgs{t: e.t, ch: make(chan string, 64)}
	_, err := e.nc.Subscribe(subj, func(m *nats.Msg) {
		r := parseRelayed(e.t, m)
		sm.ch <- m.Header.Get(proto.HdrSession) + " " + r.method + " " + strings.Trim(member(r.params, "uri"), `"`)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return sm
}

// next returns the next session-level message.
func (sm *sessionMsgs) next() string {
	sm.t.Helper()
	return recv(sm.t, sm.ch, 10*time.Second, "a session-level message")
}

// TestWorkerRelayResourceUpdated: notifications/resources/updated reaches
// exactly the client sessions that subscribed to the URI, as
// session-level messages (proto.EdgeMsgSubject, proto.HdrSession): on a
// stdio process shared by the sessions and on dedicated HTTP sessions. On
// the shared process an unsubscribe while another session is still
// subscribed stays in the worker, and a closed session gets nothing more.
// (Updates arrive in order, so a later update for another session proves
// an earlier one went nowhere else.)
func TestWorkerRelayResourceUpdated(t *testing.T) {
	cases := []struct {
		name   string
		spec   func(t *testing.T) proto.UpstreamSpec
		shared bool
	}{
		{"stdio", func(*testing.T) proto.UpstreamSpec { return stdio2025("up") }, true},
		{"streamable", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL)
		}, false},
		{"legacy-sse", func(t *testing.T) proto.UpstreamSpec {
			return proto.UpstreamSpec{Name: "up", Transport: proto.TransportSSE, URL: serveHTTP(t, newUpstream(0), "sse").ts.URL}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startWorker(t, Config{}, tc.spec(t))
			e.waitUp("up")
			sm := e.watchSessions()
			sub := func(method, session, uri string) {
				t.Helper()
				op, _ := proto.Forwarded(method)
				req := proto.Request{Method: method, Upstream: "up", Edge: "e1", Session: session, Params: []byte(`{"uri":"` + uri + `"}`)}
				r, err := e.callErr(t.Context(), op, req)
				if err != nil || r.Error != nil || string(r.Result) != "{}" {
					t.Fatalf("%s %s %s: %v %v %s", method, session, uri, err, r.Error, r.Result)
				}
			}
			touch := func(session, uri string) {
				t.Helper()
				req := toolCall("up", "touch", `{"uri":"`+uri+`"}`)
				req.Session = session
				wantText(t, e.call(req), "touched "+uri)
			}
			sub("resources/subscribe", "a", "test://text")
			sub("resources/subscribe", "b", "test://other")
			touch("a", "test://text")
			touch("b", "test://other")
			// Dedicated sessions have a GET stream each: the two updates may
			// come in either order.
			got := []string{sm.next(), sm.next()}
			slices.Sort(got)
			if want := []string{"a notifications/resources/updated test://text", "b notifications/resources/updated test://other"}; !slices.Equal(got, want) {
				t.Fatalf("session-level messages %q, want %q", got, want)
			}
			if !tc.shared {
				return
			}
			// Two sessions on test://text; a leaves, c stays.
			sub("resources/subscribe", "c", "test://text")
			sub("resources/unsubscribe", "a", "test://text")
			touch("c", "test://text")
			touch("b", "test://other")
			for _, want := range []string{"c notifications/resources/updated test://text", "b notifications/resources/updated test://other"} {
				if got := sm.next(); got != want {
					t.Fatalf("session-level message %q, want %q", got, want)
				}
			}
			// c's session ends: its subscription goes with it.
			subj, _ := proto.EvtSessionClosedSubject("e1")
			data, _ := proto.Marshal(&proto.SessionClosed{Edge: "e1", Session: "c"})
			if err := e.nc.Publish(subj, data); err != nil {
				t.Fatal(err)
			}
			if err := e.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "c's subscription dropped", func() bool {
				touch("b", "test://text")
				touch("b", "test://other")
				got := sm.next()
				if got == "c notifications/resources/updated test://text" {
					_ = sm.next() // b's, after it
					return false
				}
				if got != "b notifications/resources/updated test://other" {
					t.Fatalf("session-level message %q", got)
				}
				return true
			})
			// c was test://text's last subscriber on the process: the
			// upstream is told, and test://other (b's) stays.
			eventually(t, 5*time.Second, "test://text unsubscribed upstream", func() bool {
				req := toolCall("up", "subscriptions", `{}`)
				req.Session = "b"
				log := resultText(t, e.call(req))
				return strings.HasSuffix(log, "unsubscribe test://text") && !strings.Contains(log, "unsubscribe test://other")
			})
		})
	}
}

// TestWorkerRelayClientCaps: a dedicated upstream session declares its
// client's capabilities (proto.Request.ClientCaps), or none when the edge
// sent none; the shared pool declares everything the gateway relays.
func TestWorkerRelayClientCaps(t *testing.T) {
	e := startWorker(t, Config{}, streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL))
	e.waitUp("up")
	cases := []struct {
		name, session, caps, want string
	}{
		{"pool", "", "", "elicitation=true form=true url=true sampling=true roots=true"},
		{"dedicated", "c1", `{"elicitation":{"form":{}},"roots":{"listChanged":true}}`, "elicitation=true form=true url=false sampling=false roots=true"},
		{"dedicated sampling", "c2", `{"sampling":{}}`, "elicitation=false form=false url=false sampling=true roots=false"},
		{"dedicated none", "c3", "", "elicitation=false form=false url=false sampling=false roots=false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := toolCall("up", "caps", `{}`)
			req.Session, req.ClientCaps = tc.session, []byte(tc.caps)
			wantText(t, e.call(req), tc.want)
		})
	}
}

// TestWorkerRelayBridge: a 2025-era client calling through an upstream
// session that negotiated 2026-07-28 (a stateless HTTP upstream, a 2026
// stdio process) gets the upstream's input requests as relayed
// elicitations, round after round, and then the final result; a 2026-era
// client gets the input_required result as it is.
func TestWorkerRelayBridge(t *testing.T) {
	cases := []struct {
		name string
		spec func(t *testing.T) proto.UpstreamSpec
	}{
		{"streamable-stateless", func(t *testing.T) proto.UpstreamSpec {
			return streamableSpec("up", serveHTTP(t, newUpstream(0), "stateless").ts.URL)
		}},
		{"stdio-2026", func(*testing.T) proto.UpstreamSpec { return stdioSpec("up", 1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startWorker(t, Config{}, tc.spec(t))
			e.waitUp("up")
			req := toolCall("up", "mrtr", `{}`)
			req.Session, req.Protocol, req.ClientCaps = "s25", "2025-11-25", []byte(`{"elicitation":{}}`)
			r, msgs := e.edgeCall(t.Context(), proto.OpToolsCall, req, elicited(map[string]string{"name": "ada", "color": "blue"}), nil)
			wantText(t, r, "hello ada, blue (name=ada)")
			var asked []string
			for _, m := range msgs {
				asked = append(asked, m.method+" "+member(m.params, "message"))
			}
			if got := strings.Join(asked, "; "); got != `elicitation/create "name?"; elicitation/create "color?"` {
				t.Errorf("relayed %s", got)
			}

			req = toolCall("up", "mrtr", `{}`)
			req.Protocol = "2026-07-28"
			r, msgs = e.edgeCall(t.Context(), proto.OpToolsCall, req, nil, nil)
			if r.Error != nil || member(r.Result, "resultType") != `"input_required"` || len(msgs) != 0 {
				t.Fatalf("2026 client: %s %v, %d messages; want the input_required result", r.Result, r.Error, len(msgs))
			}
		})
	}
}

// TestWorkerRelaySessionRequest: a request the upstream sends its
// dedicated session outside any call goes to that client session as a
// session-level message; the edge's answer reaches the upstream.
func TestWorkerRelaySessionRequest(t *testing.T) {
	for _, kind := range []string{"streamable", "sse"} {
		t.Run(kind, func(t *testing.T) {
			u := newUpstream(0)
			sp := streamableSpec("up", serveHTTP(t, u, kind).ts.URL)
			if kind == "sse" {
				sp.Transport = proto.TransportSSE
			}
			e := startWorker(t, Config{}, sp)
			e.waitUp("up")
			subj, _ := proto.EdgeMsgSubject("e1")
			msgs, err := e.nc.SubscribeSync(subj)
			if err != nil {
				t.Fatal(err)
			}
			req := toolCall("up", "later", `{}`)
			req.Session, req.ClientCaps = "s9", []byte(`{"elicitation":{}}`)
			wantText(t, e.call(req), "later")
			u.gate <- t.Context()
			m, err := msgs.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no session-level message: %v", err)
			}
			r := parseRelayed(t, m)
			if got := m.Header.Get(proto.HdrSession); got != "s9" || r.method != "elicitation/create" || r.reply == "" {
				t.Fatalf("session-level message for %q: %s %s (reply %q)", got, r.method, r.params, r.reply)
			}
			if err := e.nc.Publish(r.reply, []byte(elicited(map[string]string{"name": "bo"})(r))); err != nil {
				t.Fatal(err)
			}
			if got := recv(t, u.later, 10*time.Second, "the upstream's elicitation to end"); got != "accept bo" {
				t.Fatalf("the upstream's elicitation ended with %q", got)
			}
		})
	}
}

// TestWorkerRelayStatelessSession: a 2025-era client's dedicated session
// to an upstream that keeps no 2025 sessions speaks 2026-07-28, yet the
// methods 2026-07-28 removed still work as on the 2025 session it
// replaces (logging/setLevel, resources/subscribe and unsubscribe), and
// the level set reaches the upstream with every later request, so the
// tool's logs are relayed, with its progress.
func TestWorkerRelayStatelessSession(t *testing.T) {
	e := startWorker(t, Config{}, streamableSpec("up", serveHTTP(t, newUpstream(0), "stateless").ts.URL))
	e.waitUp("up")
	caps := `{"elicitation":{}}`
	e.setLevel("s1", "info", caps)
	for _, method := range []string{"resources/subscribe", "resources/unsubscribe"} {
		op, _ := proto.Forwarded(method)
		req := proto.Request{Method: method, Upstream: "up", Edge: "e1", Session: "s1", ClientCaps: []byte(caps), Params: []byte(`{"uri":"test://text"}`)}
		r, err := e.callErr(t.Context(), op, req)
		if err != nil || r.Error != nil {
			t.Fatalf("%s: %v %v", method, err, r.Error)
		}
	}
	req := toolCall("up", "chatty", `{"quiet":true}`)
	req.Session, req.Protocol, req.ClientCaps = "s1", "2025-11-25", []byte(caps)
	req.Params = []byte(`{"name":"up__chatty","arguments":{"quiet":true},"_meta":{"progressToken":"p"}}`)
	r, msgs := e.edgeCall(t.Context(), proto.OpToolsCall, req, nil, nil)
	if text := resultField(t, r, "content", "0", "text"); text == nil || !strings.HasSuffix(text.(string), " quiet") {
		t.Fatalf("result %s", r.Result)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.method)
	}
	if strings.Join(got, ",") != "notifications/message,notifications/progress,notifications/progress" {
		t.Fatalf("relayed %v, want the log and two progress notifications", got)
	}
	if up := e.svc.mgr.get("up"); up.Dedicated() != 1 {
		t.Fatalf("%d dedicated sessions", up.Dedicated())
	}
}

// TestWorkerRelayMarkInputRequired: a 2026-era client's call on a
// stateful (2025-11-25) upstream session whose tool needs two rounds of
// input: the upstream's SDK asks the first itself (relayed to the client),
// then returns the second as inputRequests without a resultType, which
// the worker marks input_required; the client's retry with inputResponses
// and the requestState completes the call.
func TestWorkerRelayMarkInputRequired(t *testing.T) {
	e := startWorker(t, Config{}, streamableSpec("up", serveHTTP(t, newUpstream(0), "streamable").ts.URL))
	e.waitUp("up")
	req := toolCall("up", "mrtr", `{}`)
	req.Protocol = "2026-07-28"
	r, msgs := e.edgeCall(t.Context(), proto.OpToolsCall, req, elicited(map[string]string{"name": "ada"}), nil)
	if len(msgs) != 1 || msgs[0].method != "elicitation/create" {
		t.Fatalf("relayed %+v, want the first elicitation", msgs)
	}
	if r.Error != nil || member(r.Result, "resultType") != `"input_required"` || member(r.Result, "requestState") != `"name=ada"` {
		t.Fatalf("result %s %v, want input_required with the upstream's requestState", r.Result, r.Error)
	}
	req.Params = []byte(`{"name":"up__mrtr","arguments":{},"requestState":"name=ada",` +
		`"inputResponses":{"color":{"action":"accept","content":{"color":"blue"}}}}`)
	r, msgs = e.edgeCall(t.Context(), proto.OpToolsCall, req, nil, nil)
	if len(msgs) != 0 {
		t.Errorf("retry relayed %+v", msgs)
	}
	wantText(t, r, "hello ada, blue (name=ada)")
}
