package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// scriptedRouter answers by tool name, the same way for every rig: the
// fast path and the SDK path must then answer the client alike.
func scriptedRouter(nc **nats.Conn, seen chan<- proto.Request) nats.MsgHandler {
	return func(m *nats.Msg) {
		var req proto.Request
		if err := proto.Unmarshal(m.Data, &req); err != nil {
			return
		}
		if seen != nil {
			seen <- req
		}
		var r proto.Reply
		switch {
		case req.Method == "tools/list":
			r.Result = []byte(`{"tools":[{"name":"up__echo","inputSchema":{"type":"object"}}],"nextCursor":"sy1:abc"}`)
		case req.Name == "up__odd":
			r.Result = []byte(`{"content":[{"type":"hologram","depth":12345678901234567890}],"isError":false}`)
		case req.Name == "up__meta":
			r.Result = []byte(`{"_meta":{"up":1},"content":[]}`)
		case req.Name == "up__empty":
			r.Result = []byte(`{}`)
		case req.Name == "up__pretty":
			r.Result = []byte("{\n  \"content\": [\n    {\"type\": \"text\", \"text\": \"a\\nb\"}\n  ]\n}")
		case req.Name == "up__slow":
			return // never answered
		default:
			r.Error = &proto.Error{Code: proto.CodeInvalidParams, Msg: "unknown tool " + req.Name, Data: []byte(`{"tool":"` + req.Name + `"}`)}
		}
		reply(*nc, m, &r)
	}
}

// exchange is what a client sees of one POST.
type exchange struct {
	Status int
	Type   string
	Body   any
}

func (g *rig) exchange(body string, hdr ...string) exchange {
	g.t.Helper()
	code, raw, h := g.post(body, hdr...)
	ex := exchange{Status: code, Type: h.Get("Content-Type")}
	data := raw
	if strings.HasPrefix(ex.Type, "text/event-stream") {
		data = ""
		for _, line := range strings.Split(raw, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data += d
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&ex.Body); err != nil {
		ex.Body = raw // not JSON: compare the text
	}
	return ex
}

// meta2026 is the SEP-2575 _meta triple of a 2026-07-28 request.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// call2026 is a 2026-07-28 tools/call of up__odd with the given _meta members.
func call2026(meta string) string {
	return `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__odd","_meta":{` + meta + `}}}`
}

func hdr2026(method, name string) []string {
	h := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// TestFastPathMatchesSDK sends the same requests to an edge with the fast
// path and to one without it and expects the same answers, in both
// protocol eras and both response modes.
func TestFastPathMatchesSDK(t *testing.T) {
	type req struct {
		name string
		body string
		hdr  []string
	}
	var reqs []req
	for _, tool := range []string{"up__odd", "up__meta", "up__empty", "up__pretty", "up__nope"} {
		reqs = append(reqs, req{"2025 " + tool, `{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"` + tool + `","arguments":{"n":1}}}`, nil})
		reqs = append(reqs, req{"2026 " + tool, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `",` + meta2026 + `}}`, hdr2026("tools/call", tool)})
	}
	reqs = append(reqs,
		req{"2025 list", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, nil},
		req{"2026 list", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"sy1:x",` + meta2026 + `}}`, hdr2026("tools/list", "")},
		req{"2026 name mismatch", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__odd",` + meta2026 + `}}`, hdr2026("tools/call", "up__other")},
		req{"2026 method header missing", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__odd",` + meta2026 + `}}`, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Name", "up__odd"}},
		req{"2026 meta version missing", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__odd"}}`, hdr2026("tools/call", "up__odd")},
		req{"2025 wrong accept", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__odd"}}`, []string{"Accept", "application/json"}},
		req{"2025 null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"up__odd"}}`, nil},
		req{"2025 no params", `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`, nil},
		req{"2025 name not a string", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":5}}`, nil},
		req{"2025 session with 2026 meta", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__odd",` + meta2026 + `}}`, nil},
		req{"2025 Last-Event-ID", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__odd"}}`, []string{"Last-Event-ID", "x"}},
		req{"2025 too deep", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__odd","arguments":{"a":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `}}}`, nil},
		req{"2025 wrong host", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__odd"}}`, []string{"Host", "evil.example"}},
		req{"2025 text/plain", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"up__odd"}}`, []string{"Content-Type", "text/plain"}},
		req{"2025 unknown session, unknown method", `{"jsonrpc":"2.0","id":6,"method":"bogus/x"}`, []string{"Mcp-Session-Id", "nosuch"}},
		req{"2026 capabilities of the wrong shape", call2026(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":true}`), hdr2026("tools/call", "up__odd")},
		req{"2026 capabilities not an object", call2026(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]`), hdr2026("tools/call", "up__odd")},
		req{"2026 clientInfo of the wrong shape", call2026(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":5}`), hdr2026("tools/call", "up__odd")},
		req{"2026 version escaped", call2026(`"io.modelcontextprotocol/protocolVersion":"2026-07-2\u0038","io.modelcontextprotocol/clientCapabilities":{}`), hdr2026("tools/call", "up__odd")},
		req{"2026 version not the header's", call2026(`"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}`), hdr2026("tools/call", "up__odd")},
		req{"2026 version twice, the last right", call2026(`"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`), hdr2026("tools/call", "up__odd")},
		req{"2026 capabilities twice, the last wrong", call2026(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientCapabilities":{"roots":true}`), hdr2026("tools/call", "up__odd")},
		req{"2026 clientInfo null", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__odd","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}}}`, hdr2026("tools/call", "up__odd")},
	)
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			var ncFast, ncSDK *nats.Conn
			fast := newRigWith(t, scriptedRouter(&ncFast, nil), &rigOpts{sse: sse})
			ncFast = fast.nc
			sdk := newRigWith(t, scriptedRouter(&ncSDK, nil), &rigOpts{sse: sse, noFastPath: true})
			ncSDK = sdk.nc
			fast.initialize()
			sdk.initialize()
			for _, r := range reqs {
				t.Run(r.name, func(t *testing.T) {
					for _, g := range []*rig{fast, sdk} {
						if strings.HasPrefix(r.name, "2026") {
							sid := g.sid
							g.sid = "" // stateless
							defer func() { g.sid = sid }()
						}
					}
					got, want := fast.exchange(r.body, r.hdr...), sdk.exchange(r.body, r.hdr...)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("fast path answered\n%+v\nthe SDK\n%+v", got, want)
					}
				})
			}
		})
	}
}

// TestFastPathPublishes checks the envelope the fast path puts on the bus.
func TestFastPathPublishes(t *testing.T) {
	var nc *nats.Conn
	seen := make(chan proto.Request, 4)
	g := newRigWith(t, scriptedRouter(&nc, seen), nil)
	nc = g.nc
	g.initialize()
	params := `{"name":"up__odd","arguments":{"n":1},"_meta":{"k":"v"}}`
	g.call("tools/call", params)
	got := <-seen
	if got.Method != "tools/call" || got.Name != "up__odd" || got.Session != g.sid || got.Edge != "edge-t" ||
		got.Protocol != "2025-11-25" || got.View != "" || string(got.Params) != params || got.DeadlineUnixMs == 0 {
		t.Fatalf("published %+v (params %s)", got, got.Params)
	}
	g.sid = ""
	g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026+`}}`, hdr2026("tools/list", "")...)
	got = <-seen
	if got.Method != "tools/list" || got.Session != "" || got.Protocol != "2026-07-28" {
		t.Fatalf("published %+v", got)
	}
}

// TestFastPathCancelAndDuplicate: a second call with an id in flight is
// refused like the SDK refuses it, and notifications/cancelled ends the
// first, with no response (TestEdgeCancelledCallGetsNoAnswer).
func TestFastPathCancelAndDuplicate(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, scriptedRouter(&nc, nil), nil)
	nc = g.nc
	g.initialize()
	first := make(chan exchange, 1)
	go func() {
		first <- g.exchange(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__slow"}}`)
	}()
	// Wait until the first call is in flight, then send its id again.
	cs := g.e.sessions.get(g.sid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		cs.mu.Lock()
		_, inFlight := cs.inflight[idKey(json.RawMessage("42"))]
		cs.mu.Unlock()
		if inFlight {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first call never in flight")
		}
	}
	dup := g.exchange(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__odd"}}`)
	if dup.Status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(dup.Body), "duplicate") {
		t.Fatalf("duplicate id answered %+v", dup)
	}
	code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42,"reason":"test"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	select {
	case ex := <-first:
		if ex.Status != http.StatusOK || ex.Type != "text/event-stream" || fmt.Sprint(ex.Body) != "" {
			t.Fatalf("cancelled call answered %+v", ex)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled call still running")
	}
}

// TestFastPathIdleTimeout: calls the SDK never sees keep a session open
// past its idle timeout, and an idle session is closed (404, session_closed).
func TestFastPathIdleTimeout(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, scriptedRouter(&nc, nil), &rigOpts{sessionTimeout: time.Second})
	nc = g.nc
	events := make(chan *nats.Msg, 4)
	subj, _ := proto.EvtSessionClosedSubject("edge-t")
	if _, err := nc.ChanSubscribe(subj, events); err != nil {
		t.Fatal(err)
	}
	g.initialize()
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if res, e := g.call("tools/call", `{"name":"up__odd"}`); e != nil || res == nil {
			t.Fatalf("active session: %s %+v", res, e)
		}
	}
	select {
	case <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("idle session not closed")
	}
	if code, _, _ := g.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__odd"}}`); code != http.StatusNotFound {
		t.Fatalf("closed session answered %d", code)
	}
}

func TestWithServerInfo(t *testing.T) {
	s := &Service{impl: &mcp.Implementation{Name: "switchyard", Version: "v"}}
	s.serverInfoMeta = []byte(`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}`)
	tests := []struct {
		in     string
		noMeta bool
		want   string
	}{
		{`{}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}}`},
		{` { "a" : 1 }`, true, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}},"a" : 1 }`},
		{`{"_meta":{"x":1},"a":2}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"x":1},"a":2}`},
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":"mine"}}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":"mine"}}`},
		{`[1]`, false, `[1]`},
		{`{"_meta":null,"a":1}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}},"a":1}`},
		{`{"_meta":"s"}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}}`},
		{`{"_meta": { } }`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}}`},
		{`{"content":[{"_meta":{"x":1}}]}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}},"content":[{"_meta":{"x":1}}]}`},
		{`{"_meta":{"x":1},"_meta":{"y":2}}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"y":2}}`},
		{`{"\u005fmeta":{"io.modelcontextprotocol/serverInfo":"mine"},"_meta":{"x":1}}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"x":1}}`},
		// An escaped _meta key and no "_meta" as written: the edge's
		// serverInfo goes into the upstream's _meta, not into a _meta
		// spliced before it (decoders keep the last).
		{`{"\u005fmeta":{"x":1}}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"x":1}}`},
		{`{"_m\u0065t\u0061":null,"a":"\u00e9"}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}},"a":"é"}`},
		{`{"\u005Fme\u0074a":{"x":1}}`, false, `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"x":1}}`},
	}
	for _, tc := range tests {
		got := s.withServerInfo([]byte(tc.in), tc.noMeta)
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tc.want), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("withServerInfo(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// The upstream's bytes are kept as they are (no re-encoding: key order,
	// spacing and characters encoding/json would escape).
	in := `{"z":"<&>", "_meta" : {"x":"\u00e9"} ,"a":[1, 2]}`
	want := `{"z":"<&>", "_meta" : {"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"},"x":"\u00e9"} ,"a":[1, 2]}`
	if got := s.withServerInfo([]byte(in), false); string(got) != want {
		t.Errorf("withServerInfo(%s) = %s, want %s", in, got, want)
	}
	// Invalid JSON is returned as it is, and does not panic.
	for _, in := range []string{`{"_meta":`, `{"_meta":{"x"}}`, `{"_meta" 1}`} {
		if got := s.withServerInfo([]byte(in), false); string(got) != in {
			t.Errorf("withServerInfo(%s) = %s, want it unchanged", in, got)
		}
	}
}

func TestMergeMetaNull(t *testing.T) {
	add := map[string]any{"k": 1}
	for in, want := range map[string]string{
		`{"_meta":null,"a":1}`: `{"_meta":{"k":1},"a":1}`,
		`{"_meta":"s"}`:        `{"_meta":{"k":1}}`,
		`null`:                 `null`,
	} {
		got := mergeMeta([]byte(in), add)
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("mergeMeta(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAppendOneLine(t *testing.T) {
	got := appendOneLine(nil, []byte("{\n \"a\": \"x\\ny\"\r\n}"))
	if !bytes.Equal(got, []byte(`{"a":"x\ny"}`)) {
		t.Fatalf("got %s", got)
	}
}

// FuzzParseBody: the in-place reader of a POST body never panics, accepts
// only valid JSON, and reads the members encoding/json sees. And unless it
// finds a member given twice (which precheck refuses), a lenient decoder
// (encoding/json into structs: the last of duplicates, field names matched
// without regard to case) reads the same method, tool name, progress token
// and protocol version as the edge: what the gateway checks is what an
// upstream built on encoding/json runs.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"k":1}}}`,
		`[{"jsonrpc":"2.0","method":"x"},null]`, `{"method":1}`, `{"method":null}`, `"s"`, `{`, ``,
		`{"jsonrpc":"2.0","id":"x","method":"notifications/cancelled","params":{"requestId":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":{"NAME":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1,"ProgressToken":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"a","name":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, single, ok := parseBody(body)
		if !ok {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if single == nil {
			return
		}
		if len(msgs) != 1 || msgs[0] != single {
			t.Fatalf("single message not in msgs")
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
		p := single.params()
		_ = p.meta("k")
		if single.clashed() != "" {
			return // refused before anything reads it
		}
		var method string
		_ = json.Unmarshal(m["method"], &method)
		if single.Method != method || !bytes.Equal(single.Params, m["params"]) {
			t.Fatalf("read method %q params %q, encoding/json %q %q", single.Method, single.Params, method, m["params"])
		}
		var pm map[string]json.RawMessage
		if json.Unmarshal(single.Params, &pm) == nil && p.Name != "" {
			var name string
			if json.Unmarshal(pm["name"], &name) != nil || name != p.Name {
				t.Fatalf("read name %q, encoding/json %s", p.Name, pm["name"])
			}
		}
		var lenient struct {
			Method string
			Params struct {
				Name string
				Meta struct {
					ProgressToken   json.RawMessage
					ProtocolVersion json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
				} `json:"_meta"`
			}
		}
		if json.Unmarshal(body, &lenient) != nil {
			return // a type the struct does not take: the upstream refuses it too
		}
		if lenient.Method != single.Method {
			t.Fatalf("the edge read method %q, a lenient decoder %q", single.Method, lenient.Method)
		}
		if lenient.Params.Name != p.Name {
			t.Fatalf("the edge read name %q, a lenient decoder %q", p.Name, lenient.Params.Name)
		}
		for _, c := range []struct {
			key  string
			seen json.RawMessage
		}{{"progressToken", lenient.Params.Meta.ProgressToken}, {mcp.MetaKeyProtocolVersion, lenient.Params.Meta.ProtocolVersion}} {
			if got := p.meta(c.key); (len(p.Meta) > 0 && p.Meta[0] == '{') && !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(c.seen)) {
				t.Fatalf("the edge read _meta %s %s, a lenient decoder %s", c.key, got, c.seen)
			}
		}
	})
}

// TestFastPathDisconnectIsNotCancel: a 2025-era call whose client
// connection drops keeps running (MCP: a disconnect is not a
// cancellation); notifications/cancelled still ends it.
func TestFastPathDisconnectIsNotCancel(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, scriptedRouter(&nc, nil), nil)
	nc = g.nc
	g.initialize()
	ctx, drop := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url,
		strings.NewReader(`{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"up__slow"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", g.sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	cs := g.e.sessions.get(g.sid)
	key := idKey(json.RawMessage(`"d1"`))
	inFlight := func() bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		_, ok := cs.inflight[key]
		return ok
	}
	for deadline := time.Now().Add(5 * time.Second); !inFlight(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("call never in flight")
		}
	}
	drop()
	<-done
	time.Sleep(100 * time.Millisecond) // time for a wrongly cancelled call to end
	if !inFlight() {
		t.Fatal("the call ended when its connection dropped")
	}
	// Escaped the other way round, the same id cancels it.
	code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u00641"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	for deadline := time.Now().Add(5 * time.Second); inFlight(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("notifications/cancelled did not end the call")
		}
	}
}

func TestIDKey(t *testing.T) {
	same := [][]string{{`1`, `1.0`, `1e0`}, {`"ab"`, `"a\u0062"`}, {`-3`, `-3.0`}}
	for _, group := range same {
		for _, id := range group[1:] {
			if idKey(json.RawMessage(id)) != idKey(json.RawMessage(group[0])) {
				t.Errorf("idKey(%s) != idKey(%s)", id, group[0])
			}
		}
	}
	if idKey(json.RawMessage(`1`)) == idKey(json.RawMessage(`"1"`)) {
		t.Error("number 1 and string \"1\" share a key")
	}
}

// TestPrecheckLeavesTransportErrorsToSDK: the SDK's transport checks come
// before the edge's JSON-RPC checks, as they would without the edge.
func TestPrecheckLeavesTransportErrorsToSDK(t *testing.T) {
	g := newRig(t, nil)
	g.initialize()
	bad := `{"jsonrpc":"2.0","id":1,"method":`
	tests := []struct {
		name string
		body string
		hdr  []string
		code int
	}{
		{"foreign Host", bad, []string{"Host", "evil.example"}, http.StatusForbidden},
		{"text/plain", bad, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"bogus/x"}`, []string{"Mcp-Session-Id", "nosuch"}, http.StatusNotFound},
		{"malformed on a good request", bad, nil, http.StatusBadRequest},
	}
	for _, tc := range tests {
		if code, body, _ := g.post(tc.body, tc.hdr...); code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
		}
	}
}

// BenchmarkWithServerInfo: a 2026-era tools/call result as the go-sdk
// upstream sends it (its own serverInfo in _meta), small and 64 KiB, through
// the in-place splice (op=splice) and through mergeMeta's decode and
// re-encode, which the splice replaced (op=decode-merge).
func BenchmarkWithServerInfo(b *testing.B) {
	s := &Service{impl: &mcp.Implementation{Name: "switchyard", Version: "v"}}
	s.serverInfoMeta = []byte(`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}`)
	for _, size := range []int{16, 64 << 10} {
		text := strings.Repeat("x", size)
		raw := []byte(`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fixture","version":"v0.1.0"}},"content":[{"type":"text","text":"` + text + `"}],"resultType":"complete"}`)
		b.Run(fmt.Sprintf("text=%d/op=splice", size), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				s.withServerInfo(raw, false)
			}
		})
		b.Run(fmt.Sprintf("text=%d/op=decode-merge", size), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				mergeMeta(raw, map[string]any{mcp.MetaKeyServerInfo: s.impl})
			}
		})
	}
}

// FuzzWithServerInfo checks the in-place splice against encoding/json. The
// result comes from an upstream and is untrusted: on a valid JSON object
// the output is valid JSON that decodes to the input's members, each
// unchanged but _meta, which holds the upstream's serverInfo when it had
// one, else the edge's, next to the upstream's other _meta keys. A result
// that is not an object comes back unchanged, and one that starts like an
// object but is not valid JSON comes back unchanged or spliced but still
// invalid (withServerInfo does not pay json.Valid when it finds no _meta:
// the splice must never make bad bytes look good, nor good ones bad). The
// input is never written to, including when it is a sub-slice of a larger
// buffer with spare capacity (NATS message data), where the offset
// arithmetic on capacities could go wrong. A traced call merges by decoding
// instead (mergeMeta): its result must decode the same.
func FuzzWithServerInfo(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 } `, `{"_meta":{"x":1},"a":2}`, `{"_meta":{"io.modelcontextprotocol/serverInfo":"mine"}}`,
		`{"_meta":null}`, `{"_meta":[1]}`, `{"_meta":"s"}`, `{"_meta":1.5e3}`, `{"_meta":true}`, `{"_meta": { } }`,
		`{"content":[{"_meta":{"x":1}}]}`, `{"_meta":{"x":1},"_meta":{"y":2}}`, `{"a":"_meta"}`,
		`{"\u005fmeta":{"io.modelcontextprotocol/serverInfo":"mine"},"_meta":{"x":1}}`,
		`{"_meta":{"io.modelcontextprotocol\/serverInfo":null}}`, `{"_m\u0065ta":{"x":1}}`, `{"\u005fmeta":null}`,
		"\t{\n\"_meta\"\r:\n{\n}\n,\"b\":[ ]\t}\n", `{"_meta":{"\u00e9":"\xff"},"k\xff":"\xfe"}`,
		`[1]`, `null`, `"{}"`, `1`, ``, ` `, `{`, `{"a":`, `{"_meta":`, `{"_meta":{"x"}}`, `{"_meta" 1}`, `{}}`, `{} x`,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"a":1}`), true)
	s := &Service{impl: &mcp.Implementation{Name: "switchyard", Version: "v"}}
	s.serverInfoMeta = []byte(`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"v"}}`)
	edgeInfo := json.RawMessage(`{"name":"switchyard","version":"v"}`)
	f.Fuzz(func(t *testing.T, in []byte, noMeta bool) {
		var obj map[string]json.RawMessage
		isObject := json.Valid(in) && json.Unmarshal(in, &obj) == nil && obj != nil
		if _, ok := obj["_meta"]; noMeta && (!isObject || ok) {
			return // noMeta is the caller's promise: a list page the router built
		}
		orig := bytes.Clone(in)
		buf := append(append([]byte("xx"), in...), `,"_meta":{}}`...)
		for _, raw := range [][]byte{in, buf[2 : 2+len(in)], buf[2 : 2+len(in) : 2+len(in)]} {
			out := s.withServerInfo(raw, noMeta)
			if !bytes.Equal(raw, orig) || !bytes.Equal(buf[2:2+len(in)], orig) {
				t.Fatalf("withServerInfo(%q) wrote to its input", orig)
			}
			if !isObject {
				body := bytes.TrimLeft(orig, " \t\r\n")
				if !bytes.Equal(out, orig) && (len(body) == 0 || body[0] != '{' || json.Valid(out)) {
					t.Fatalf("withServerInfo(%q) = %q, want it unchanged", orig, out)
				}
				continue
			}
			var got map[string]json.RawMessage
			if !json.Valid(out) || json.Unmarshal(out, &got) != nil || got == nil {
				t.Fatalf("withServerInfo(%q) = %q, not a JSON object", orig, out)
			}
			if len(got) != len(obj)+1 && len(got) != len(obj) {
				t.Fatalf("withServerInfo(%q) = %q: members changed", orig, out)
			}
			for k, v := range obj {
				if k != "_meta" && !bytes.Equal(got[k], v) {
					t.Fatalf("withServerInfo(%q) = %q: member %q is %q, want %q", orig, out, k, got[k], v)
				}
			}
			want := map[string]json.RawMessage{}
			if json.Unmarshal(obj["_meta"], &want) != nil || want == nil {
				want = map[string]json.RawMessage{} // absent, null or not an object: replaced
			}
			if _, ok := want[mcp.MetaKeyServerInfo]; !ok {
				want[mcp.MetaKeyServerInfo] = edgeInfo
			}
			var meta map[string]json.RawMessage
			if json.Unmarshal(got["_meta"], &meta) != nil || !reflect.DeepEqual(meta, want) {
				t.Fatalf("withServerInfo(%q) = %q: _meta %q, want %q", orig, out, meta, want)
			}
		}
		merged := mergeMeta(orig, map[string]any{mcp.MetaKeyServerInfo: s.impl})
		if !isObject {
			if !bytes.Equal(merged, orig) {
				t.Fatalf("mergeMeta(%q) = %q, want it unchanged", orig, merged)
			}
			return
		}
		spliced := s.withServerInfo(orig, noMeta)
		var m, w any
		if json.Unmarshal(merged, &m) != nil || json.Unmarshal(spliced, &w) != nil || !reflect.DeepEqual(m, w) {
			t.Fatalf("mergeMeta(%q) = %q, withServerInfo %q", orig, merged, spliced)
		}
	})
}

// BenchmarkFastPathRead is what the fast path reads of a tools/call body
// before it publishes it: the envelope, the params (name, _meta) and the
// _meta members it looks at, for a 2025-era call on a session and a
// 2026-07-28 call with the SEP-2575 _meta triple (statelessCallOK's
// checks included; its decode caches are warm after the first call).
func BenchmarkFastPathRead(b *testing.B) {
	args := `"arguments":{"text":"hi","n":1,"nested":{"a":[1,2,3],"b":"x"}}`
	bodies := []struct{ era, body string }{
		{"2025", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo",` + args + `}}`},
		{"2026", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo",` + args + `,` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"bench-client","title":"Bench","version":"1.8.0"}}}}`},
	}
	r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
	for k, v := range map[string]string{"Mcp-Protocol-Version": protocol2026, "Mcp-Method": "tools/call", "Mcp-Name": "up__echo"} {
		r.Header.Set(k, v)
	}
	for _, bb := range bodies {
		body := []byte(bb.body)
		b.Run("era="+bb.era, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_, m, ok := parseBody(body)
				if !ok || m == nil {
					b.Fatal("body does not parse")
				}
				p := m.params()
				if p.Name != "up__echo" || p.meta("progressToken") != nil || p.meta("dev.switchyard/timing") != nil {
					b.Fatal("misread")
				}
				if bb.era == "2026" {
					if !statelessCallOK(r, m, p, protocol2026) {
						b.Fatal("refused")
					}
					_ = p.meta(mcp.MetaKeyClientCapabilities)
					_ = p.meta(mcp.MetaKeyLogLevel)
				}
			}
		})
	}
}
