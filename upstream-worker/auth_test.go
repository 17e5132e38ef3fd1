package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// seenReq is one HTTP request an authUpstream received.
type seenReq struct {
	verb   string // HTTP method
	rpc    string // JSON-RPC method of a POSTed request ("" for a response or a GET)
	text   string // a tools/call's arguments.text
	auth   string // Authorization
	apiKey string // X-Api-Key
	answer bool   // a POSTed JSON-RPC response (to the upstream's request)
}

func (r seenReq) String() string {
	return r.verb + " " + r.rpc + " " + r.text + " auth=" + r.auth + " key=" + r.apiKey
}

// authUpstream is an MCP upstream over HTTP (streamable or legacy SSE)
// that records the credentials of every request and, when it requires a
// bearer token, refuses any other than those in users (401), binding a
// streamable session to the user of its token when that user is not ""
// (the go-sdk's behaviour: another user's request on it is refused 403).
type authUpstream struct {
	ts *httptest.Server
	mu sync.Mutex
	// reqs are the requests received, in order; users maps each accepted
	// token to its user. Both guarded by mu.
	reqs  []seenReq
	users map[string]string
}

func serveAuth(t *testing.T, kind string, require bool, users map[string]string) *authUpstream {
	t.Helper()
	a := &authUpstream{users: users}
	srv := newUpstream(0).srv
	get := func(*http.Request) *mcp.Server { return srv }
	var inner http.Handler = mcp.NewStreamableHTTPHandler(get, nil)
	if kind == "sse" {
		inner = mcp.NewSSEHandler(get, nil)
	}
	if require {
		verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			a.mu.Lock()
			user, ok := a.users[tok]
			a.mu.Unlock()
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
		}
		inner = auth.RequireBearerToken(verify, nil)(inner)
	}
	a.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sr := seenReq{verb: r.Method, auth: r.Header.Get("Authorization"), apiKey: r.Header.Get("X-Api-Key")}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string
				Params struct{ Arguments struct{ Text string } }
				Result json.RawMessage
			}
			if json.Unmarshal(body, &m) == nil {
				sr.rpc, sr.text, sr.answer = m.Method, m.Params.Arguments.Text, m.Method == "" && m.Result != nil
			}
		}
		a.mu.Lock()
		a.reqs = append(a.reqs, sr)
		a.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		a.ts.CloseClientConnections()
		a.ts.Close()
	})
	return a
}

func (a *authUpstream) seen() []seenReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seenReq(nil), a.reqs...)
}

func (a *authUpstream) setUsers(users map[string]string) {
	a.mu.Lock()
	a.users = users
	a.mu.Unlock()
}

// callOf returns the tools/call requests whose text is text.
func (a *authUpstream) callOf(text string) []seenReq {
	var out []seenReq
	for _, r := range a.seen() {
		if r.rpc == "tools/call" && r.text == text {
			out = append(out, r)
		}
	}
	return out
}

// callAuth sends the tools/call req to the worker as a router forwards
// it, with header proto.HdrAuthorization = authz when authz is not "".
func (e *env) callAuth(req proto.Request, authz string) *proto.Reply {
	e.t.Helper()
	data, err := proto.Marshal(&req)
	if err != nil {
		e.t.Fatal(err)
	}
	subj, err := proto.AppendWorkerSubject(nil, e.svc.cfg.ID, proto.OpToolsCall)
	if err != nil {
		e.t.Fatal(err)
	}
	m := &nats.Msg{Subject: string(subj), Data: data, Header: nats.Header{}}
	if authz != "" {
		m.Header.Set(proto.HdrAuthorization, authz)
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	resp, err := e.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		e.t.Fatalf("call: %v", err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(resp.Data, &r); err != nil {
		e.t.Fatal(err)
	}
	return &r
}

func authSpec(name, transport, url string, a *proto.UpstreamAuth) proto.UpstreamSpec {
	return proto.UpstreamSpec{Name: name, Transport: transport, URL: url, Auth: a}
}

func writeSecret(t *testing.T, path, v string) {
	t.Helper()
	// Written aside and renamed, as secret managers rotate files: a
	// reader never sees a half-written value.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerUpstreamAuthInjected: the bearer token and the static header
// go on every request of every session (pool, dedicated; initialize,
// lists, pings, calls), and a client's Authorization on a forwarded call
// never reaches an upstream that is not passthrough.
func TestWorkerUpstreamAuthInjected(t *testing.T) {
	for _, transport := range []string{proto.TransportStreamable, proto.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Setenv("SY_TEST_UPSTREAM_BEARER", "  worker-tok\n")
			keyFile := filepath.Join(t.TempDir(), "api-key")
			writeSecret(t, keyFile, "key-1")
			up := serveAuth(t, transport, true, map[string]string{"worker-tok": ""})
			e := startWorker(t, Config{}, authSpec("up", transport, up.ts.URL, &proto.UpstreamAuth{
				BearerEnv: "SY_TEST_UPSTREAM_BEARER",
				Headers:   []proto.HeaderSource{{Name: "X-Api-Key", File: keyFile}},
			}))
			e.waitUp("up")
			e.waitPings("up", 2)
			wantText(t, e.callAuth(toolCall("up", "echo", `{"text":"stateless"}`), "Bearer client-tok"), "stateless")
			dedicated := toolCall("up", "echo", `{"text":"dedicated"}`)
			dedicated.Session = "s1"
			wantText(t, e.callAuth(dedicated, "Bearer client-tok"), "dedicated")

			rpcs := map[string]bool{}
			for _, r := range up.seen() {
				rpcs[r.rpc] = true
				if r.auth != "Bearer worker-tok" || r.apiKey != "key-1" {
					t.Errorf("request without the injected credentials: %v", r)
				}
			}
			for _, m := range []string{"initialize", "tools/list", "tools/call"} {
				if !rpcs[m] {
					t.Errorf("no %s request seen (seen: %v)", m, rpcs)
				}
			}
			if len(up.callOf("stateless")) != 1 || len(up.callOf("dedicated")) != 1 {
				t.Errorf("calls seen: %v", up.seen())
			}
		})
	}
}

// TestWorkerUpstreamAuthPassthrough: on a passthrough upstream the
// client's Authorization replaces the injected one on its call's
// requests, while the worker's own requests keep the injected token; a
// dedicated session opens with its client's Authorization, so an upstream
// that binds sessions to users serves it.
func TestWorkerUpstreamAuthPassthrough(t *testing.T) {
	for _, transport := range []string{proto.TransportStreamable, proto.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Setenv("SY_TEST_UPSTREAM_BEARER", "worker-tok")
			// alice's and bob's tokens name users, and a streamable
			// session is bound to the user who opened it, so their
			// dedicated sessions must carry their tokens from initialize
			// on. The pool is shared: a stateless call's token can only
			// be one that binds no user (see docs/upstream-auth.md).
			up := serveAuth(t, transport, true, map[string]string{
				"worker-tok": "", "pool-alice": "", "alice-tok": "alice", "bob-tok": "bob",
			})
			e := startWorker(t, Config{}, authSpec("up", transport, up.ts.URL, &proto.UpstreamAuth{
				BearerEnv: "SY_TEST_UPSTREAM_BEARER", Passthrough: true,
			}))
			e.waitUp("up")
			e.waitPings("up", 2)

			wantText(t, e.callAuth(toolCall("up", "echo", `{"text":"pool"}`), "Bearer pool-alice"), "pool")
			wantText(t, e.callAuth(toolCall("up", "echo", `{"text":"pool-anon"}`), ""), "pool-anon")
			for _, who := range []string{"alice", "bob"} {
				req := toolCall("up", "echo", `{"text":"`+who+`"}`)
				req.Session = "s-" + who
				wantText(t, e.callAuth(req, "Bearer "+who+"-tok"), who)
				wantText(t, e.callAuth(req, "Bearer "+who+"-tok"), who)
			}

			want := map[string]string{
				"pool": "Bearer pool-alice", "pool-anon": "Bearer worker-tok",
				"alice": "Bearer alice-tok", "bob": "Bearer bob-tok",
			}
			for text, auth := range want {
				calls := up.callOf(text)
				if len(calls) == 0 {
					t.Errorf("call %q not seen", text)
				}
				for _, r := range calls {
					if r.auth != auth {
						t.Errorf("call %q carried %q, want %q", text, r.auth, auth)
					}
				}
			}
			// The worker's own requests: the pool's carry the injected
			// token; a dedicated session's initialize its client's.
			inits := map[string]int{}
			for _, r := range up.seen() {
				switch {
				case r.rpc == "tools/list" && r.auth != "Bearer worker-tok":
					t.Errorf("a catalog request carried %q", r.auth)
				case r.rpc == "initialize":
					inits[r.auth]++
				}
			}
			for _, auth := range []string{"Bearer worker-tok", "Bearer alice-tok", "Bearer bob-tok"} {
				if inits[auth] == 0 {
					t.Errorf("no session opened with %q (initializes: %v)", auth, inits)
				}
			}
			if inits["Bearer pool-alice"] > 0 {
				t.Errorf("a session was opened with a stateless call's token: %v", inits)
			}
		})
	}
}

// TestWorkerUpstreamAuthPassthroughRelay: the client's answer to the
// upstream's request during its call (an elicitation, relayed through the
// edge) goes upstream with the call's credentials.
func TestWorkerUpstreamAuthPassthroughRelay(t *testing.T) {
	t.Setenv("SY_TEST_UPSTREAM_BEARER", "worker-tok")
	up := serveAuth(t, proto.TransportStreamable, true, map[string]string{"worker-tok": "", "client-tok": ""})
	e := startWorker(t, Config{}, authSpec("up", proto.TransportStreamable, up.ts.URL, &proto.UpstreamAuth{
		BearerEnv: "SY_TEST_UPSTREAM_BEARER", Passthrough: true,
	}))
	e.waitUp("up")
	req := toolCall("up", "chatty", `{}`)
	req.ID, req.ClientCaps = 7, []byte(`{"elicitation":{}}`)
	r, _ := e.edgeCallHeader(t.Context(), proto.OpToolsCall, req, nats.Header{proto.HdrAuthorization: {"Bearer client-tok"}},
		elicited(map[string]string{"name": "ada"}), nil)
	if r.Error != nil || !strings.Contains(string(r.Result), "name=ada") {
		t.Fatalf("reply %s %v", r.Result, r.Error)
	}
	answers := 0
	for _, sr := range up.seen() {
		if sr.answer {
			answers++
			if sr.auth != "Bearer client-tok" {
				t.Errorf("the client's answer went upstream with %q", sr.auth)
			}
		}
	}
	if answers == 0 {
		t.Fatalf("no answer seen: %v", up.seen())
	}
}

// TestWorkerUpstreamAuthRotation: a bearer file rewritten while the
// worker runs is read when the pool reconnects (here because the upstream
// stopped accepting the old token), without a restart.
func TestWorkerUpstreamAuthRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	writeSecret(t, file, "tok-1")
	up := serveAuth(t, proto.TransportStreamable, true, map[string]string{"tok-1": ""})
	e := startWorker(t, Config{}, authSpec("up", proto.TransportStreamable, up.ts.URL, &proto.UpstreamAuth{BearerFile: file}))
	e.waitUp("up")
	wantText(t, e.callAuth(toolCall("up", "echo", `{"text":"before"}`), ""), "before")

	writeSecret(t, file, "tok-2")
	up.setUsers(map[string]string{"tok-2": ""})
	// The next ping is refused, the upstream goes down and reconnects
	// with the new file; calls meanwhile fail unavailable.
	eventually(t, 20*time.Second, "a call with the rotated token", func() bool {
		return e.callAuth(toolCall("up", "echo", `{"text":"after"}`), "").Error == nil
	})
	for _, r := range up.callOf("after") {
		if r.auth != "Bearer tok-2" && r.auth != "Bearer tok-1" {
			t.Errorf("call carried %q", r.auth)
		}
	}
	if last := up.callOf("after"); last[len(last)-1].auth != "Bearer tok-2" {
		t.Errorf("the answered call carried %q, want the rotated token", last[len(last)-1].auth)
	}
}

// TestWorkerUpstreamAuthMissing: a variable or file that is missing keeps
// the upstream down with an error naming it (never a value), without a
// single request sent without credentials; once the variable is set the
// upstream comes up without a restart.
func TestWorkerUpstreamAuthMissing(t *testing.T) {
	t.Setenv("SY_TEST_UPSTREAM_MISSING", "")
	badFile := filepath.Join(t.TempDir(), "bad-value")
	if err := os.WriteFile(badFile, []byte("leaky\x01secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(t.TempDir(), "absent")
	up := serveAuth(t, proto.TransportStreamable, false, nil)
	e := startWorker(t, Config{},
		authSpec("env", proto.TransportStreamable, up.ts.URL, &proto.UpstreamAuth{BearerEnv: "SY_TEST_UPSTREAM_MISSING"}),
		authSpec("file", proto.TransportStreamable, up.ts.URL, &proto.UpstreamAuth{
			Headers: []proto.HeaderSource{{Name: "X-Api-Key", File: absent}, {Name: "X-Other", File: badFile}},
		}),
	)
	wantDown := func(name string, mention ...string) {
		t.Helper()
		var st proto.UpstreamState
		eventually(t, 10*time.Second, name+" reported down with its error", func() bool {
			var ok bool
			st, ok = e.state(name)
			return ok && !st.Up && strings.Contains(st.Err, "credentials")
		})
		for _, m := range mention {
			if !strings.Contains(st.Err, m) {
				t.Errorf("%s: error %q does not mention %q", name, st.Err, m)
			}
		}
		if strings.Contains(st.Err, "leaky") || strings.Contains(st.Err, "secret") {
			t.Errorf("%s: error %q shows a value", name, st.Err)
		}
	}
	wantDown("env", "SY_TEST_UPSTREAM_MISSING")
	wantDown("file", absent, badFile)
	// The client is told why, not which variable: that is the worker's.
	r := e.callAuth(toolCall("env", "echo", `{"text":"x"}`), "")
	wantError(t, r, proto.CodeUpstreamUnavailable, "credentials are missing or invalid")
	if strings.Contains(r.Error.Msg, "SY_TEST_UPSTREAM_MISSING") {
		t.Errorf("client error %q names the worker's variable", r.Error.Msg)
	}
	if n := len(up.seen()); n != 0 {
		t.Fatalf("%d requests reached the upstream without their credentials: %v", n, up.seen())
	}

	t.Setenv("SY_TEST_UPSTREAM_MISSING", "late-tok")
	e.waitUp("env")
	wantText(t, e.callAuth(toolCall("env", "echo", `{"text":"late"}`), ""), "late")
	if c := up.callOf("late"); len(c) != 1 || c[0].auth != "Bearer late-tok" {
		t.Errorf("call seen as %v", c)
	}
}
