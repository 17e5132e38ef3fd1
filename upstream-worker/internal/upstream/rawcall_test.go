package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// jsonEqual reports whether a and b are the same JSON value (numbers
// compared as written).
func jsonEqual(a, b []byte) bool {
	va, ea := decodeAny(a)
	vb, eb := decodeAny(b)
	return ea == nil && eb == nil && reflect.DeepEqual(va, vb)
}

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func isGatewayCode(c int32) bool {
	return slices.Contains(proto.GatewayCodes, c) || c == proto.CodeInternal
}

// sameOutcome fails unless the raw and the SDK path gave the same answer:
// equal result JSON, or the same upstream error (code, message, data), or
// the same gateway error code.
func sameOutcome(t *testing.T, what string, rawRes []byte, rawErr *proto.Error, sdkRes []byte, sdkErr *proto.Error) {
	t.Helper()
	switch {
	case (rawErr == nil) != (sdkErr == nil):
		t.Errorf("%s: raw (%.120s, %v) vs sdk (%.120s, %v)", what, rawRes, rawErr, sdkRes, sdkErr)
	case rawErr != nil:
		if rawErr.Code != sdkErr.Code {
			t.Errorf("%s: raw error %v, sdk error %v", what, rawErr, sdkErr)
		} else if !isGatewayCode(rawErr.Code) && (rawErr.Msg != sdkErr.Msg || !bytes.Equal(rawErr.Data, sdkErr.Data)) {
			t.Errorf("%s: raw error %v %s, sdk error %v %s", what, rawErr, rawErr.Data, sdkErr, sdkErr.Data)
		}
	case !jsonEqual(rawRes, sdkRes):
		t.Errorf("%s: results differ\nraw %.300s\nsdk %.300s", what, rawRes, sdkRes)
	}
}

// paramHeaderTools are the test tools with x-mcp-header parameters.
var paramHeaderTools = map[string]bool{"hdr": true, "test_x_mcp_header": true}

type equivCase struct {
	name, tool, params string
	kinds              []string // server kinds to run on; nil: all
}

// runEquivalence calls every case through a raw and an SDK upstream on the
// same server, on the pool session and on a dedicated one.
func runEquivalence(t *testing.T, kind, url, wantPool string, cases []equivCase) {
	raw := startUpstream(t, url, false, nil)
	sdk := startUpstream(t, url, true, nil)
	if v := poolVersion(t, raw); v != wantPool {
		t.Fatalf("raw pool negotiated %s, want %s", v, wantPool)
	}
	if v := poolVersion(t, sdk); v != wantPool {
		t.Fatalf("sdk pool negotiated %s, want %s", v, wantPool)
	}
	for _, c := range cases {
		if c.kinds != nil && !slices.Contains(c.kinds, kind) {
			continue
		}
		for _, session := range []string{"", "s1"} {
			if session != "" && wantPool == protocol2026 && paramHeaderTools[c.tool] {
				// Dedicated sessions of a stateless upstream speak
				// 2026-07-28 too, where the SDK client sends Mcp-Param
				// headers only for tools it listed on that session, which
				// the worker never does (the raw path takes them from the
				// catalog).
				continue
			}
			what := fmt.Sprintf("%s (session %q)", c.name, session)
			rr, re := raw.Call(t.Context(), call(c.tool, session, c.params))
			sr, se := sdk.Call(t.Context(), call(c.tool, session, c.params))
			sameOutcome(t, what, rr, re, sr, se)
			if re != nil && isGatewayCode(re.Code) {
				t.Errorf("%s: the call failed in the gateway: %v", what, re)
			}
			if c.tool == "hologram" && string(rr) != holoRaw {
				t.Errorf("%s: raw result %s, want the upstream's bytes %s", what, rr, holoRaw)
			}
			if c.tool == "big" && string(rr) != bigRaw {
				t.Errorf("%s: big result of %d bytes differs", what, len(rr))
			}
		}
	}
}

// TestUpstreamRawEquivalence: the raw path and the SDK path answer the
// same calls the same way, on stateful (2025-11-25) and stateless
// (2026-07-28) go-sdk servers.
func TestUpstreamRawEquivalence(t *testing.T) {
	cases := append(sharedEquivCases(), []equivCase{
		{name: "param headers", tool: "hdr", params: `{"arguments":{"region":"zürich","n":42,"deep":{"flag":true}}}`},
		{name: "param headers absent", tool: "hdr", params: `{"arguments":{"region":null,"n":1.5}}`},
		{name: "resumed stream", tool: "resume", params: `{}`, kinds: []string{"resumable"}},
	}...)
	for _, kind := range []string{"sse", "json", "stateless", "resumable"} {
		t.Run("server="+kind, func(t *testing.T) {
			want := legacyProtocol
			if kind == "stateless" {
				want = protocol2026
			}
			runEquivalence(t, kind, newTestServer(t, kind, nil).url(), want, cases)
		})
	}
}

// TestUpstreamRawEquivalenceEverything runs the go-sdk conformance server's
// tools through both paths: content types, logging and progress
// notifications in the stream, sampling (a server-to-client request the
// worker refuses), x-mcp-header parameters, errors with data.
func TestUpstreamRawEquivalenceEverything(t *testing.T) {
	cases := []equivCase{
		{name: "simple", tool: "test_simple_text", params: `{}`},
		{name: "image", tool: "test_image_content", params: `{}`},
		{name: "audio", tool: "test_audio_content", params: `{}`},
		{name: "embedded", tool: "test_embedded_resource", params: `{}`},
		{name: "multiple", tool: "test_multiple_content_types", params: `{}`},
		{name: "logging", tool: "test_tool_with_logging", params: `{}`},
		{name: "progress", tool: "test_tool_with_progress", params: `{"_meta":{"progressToken":"tok-1"}}`},
		{name: "error result", tool: "test_error_handling", params: `{}`},
		{name: "sampling", tool: "test_sampling", params: `{"arguments":{"prompt":"hi"}}`},
		{name: "elicitation", tool: "test_elicitation", params: `{"arguments":{"message":"m"}}`},
		{name: "x-mcp-header", tool: "test_x_mcp_header", params: `{"arguments":{"region":"eu-west","level":3}}`},
		{name: "x-mcp-header base64", tool: "test_x_mcp_header", params: `{"arguments":{"region":" zürich "}}`},
		{name: "missing capability", tool: "test_missing_capability", params: `{}`},
		{name: "schema 2020-12", tool: "json_schema_2020_12_tool", params: `{"arguments":{"name":"a","contactMethod":"phone","phone":"1"}}`},
		{name: "unknown tool", tool: "nope", params: `{}`},
	}
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			want := legacyProtocol
			if stateless {
				want = protocol2026
			}
			runEquivalence(t, "everything", startEverything(t, stateless), want, cases)
		})
	}
}

// toolCalls returns the tools/call POSTs recorded after from.
func toolCalls(s *testServer, from int) []*posted {
	var out []*posted
	for i, p := range s.recorded(func(*posted) bool { return true }) {
		if i >= from && p.msg.Method == "tools/call" {
			out = append(out, p)
		}
	}
	return out
}

func numPosts(s *testServer) int { return len(s.recorded(func(*posted) bool { return true })) }

// callRecorded makes one call and returns its tools/call POST.
func callRecorded(t *testing.T, s *testServer, u *Upstream, req *proto.Request) *posted {
	t.Helper()
	from := numPosts(s)
	if _, perr := u.Call(t.Context(), req); perr != nil {
		t.Fatalf("call %s: %v", req.Name, perr)
	}
	got := toolCalls(s, from)
	if len(got) != 1 {
		t.Fatalf("call %s: %d tools/call POSTs, want 1", req.Name, len(got))
	}
	return got[0]
}

var rawID = regexp.MustCompile(`^"sy-[0-9]+"$`)

// ignoredHeaders are set by net/http, not by the MCP client.
var ignoredHeaders = map[string]bool{"Content-Length": true, "User-Agent": true, "Accept-Encoding": true}

// TestUpstreamRawWire: the raw path's request is the SDK's: the same
// headers (session id, protocol version, and on 2026 Mcp-Method, Mcp-Name,
// Mcp-Param-*) and the same params, hop _meta keys dropped and the
// session's own added; it also keeps unknown params members byte for byte.
func TestUpstreamRawWire(t *testing.T) {
	const metaParams = `{"name":"up__meta","arguments":{},"x-extra":{"k":[1, 2]},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2099-01-01",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},` +
		`"io.modelcontextprotocol/subscriptionId":3,"progressToken":7,"custom":{"n":1}}}`
	const hdrParams = `{"arguments":{"region":"zürich","n":42,"deep":{"flag":true}}}`
	for _, kind := range []string{"sse", "stateless"} {
		t.Run("server="+kind, func(t *testing.T) {
			s := newTestServer(t, kind, nil)
			raw := startUpstream(t, s.url(), false, nil)
			sdk := startUpstream(t, s.url(), true, nil)
			for _, session := range []string{"", "s1"} {
				for _, c := range []struct{ tool, params string }{{"meta", metaParams}, {"hdr", hdrParams}} {
					if session != "" && kind == "stateless" && paramHeaderTools[c.tool] {
						continue // see runEquivalence
					}
					what := fmt.Sprintf("%s session %q", c.tool, session)
					rp := callRecorded(t, s, raw, call(c.tool, session, c.params))
					sp := callRecorded(t, s, sdk, call(c.tool, session, c.params))
					if !rawID.Match(rp.msg.ID) {
						t.Errorf("%s: raw request id %s, want \"sy-<n>\"", what, rp.msg.ID)
					}
					if sp.raw() {
						t.Fatalf("%s: the SDK path sent a raw id", what)
					}
					for k := range mergeKeys(rp.header, sp.header) {
						if k == "Mcp-Session-Id" { // different sessions: compare presence
							if (rp.header.Get(k) == "") != (sp.header.Get(k) == "") {
								t.Errorf("%s: Mcp-Session-Id: raw %q, sdk %q", what, rp.header[k], sp.header[k])
							}
							continue
						}
						if !ignoredHeaders[k] && !slices.Equal(rp.header[k], sp.header[k]) {
							t.Errorf("%s: header %s: raw %q, sdk %q", what, k, rp.header[k], sp.header[k])
						}
					}
					// The session's headers.
					l := raw.pool
					if session != "" {
						l, _ = raw.dedicatedFor("e1", session, nil)
					}
					ss := l.current()
					version := ss.cs.InitializeResult().ProtocolVersion
					if got := rp.header.Get("Mcp-Session-Id"); got != ss.cs.ID() || (kind == "sse") != (got != "") {
						t.Errorf("%s: Mcp-Session-Id %q, session %q", what, got, ss.cs.ID())
					}
					if got := rp.header.Get("Mcp-Protocol-Version"); got != version {
						t.Errorf("%s: Mcp-Protocol-Version %q, negotiated %q", what, got, version)
					}
					if rp.header.Get("Content-Type") != "application/json" || rp.header.Get("Accept") != "application/json, text/event-stream" {
						t.Errorf("%s: content headers %v", what, rp.header)
					}
					is2026 := version >= protocol2026
					if is2026 != (kind == "stateless") { // dedicated sessions too: the server keeps no 2025 sessions
						t.Fatalf("%s: negotiated %s", what, version)
					}
					if got := rp.header.Get("Mcp-Method") + " " + rp.header.Get("Mcp-Name"); is2026 && got != "tools/call "+c.tool || !is2026 && got != " " {
						t.Errorf("%s: Mcp-Method and Mcp-Name %q", what, got)
					}
					if c.tool == "hdr" && is2026 {
						want := map[string]string{"Mcp-Param-Region": "=?base64?esO8cmljaA==?=", "Mcp-Param-N": "42", "Mcp-Param-Flag": "true"}
						for k, v := range want {
							if got := rp.header.Get(k); got != v {
								t.Errorf("%s: %s = %q, want %q", what, k, got, v)
							}
						}
					}
					// The params: the SDK's, plus the unknown member.
					var rparams, sparams map[string]json.RawMessage
					if err := json.Unmarshal(rp.msg.Params, &rparams); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(sp.msg.Params, &sparams); err != nil {
						t.Fatal(err)
					}
					if c.tool == "meta" {
						if string(rparams["x-extra"]) != `{"k":[1, 2]}` {
							t.Errorf("%s: unknown member forwarded as %s", what, rparams["x-extra"])
						}
						delete(rparams, "x-extra")
						var meta map[string]json.RawMessage
						_ = json.Unmarshal(rparams["_meta"], &meta)
						if string(meta["custom"]) != `{"n":1}` || string(meta["progressToken"]) != `7` {
							t.Errorf("%s: client _meta not forwarded: %s", what, rparams["_meta"])
						}
						if _, ok := meta[mcp.MetaKeySubscriptionID]; ok {
							t.Errorf("%s: hop _meta key forwarded: %s", what, rparams["_meta"])
						}
						wantPV := ""
						if is2026 {
							wantPV = `"` + version + `"`
						}
						if string(meta[mcp.MetaKeyProtocolVersion]) != wantPV {
							t.Errorf("%s: _meta protocolVersion %s, want %s", what, meta[mcp.MetaKeyProtocolVersion], wantPV)
						}
					}
					b1, _ := json.Marshal(rparams)
					b2, _ := json.Marshal(sparams)
					if !jsonEqual(b1, b2) {
						t.Errorf("%s: params differ\nraw %s\nsdk %s", what, rp.msg.Params, sp.msg.Params)
					}
				}
			}
		})
	}
}

func mergeKeys(a, b http.Header) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// scripted is an upstream whose "scripted" tool answers with an SSE stream
// holding a notification and server-to-client requests before the result;
// it sends the result once the test has seen every answer (seen).
type scripted struct {
	answers chan *posted  // to the test: each answer POSTed
	seen    chan struct{} // from the test: one answer checked
}

var scriptedRequests = []string{
	`{"jsonrpc":"2.0","id":"srv-ping","method":"ping"}`,
	`{"jsonrpc":"2.0","id":101,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`,
	`{"jsonrpc":"2.0","id":102,"method":"roots/list"}`,
	`{"jsonrpc":"2.0","id":103,"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}}`,
	`{"jsonrpc":"2.0","id":104,"method":"x/unknown","params":{}}`,
}

// scriptedAnswers is what the SDK client, configured as the worker's,
// answers, by request id.
var scriptedAnswers = map[string]string{
	`"srv-ping"`: `{"result":{}}`,
	`101`:        `{"error":{"code":-31001,"message":"client does not support CreateMessage"}}`,
	`102`:        `{"result":{"roots":[]}}`,
	`103`:        `{"error":{"code":-32602,"message":"client does not support elicitation"}}`,
	`104`:        `{"error":{"code":-32601,"message":"method not found: \"x/unknown\""}}`,
}

func (sc *scripted) intercept(w http.ResponseWriter, r *http.Request, p *posted) bool {
	if p.msg.Method == "" && p.msg.ID != nil {
		if _, ok := scriptedAnswers[string(p.msg.ID)]; ok {
			sc.answers <- p
			w.WriteHeader(http.StatusAccepted)
			return true
		}
	}
	if p.toolName != "scripted" {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": a comment\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	for _, m := range scriptedRequests {
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
	}
	w.(http.Flusher).Flush()
	for range scriptedRequests {
		select {
		case <-r.Context().Done():
			return true
		case <-sc.seen:
		}
	}
	fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n", p.msg.ID)
	return true
}

// TestUpstreamRawServerRequests: server-to-client requests in a call's
// response stream are answered as the SDK client answers them, a
// notification is skipped, and the result arrives.
func TestUpstreamRawServerRequests(t *testing.T) {
	sc := &scripted{answers: make(chan *posted, 16), seen: make(chan struct{}, 16)}
	s := newTestServer(t, "sse", sc.intercept)
	got := map[bool]map[string]string{}
	for _, sdk := range []bool{false, true} {
		u := startUpstream(t, s.url(), sdk, nil)
		done := make(chan struct{})
		var res []byte
		var perr *proto.Error
		go func() {
			defer close(done)
			res, perr = u.Call(t.Context(), call("scripted", "", `{}`))
		}()
		answers := map[string]string{}
		for range scriptedRequests {
			p := recv(t, sc.answers, "an answer to a server request")
			if p.header.Get("Mcp-Session-Id") == "" {
				t.Errorf("sdk=%v: answer without a session id", sdk)
			}
			var a struct {
				Result json.RawMessage `json:"result,omitempty"`
				Error  json.RawMessage `json:"error,omitempty"`
			}
			_ = json.Unmarshal(p.body, &a)
			b, _ := json.Marshal(a)
			answers[string(p.msg.ID)] = string(b)
			sc.seen <- struct{}{}
		}
		<-done
		if perr != nil || !jsonEqual(res, []byte(`{"content":[{"type":"text","text":"done"}]}`)) {
			t.Fatalf("sdk=%v: call returned %s, %v", sdk, res, perr)
		}
		got[sdk] = answers
	}
	for id, want := range scriptedAnswers {
		if !jsonEqual([]byte(got[true][id]), []byte(want)) {
			t.Errorf("the SDK answered %s with %s; the test expects %s", id, got[true][id], want)
		}
		if !jsonEqual([]byte(got[false][id]), []byte(got[true][id])) {
			t.Errorf("request %s: raw answer %s, SDK answer %s", id, got[false][id], got[true][id])
		}
	}
}

// TestUpstreamRawResume: a response stream the server closes mid-call is
// resumed with a GET carrying Last-Event-ID, and the result arrives on it.
func TestUpstreamRawResume(t *testing.T) {
	s := newTestServer(t, "resumable", nil)
	u := startUpstream(t, s.url(), false, nil)
	for _, session := range []string{"", "s1"} {
		before := s.resumes.Load()
		res, perr := u.Call(t.Context(), call("resume", session, `{}`))
		if perr != nil || !jsonEqual(res, []byte(`{"content":[{"type":"text","text":"resumed"}]}`)) {
			t.Fatalf("session %q: %s %v", session, res, perr)
		}
		if s.resumes.Load() == before {
			t.Fatalf("session %q: the result came without a resumption", session)
		}
	}
}

// TestUpstreamRawSessionExpired: a 404 on a session with an id drops it; the
// call is retried once on a new session.
func TestUpstreamRawSessionExpired(t *testing.T) {
	s := newTestServer(t, "sse", nil)
	u := startUpstream(t, s.url(), false, nil)
	for _, session := range []string{"", "s1"} {
		if _, perr := u.Call(t.Context(), call("echo", session, `{"arguments":{"x":1}}`)); perr != nil {
			t.Fatal(perr)
		}
		before := s.inits.Load()
		s.expireAll()
		res, perr := u.Call(t.Context(), call("echo", session, `{"arguments":{"x":2}}`))
		if perr != nil || !strings.Contains(string(res), `\"x\":2`) {
			t.Fatalf("session %q: after expiry: %s, %v", session, res, perr)
		}
		if s.inits.Load() <= before {
			t.Errorf("session %q: no new upstream session after the 404", session)
		}
	}
}

// statusIntercept answers some tools itself with HTTP failures.
func statusIntercept(w http.ResponseWriter, r *http.Request, p *posted) bool {
	switch p.toolName {
	case "err500":
		http.Error(w, "boom", http.StatusInternalServerError)
	case "err503rpc":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32099,"message":"busy"}}`, p.msg.ID)
	case "err400rpc":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32099,"message":"nope","data":{"a":1}}}`, p.msg.ID)
	case "err403":
		http.Error(w, "forbidden", http.StatusForbidden)
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "hello")
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "not json")
	case "otherid":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":"other","result":{}}`)
	case "noresponse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
	case "malformed":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "this line has no colon\n\n")
	default:
		return false
	}
	return true
}

// TestUpstreamRawHTTPErrors: HTTP failures are classified as on the SDK
// path: a JSON-RPC error body (not a transient status) is the upstream's
// error; anything else is CodeUpstreamUnavailable.
func TestUpstreamRawHTTPErrors(t *testing.T) {
	s := newTestServer(t, "sse", statusIntercept)
	raw := startUpstream(t, s.url(), false, nil)
	sdk := startUpstream(t, s.url(), true, nil)
	// Both paths (cases that leave the SDK session usable).
	for _, tool := range []string{"err500", "err503rpc", "err400rpc", "err403", "text", "noresponse"} {
		rr, re := raw.Call(t.Context(), call(tool, "", `{}`))
		sr, se := sdk.Call(t.Context(), call(tool, "", `{}`))
		sameOutcome(t, tool, rr, re, sr, se)
	}
	want := map[string]int32{
		"err500": proto.CodeUpstreamUnavailable, "err503rpc": proto.CodeUpstreamUnavailable, "err400rpc": -32099,
		"err403": proto.CodeUpstreamUnavailable, "text": proto.CodeUpstreamUnavailable, "garbage": proto.CodeUpstreamUnavailable,
		"otherid": proto.CodeUpstreamUnavailable, "noresponse": proto.CodeUpstreamUnavailable, "malformed": proto.CodeUpstreamUnavailable,
	}
	for tool, code := range want {
		_, perr := raw.Call(t.Context(), call(tool, "", `{}`))
		if perr == nil || perr.Code != code {
			t.Errorf("%s: raw error %v, want code %d", tool, perr, code)
		}
		if tool == "err400rpc" && (perr.Msg != "nope" || string(perr.Data) != `{"a":1}`) {
			t.Errorf("%s: upstream error passed as %v %s", tool, perr, perr.Data)
		}
	}
	// The raw session survived all of it.
	if _, perr := raw.Call(t.Context(), call("echo", "", `{}`)); perr != nil {
		t.Fatalf("echo after errors: %v", perr)
	}
}

// TestUpstreamRawUnreachable: a refused connection is
// CodeUpstreamUnavailable, directly and through Call once the server is
// gone.
func TestUpstreamRawUnreachable(t *testing.T) {
	s := newTestServer(t, "sse", nil)
	u := startUpstream(t, s.url(), false, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rc := &rawConn{url: "http://" + addr + "/", hc: &http.Client{}, version: []string{legacyProtocol}, max: 1 << 20}
	p, perr := newRawParams(call("echo", "", `{}`))
	if perr != nil {
		t.Fatal(perr)
	}
	_, err = u.rawCall(t.Context(), rc, p, nil)
	if perr := u.callError(t.Context(), err, nil); perr.Code != proto.CodeUpstreamUnavailable {
		t.Fatalf("refused connection: %v", perr)
	}
	s.ts.CloseClientConnections()
	s.ts.Close()
	if _, perr := u.Call(t.Context(), call("echo", "s9", `{}`)); perr == nil || perr.Code != proto.CodeUpstreamUnavailable {
		t.Fatalf("call to a stopped server: %v", perr)
	}
}

// TestUpstreamRawCancel: a cancelled call returns at once and the upstream
// gets notifications/cancelled for the raw request id; a deadline gives
// CodeTimeout.
func TestUpstreamRawCancel(t *testing.T) {
	s := newTestServer(t, "sse", nil)
	u := startUpstream(t, s.url(), false, nil)
	for _, session := range []string{"", "s1"} {
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan *proto.Error, 1)
		from := numPosts(s)
		go func() {
			_, perr := u.Call(ctx, call("block", session, `{}`))
			errc <- perr
		}()
		recv(t, s.blocked, "the upstream to start the call")
		cancel()
		if perr := recv(t, errc, "the cancelled call"); perr == nil || perr.Code != proto.CodeInternal {
			t.Fatalf("cancelled call: %v", perr)
		}
		recv(t, s.cancelled, "the upstream handler to see the cancellation")
		calls := toolCalls(s, from)
		if len(calls) != 1 || !calls[0].raw() {
			t.Fatalf("%d tools/call POSTs", len(calls))
		}
		var note *posted
		eventually(t, 10*time.Second, "notifications/cancelled", func() bool {
			n := s.recorded(func(p *posted) bool { return p.msg.Method == "notifications/cancelled" })
			for _, p := range n {
				var cp struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				_ = json.Unmarshal(p.msg.Params, &cp)
				if bytes.Equal(cp.RequestID, calls[0].msg.ID) {
					note = p
				}
			}
			return note != nil
		})
		if !jsonEqual(note.msg.Params, []byte(`{"reason":"context canceled","requestId":`+string(calls[0].msg.ID)+`}`)) ||
			note.header.Get("Mcp-Session-Id") != calls[0].header.Get("Mcp-Session-Id") {
			t.Errorf("notification %s %v", note.body, note.header)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, perr := u.Call(ctx, call("block", "", `{}`)); perr == nil || perr.Code != proto.CodeTimeout {
		t.Fatalf("call past its deadline: %v", perr)
	}
	recv(t, s.cancelled, "the upstream handler to see the deadline")
}

// TestUpstreamRawTooLarge: a response message beyond MaxResultBytes fails
// the call naming the limit, and the session stays in use.
func TestUpstreamRawTooLarge(t *testing.T) {
	for _, kind := range []string{"sse", "json"} {
		t.Run("server="+kind, func(t *testing.T) {
			s := newTestServer(t, kind, nil)
			u := startUpstream(t, s.url(), false, func(o *Options) { o.MaxResultBytes = 256 << 10 })
			inits := s.inits.Load()
			_, perr := u.Call(t.Context(), call("big", "", `{}`))
			if perr == nil || perr.Code != proto.CodePayloadTooLarge || !strings.Contains(perr.Msg, "max_result_bytes (262144 bytes)") {
				t.Fatalf("big result: %v", perr)
			}
			if _, perr := u.Call(t.Context(), call("echo", "", `{}`)); perr != nil {
				t.Fatalf("echo after: %v", perr)
			}
			if s.inits.Load() != inits {
				t.Errorf("the session was reopened")
			}
		})
	}
}

func TestUpstreamRawParams(t *testing.T) {
	cases := []struct {
		name, params string
		reqName      string
		want         string // the params object the upstream gets; "" for an error
	}{
		{"name replaced, arguments default", `{"name":"gw__t"}`, "t", `{"name":"t","arguments":{}}`},
		{"empty", ``, "t", `{"name":"t","arguments":{}}`},
		{"null", `null`, "t", `{"name":"t","arguments":{}}`},
		{"null arguments", `{"arguments":null}`, "t", `{"name":"t","arguments":{}}`},
		{"name from params", `{"name":"x<y"}`, "", `{"name":"x<y","arguments":{}}`},
		{"escaped keys", `{"na\u006de":"x","argument\u0073":{"a":1},"_m\u0065ta":{"io.modelcontextprotocol/logLev\u0065l":1,"k":2}}`, "",
			`{"_meta":{"k":2},"name":"x","arguments":{"a":1}}`},
		{"arguments raw", `{"arguments":{"n":1.000000000000000001,"s":"\u00e9"}}`, "t", `{"name":"t","arguments":{"n":1.000000000000000001,"s":"\u00e9"}}`},
		{"unknown members kept", `{"z":[1, 2],"a":"\u003c"}`, "t", `{"name":"t","arguments":{},"a":"\u003c","z":[1, 2]}`},
		{"empty multi-round members dropped", `{"inputResponses":{ },"requestState":""}`, "t", `{"name":"t","arguments":{}}`},
		{"null multi-round members dropped", `{"inputResponses":null,"requestState":null}`, "t", `{"name":"t","arguments":{}}`},
		{"multi-round members kept", `{"inputResponses":{"a":{"action":"accept"}},"requestState":"s"}`, "t",
			`{"name":"t","arguments":{},"inputResponses":{"a":{"action":"accept"}},"requestState":"s"}`},
		{"hop meta dropped", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/logLevel":"info"}}`, "t",
			`{"name":"t","arguments":{}}`},
		{"meta kept", `{"_meta":{"io.modelcontextprotocol/clientInfo":{},"progressToken":"p","x":{"big":12345678901234567890}}}`, "t",
			`{"_meta":{"progressToken":"p","x":{"big":12345678901234567890}},"name":"t","arguments":{}}`},
		{"not an object", `[1]`, "t", ""},
		{"bad name", `{"name":5}`, "t", ""},
		{"bad meta", `{"_meta":[]}`, "t", ""},
		{"bad requestState", `{"requestState":1}`, "t", ""},
		{"no name", `{}`, "", ""},
		{"bad JSON", `{"a":`, "t", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, perr := newRawParams(&proto.Request{Name: tc.reqName, Params: []byte(tc.params)})
			if tc.want == "" {
				if perr == nil || perr.Code != proto.CodeInvalidParams {
					t.Fatalf("error %v, want invalid params", perr)
				}
				return
			}
			if perr != nil {
				t.Fatal(perr)
			}
			req := p.appendRequest(nil, []byte(`"sy-1"`), nil)
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      string          `json:"id"`
				Method  string          `json:"method"`
				Params  json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(req, &m); err != nil || m.JSONRPC != "2.0" || m.ID != "sy-1" || m.Method != "tools/call" {
				t.Fatalf("request %s: %v", req, err)
			}
			if !jsonEqual(m.Params, []byte(tc.want)) {
				t.Fatalf("params %s\nwant   %s", m.Params, tc.want)
			}
			for _, raw := range []string{`[1, 2]`, `1.000000000000000001`, `12345678901234567890`} {
				if strings.Contains(tc.params, raw) && !strings.Contains(string(m.Params), raw) {
					t.Errorf("%s not kept byte for byte in %s", raw, m.Params)
				}
			}
		})
	}
	// A 2026 session's _meta members join the client's.
	p, _ := newRawParams(&proto.Request{Name: "t", Params: []byte(`{"_meta":{"c":1}}`)})
	req := p.appendRequest(nil, []byte(`"sy-2"`), []byte(`"k":2`))
	if !bytes.Contains(req, []byte(`"_meta":{"c":1,"k":2}`)) || !json.Valid(req) {
		t.Fatalf("request %s", req)
	}
}

func TestUpstreamRawSSEReader(t *testing.T) {
	type ev struct{ name, id, retry, data string }
	cases := []struct {
		name, in string
		want     []ev
		err      string // error after the events
	}{
		{"basic", "data: {\"a\":1}\n\n", []ev{{data: `{"a":1}`}}, ""},
		{"fields, comments, CRLF", ": hi\r\nevent: message\r\nid: 7\r\nretry: 10\r\ndata:  x \r\n\r\n", []ev{{"message", "7", "10", "x"}}, ""},
		{"multi-line data", "data: a\ndata:b\ndata: c\n\n", []ev{{data: "a\nb\nc"}}, ""},
		{"no final blank line", "data: z", []ev{{data: "z"}}, ""},
		{"empty events skipped", "\n\n: c\n\nid: 1\n\n", []ev{{id: "1"}}, ""},
		{"unknown field", "foo: bar\ndata: d\n\n", []ev{{data: "d"}}, ""},
		{"malformed", "data: a\n\nnocolon\n\n", []ev{{data: "a"}}, "malformed"},
		{"long line", "data: " + strings.Repeat("L", 3*sseReadBuffer) + "\ndata: tail\n\ndata: next\n\n",
			[]ev{{data: strings.Repeat("L", 3*sseReadBuffer) + "\ntail"}, {data: "next"}}, ""},
		{"too large", "data: " + strings.Repeat("x", 1000) + "\n\n", nil, "max_result_bytes"},
		{"too large across lines", strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 10) + "\n", nil, "max_result_bytes"},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/onebyte=%v", tc.name, oneByte), func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.in)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				max := 1 << 20
				if strings.HasPrefix(tc.name, "too large") {
					max = 900
				}
				sr := sseReader{r: bufio.NewReaderSize(r, sseReadBuffer), max: max}
				var got []ev
				var err error
				for {
					var e sseEvent
					if e, err = sr.next(); err != nil {
						break
					}
					got = append(got, ev{e.name, e.id, e.retry, string(e.data)})
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("events %q\nwant   %q", got, tc.want)
				}
				if tc.err == "" && err != io.EOF || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
			})
		}
	}
}

func TestUpstreamRawMessage(t *testing.T) {
	var m rpcMsg
	in := []byte(`{"jsonrpc":"2.0","id":"sy-1","result":null}`)
	if err := m.decode(in); err != nil || !m.isResponse() || string(m.ID) != `"sy-1"` {
		t.Fatalf("decode: %v %+v", err, m)
	}
	if res, err := m.outcome("tools/call"); err != nil || string(res) != "null" {
		t.Fatalf("null result: %s %v", res, err)
	}
	m = rpcMsg{}
	in = []byte(`{"jsonrpc":"2.0","id":3,"result":{"a": [1,2]}}`)
	if err := m.decode(in); err != nil {
		t.Fatal(err)
	}
	if res, _ := m.outcome("tools/call"); string(res) != `{"a": [1,2]}` || &res[0] != &in[bytes.IndexByte(in[1:], '{')+1] {
		t.Fatalf("result %s is not a slice of the message", res)
	}
	m = rpcMsg{}
	if err := m.decode([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":[1]}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.outcome("tools/call"); err == nil || upstreamError(err) == nil || upstreamError(err).Code != -32000 {
		t.Fatalf("error outcome %v", err)
	}
	m = rpcMsg{}
	if m.decode([]byte(`{"jsonrpc":"1.0","id":1,"result":{}}`)) == nil {
		t.Fatal("version 1.0 accepted")
	}
	m = rpcMsg{}
	if err := m.decode([]byte(`{"jsonrpc":"2.0","id":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.outcome("tools/call"); err == nil {
		t.Fatal("a response with neither result nor error succeeded")
	}
}

// TestUpstreamParamBindings: the catalog's tools map to their SEP-2243
// header bindings by name; a tool without annotations, or with invalid
// ones, has none (the encoding is package paramhdr's; TestUpstreamRawWire
// checks that the headers reach the upstream).
func TestUpstreamParamBindings(t *testing.T) {
	b := paramBindings([][]byte{
		[]byte(`{"name":"a","inputSchema":` + string(annotatedSchema) + `}`),
		[]byte(`{"name":"plain","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`),
		[]byte(`{"name":"dup","inputSchema":{"type":"object","properties":{"x":{"type":"string","x-mcp-header":"H"},"y":{"type":"string","x-mcp-header":"h"}}}}`),
	})
	var got []string
	for _, x := range b["a"] {
		got = append(got, strings.Join(x.Path, ".")+"="+x.Header)
	}
	slices.Sort(got)
	if want := []string{"deep.flag=Mcp-Param-Flag", "n=Mcp-Param-N", "region=Mcp-Param-Region"}; len(b) != 1 || !slices.Equal(got, want) {
		t.Fatalf("bindings %v: tool a %q, want %q", b, got, want)
	}
}

func TestUpstreamRawJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\`, "ctl\x00\x1f\n\r\t", "é\u2028<>&"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Errorf("%q encoded as %s (%v)", s, got, err)
		}
	}
}

// TestUpstreamRawTooLargeError checks the error's classification.
func TestUpstreamRawTooLargeError(t *testing.T) {
	u := New(Options{Spec: proto.UpstreamSpec{Name: "up", Transport: proto.TransportStreamable}, Tools: &memTools{}, Closer: NewCloser()})
	perr := u.callError(t.Context(), fmt.Errorf("x: %w", &tooLargeError{10}), nil)
	if perr.Code != proto.CodePayloadTooLarge || !strings.Contains(perr.Msg, "max_result_bytes (10 bytes)") {
		t.Fatalf("%v", perr)
	}
	if !errors.Is(fmt.Errorf("w: %w", errNoResponse), errNoResponse) {
		t.Fatal("errNoResponse does not unwrap")
	}
}

// TestRawCallReusesConnections: a call's context ends as soon as it
// returns (the worker cancels it), while the end of its SSE response may
// still be on the way; the connection must go back to the pool anyway, or
// every call dials a new one.
func TestRawCallReusesConnections(t *testing.T) {
	s := newTestServer(t, "sse", func(w http.ResponseWriter, r *http.Request, p *posted) bool {
		if p.msg.Method != "tools/call" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", p.msg.ID)
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond) // the stream ends a little after the answer
		return true
	})
	var dials atomic.Int32
	u := startUpstream(t, s.url(), false, func(o *Options) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		d := &net.Dialer{}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}
		o.HTTPClient = &http.Client{Transport: tr}
	})
	const calls = 30
	before := dials.Load()
	for i := range calls {
		ctx, cancel := context.WithCancel(t.Context())
		_, perr := u.Call(ctx, call("echo", "", `{"arguments":{"i":1}}`))
		cancel()
		if perr != nil {
			t.Fatalf("call %d: %v", i, perr)
		}
		time.Sleep(20 * time.Millisecond) // pacing: the stream has ended before the next call
	}
	if n := dials.Load() - before; n > calls/3 {
		t.Fatalf("%d sequential calls dialed %d connections", calls, n)
	}
}

func TestSameID(t *testing.T) {
	for _, tc := range []struct {
		got  string
		want bool
	}{{`"sy-1"`, true}, {`"sy\u002d1"`, true}, {`"sy-2"`, false}, {`1`, false}, {``, false}} {
		if sameID([]byte(tc.got), []byte(`"sy-1"`)) != tc.want {
			t.Errorf("sameID(%s) != %v", tc.got, tc.want)
		}
	}
}

// sharedEquivCases are the calls both raw paths (HTTP and stdio) must
// answer as the SDK path does.
func sharedEquivCases() []equivCase {
	return []equivCase{
		{name: "text", tool: "echo", params: `{"name":"up__echo","arguments":{"a":[1,2.50,"x"],"u":"\u00e9\u2028"}}`},
		{name: "no arguments", tool: "echo", params: `{"name":"up__echo"}`},
		{name: "no params", tool: "echo", params: ``},
		{name: "structured", tool: "structured", params: `{"arguments":{}}`},
		{name: "isError", tool: "fail", params: `{"arguments":null}`},
		{name: "unknown content type", tool: "hologram", params: `{}`},
		{name: "big", tool: "big", params: `{}`},
		{name: "upstream error", tool: "badparams", params: `{}`},
		{name: "unknown tool", tool: "nope", params: `{}`},
		{name: "meta", tool: "meta", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},` +
			`"progressToken":7,"custom":{"n":1}},"inputResponses":{},"requestState":""}`}, // a 2026-era client's logLevel goes only the raw way (TestUpstreamRequestWire)
		{name: "server requests", tool: "probe", params: `{}`},
	}
}

// TestRawConnNewRequest: the request built from the URL parsed once is the
// one http.NewRequestWithContext builds from the string, and each request
// has its own URL.
func TestRawConnNewRequest(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:8080/mcp",
		"https://example.com:/mcp?x=1",
		"http://[::1]:9/a/b",
		"http://user:pw@host.example/p%20q",
	} {
		t.Run(raw, func(t *testing.T) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"jsonrpc":"2.0"}`)
			want, err := http.NewRequestWithContext(t.Context(), http.MethodPost, raw, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			rc := &rawConn{url: raw, u: u}
			got, err := rc.newRequest(t.Context(), body)
			if err != nil {
				t.Fatal(err)
			}
			if got.URL.String() != want.URL.String() || got.Host != want.Host || got.Method != want.Method ||
				got.ContentLength != want.ContentLength || got.GetBody == nil || got.Context() != want.Context() {
				t.Fatalf("got %s %s host %q len %d, want %s %s host %q len %d",
					got.Method, got.URL, got.Host, got.ContentLength, want.Method, want.URL, want.Host, want.ContentLength)
			}
			if got.URL == u {
				t.Fatal("request shares the connection's parsed URL")
			}
			b, _ := io.ReadAll(got.Body)
			if !bytes.Equal(b, body) {
				t.Fatalf("body %q", b)
			}
		})
	}
}

// TestUpstreamRawSessionEnd: a raw call in flight on a dedicated session
// fails at once when that session is closed (its client session ended):
// the call's POST follows the session's lifetime, and the upstream sees
// the request go.
func TestUpstreamRawSessionEnd(t *testing.T) {
	started, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	s := newTestServer(t, "sse", func(w http.ResponseWriter, r *http.Request, p *posted) bool {
		if p.msg.Method != "tools/call" {
			return false
		}
		started <- struct{}{}
		<-r.Context().Done()
		gone <- struct{}{}
		return true
	})
	u := startUpstream(t, s.url(), false, nil)
	errc := make(chan *proto.Error, 1)
	go func() {
		_, perr := u.Call(t.Context(), call("echo", "s1", `{}`))
		errc <- perr
	}()
	recv(t, started, "the upstream to get the call")
	u.SessionClosed("e1", "s1")
	perr := recv(t, errc, "the call on the closed session")
	if perr == nil || perr.Code != proto.CodeUpstreamUnavailable || !strings.Contains(perr.Error(), "(cancelled") {
		t.Fatalf("the call on the closed session: %v", perr)
	}
	recv(t, gone, "the upstream to see the POST go")
}

// TestUpstreamStreamEndsMidCall: an HTTP upstream that closes one call's
// SSE response before answering fails only that call, with a clear error;
// the upstream session stays (no new initialize), and another call in
// flight on it completes.
func TestUpstreamStreamEndsMidCall(t *testing.T) {
	s := newTestServer(t, "sse", func(w http.ResponseWriter, r *http.Request, p *posted) bool {
		if p.toolName != "cut" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
		return true // the stream ends with no response
	})
	for _, path := range []string{"raw", "sdk"} {
		t.Run("path="+path, func(t *testing.T) { streamEndsMidCall(t, s, path == "sdk") })
	}
}

func streamEndsMidCall(t *testing.T, s *testServer, sdk bool) {
	u := startUpstream(t, s.url(), sdk, nil)
	for _, session := range []string{"", "client-1"} { // the pool, a dedicated session
		if _, perr := u.Call(t.Context(), call("echo", session, `{"arguments":{"text":"warm"}}`)); perr != nil {
			t.Fatalf("session %q: echo: %v", session, perr)
		}
		inits := s.inits.Load()
		blocked := make(chan *proto.Error, 1)
		bctx, bcancel := context.WithCancel(t.Context())
		go func() {
			_, perr := u.Call(bctx, call("block", session, `{}`))
			blocked <- perr
		}()
		recv(t, s.blocked, "the other call in flight")
		_, perr := u.Call(t.Context(), call("cut", session, `{}`))
		if perr == nil || perr.Code != proto.CodeUpstreamUnavailable || !strings.Contains(perr.Msg, "without answering it") {
			bcancel()
			t.Fatalf("session %q: cut: %v", session, perr)
		}
		time.Sleep(200 * time.Millisecond)
		select {
		case perr := <-blocked:
			t.Fatalf("session %q: the other call in flight ended with the cut one: %v", session, perr)
		default:
		}
		bcancel() // it was still running upstream: cancelled there
		recv(t, s.cancelled, "the other call's cancellation upstream")
		<-blocked
		if _, perr := u.Call(t.Context(), call("echo", session, `{"arguments":{"text":"after"}}`)); perr != nil {
			t.Fatalf("session %q: echo after: %v", session, perr)
		}
		if n := s.inits.Load(); n != inits {
			t.Errorf("session %q: %d new initializes: the upstream session was dropped", session, n-inits)
		}
	}
}
