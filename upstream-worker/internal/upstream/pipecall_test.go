package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/sandbox"
)

// The stdio test upstream is this test binary, re-executed with
// stdioEraEnv set (see TestMain): the test tools over stdio.
const (
	// stdioEraEnv selects the stdio server: "2026" serves server/discover
	// (2026-07-28), "2025" refuses it so the client falls back to
	// initialize (2025-11-25).
	stdioEraEnv = "SWITCHYARD_UPSTREAM_TEST_STDIO"
	// stdioLogEnv names a file the stdio server appends events to, one a
	// line: "block started", "block cancelled", "cancelled <requestId>".
	stdioLogEnv = "SWITCHYARD_UPSTREAM_TEST_STDIO_LOG"
)

func TestMain(m *testing.M) {
	if era := os.Getenv(stdioEraEnv); era != "" {
		serveStdio(era, os.Getenv(stdioLogEnv))
		return
	}
	if mode := os.Getenv(procModeEnv); mode != "" {
		runTestProc(mode)
		return
	}
	code := m.Run()
	bins.Cleanup()
	os.Exit(code)
}

func serveStdio(era, logPath string) {
	var mu sync.Mutex
	note := func(line string) {
		if logPath == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintln(f, line)
		f.Close()
	}
	s := &testServer{blocked: make(chan struct{}, 16), cancelled: make(chan struct{}, 16), onEvent: note}
	srv := newToolServer(s)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "server/discover":
				if era == "2025" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no discover here"}
				}
			case "notifications/cancelled":
				if p, ok := req.GetParams().(*mcp.CancelledParams); ok {
					note(fmt.Sprintf("cancelled %v", p.RequestID))
				}
			}
			return next(ctx, method, req)
		}
	})
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "exit", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		note("block started")
		<-ctx.Done()
		note("block cancelled")
		return nil, ctx.Err()
	})
	// Tools that misbehave on stdout the way real servers do: a banner
	// or a JSON log line between messages (each one write, shorter than
	// a pipe's atomic write, so the SDK's messages stay whole), and a
	// result of the size asked for.
	srv.AddTool(&mcp.Tool{Name: "chatty", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, _ = os.Stdout.WriteString("Server running on stdio\n")
		_, _ = os.Stdout.WriteString(`{"level":"info","msg":"tool called"}` + "\n")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "chatted"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "huge", InputSchema: obj}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Bytes int `json:"bytes"`
		}
		_ = json.Unmarshal(r.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", args.Bytes)}}}, nil
	})
	// openfiles opens files until it cannot, then exits saying why, as a
	// server that meets its open-file limit does.
	srv.AddTool(&mcp.Tool{Name: "openfiles", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var keep []*os.File
		for range 100_000 {
			f, err := os.Open(os.DevNull)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fatal:", err)
				os.Exit(1)
			}
			keep = append(keep, f)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(keep), " files open")}}}, nil
	})
	// read returns a file's content, or the error reading it.
	srv.AddTool(&mcp.Tool{Name: "read", InputSchema: obj}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(r.Params.Arguments, &args)
		b, err := os.ReadFile(args.Path)
		if err != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "content: " + string(b)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "env", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil
	})
	// A child process's main: it lives until its stdin closes.
	_ = srv.Run(context.Background(), &mcp.StdioTransport{})
}

// startStdio runs an Upstream over one stdio test server of era ("2026"
// or "2025") and returns it with the server's event log. sdk forces the
// SDK call path.
func startStdio(tb testing.TB, era string, sdk bool) (*Upstream, string) {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), "server.log")
	u := startUpstream(tb, "", sdk, func(o *Options) {
		if era == "2026" {
			o.StdioVersion = "latest" // the process speaks 2026-07-28
		}
		o.Spec = proto.UpstreamSpec{
			Name: "up", Transport: proto.TransportStdio, Processes: 1,
			Command: []string{os.Args[0]},
			Env:     map[string]string{stdioEraEnv: era, stdioLogEnv: logPath, "GORACE": "atexit_sleep_ms=0"},
		}
	})
	return u, logPath
}

// stdioSession is the running process's session.
func stdioSession(tb testing.TB, u *Upstream) *session {
	tb.Helper()
	procs := u.snap.Load().procs
	if len(procs) != 1 {
		tb.Fatalf("%d processes", len(procs))
	}
	return procs[0]
}

func serverLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func (c *pipeConn) numPending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// TestUpstreamPipeEquivalence: on a stdio go-sdk server the raw path and
// the SDK path answer the same calls the same way, in both protocol eras;
// the raw path keeps the upstream's bytes.
func TestUpstreamPipeEquivalence(t *testing.T) {
	cases := sharedEquivCases()
	for _, era := range []struct{ name, want string }{{"2026", protocol2026}, {"2025", legacyProtocol}} {
		t.Run("era="+era.name, func(t *testing.T) {
			raw, _ := startStdio(t, era.name, false)
			sdk, _ := startStdio(t, era.name, true)
			for _, u := range []*Upstream{raw, sdk} {
				if v := stdioSession(t, u).cs.InitializeResult().ProtocolVersion; v != era.want {
					t.Fatalf("negotiated %s, want %s", v, era.want)
				}
			}
			if stdioSession(t, raw).pipe == nil || stdioSession(t, sdk).pipe != nil {
				t.Fatal("raw upstream without a pipe, or SDK upstream with one")
			}
			for _, c := range cases {
				rr, re := raw.Call(t.Context(), call(c.tool, "", c.params))
				sr, se := sdk.Call(t.Context(), call(c.tool, "", c.params))
				sameOutcome(t, c.name, rr, re, sr, se)
				if re != nil && isGatewayCode(re.Code) {
					t.Errorf("%s: the call failed in the gateway: %v", c.name, re)
				}
				switch c.tool {
				case "hologram":
					if string(rr) != holoRaw || string(sr) != holoRaw {
						t.Errorf("%s: raw %s, sdk %s, want the upstream's bytes %s", c.name, rr, sr, holoRaw)
					}
				case "big":
					if string(rr) != bigRaw {
						t.Errorf("%s: big result of %d bytes differs", c.name, len(rr))
					}
				case "badparams":
					if re == nil || re.Code != jsonrpc.CodeInvalidParams || re.Msg != "bad widget" || string(re.Data) != `{"field":"w"}` {
						t.Errorf("%s: raw error %+v", c.name, re)
					}
				case "meta":
					keys := `"keys":["custom","progressToken"]`
					if era.name == "2026" {
						keys = `"keys":["custom","io.modelcontextprotocol/clientCapabilities","io.modelcontextprotocol/clientInfo","io.modelcontextprotocol/protocolVersion","progressToken"]`
					}
					if !strings.Contains(string(rr), strings.ReplaceAll(keys, `"`, `\"`)) {
						t.Errorf("%s: raw result %s, want %s", c.name, rr, keys)
					}
				case "probe": // 2026 servers cannot send requests to the client
					if era.name == "2025" && !strings.Contains(string(rr), `roots: {\"roots\":[]}`) {
						t.Errorf("%s: roots/list not answered: %s", c.name, rr)
					}
				}
			}
			if n := stdioSession(t, raw).pipe.numPending(); n != 0 {
				t.Errorf("%d raw calls still pending", n)
			}
		})
	}
}

// TestUpstreamPipeInterleaved: raw calls run concurrently with the SDK's
// own traffic on the same process (tools/list, pings), and with the
// server's roots/list and sampling requests, which are answered whatever
// else is in flight: by the SDK when the probe is the only call on the
// process, else refused -32603 as belonging to no single call (a 2025-era
// session, since a 2026 server sends none).
func TestUpstreamPipeInterleaved(t *testing.T) {
	u, _ := startStdio(t, "2025", false)
	s := stdioSession(t, u)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				arg := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
				res, perr := u.Call(t.Context(), call("echo", "", `{"arguments":`+arg+`}`))
				if perr != nil {
					t.Errorf("echo %s: %v", arg, perr)
					return
				}
				if want := strings.ReplaceAll(arg, `"`, `\"`); !strings.Contains(string(res), want) {
					t.Errorf("echo %s answered %s", arg, res)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			res, perr := u.Call(t.Context(), call("probe", "", `{}`))
			text := string(res)
			answered := func(what, ok string) bool {
				return strings.Contains(text, what+": "+ok) || strings.Contains(text, what+" error: calling") && strings.Contains(text, "no client to ask")
			}
			if perr != nil || !strings.Contains(text, "ping: null") || !answered("roots", `{\"roots\":[]}`) || !strings.Contains(text, "sampling error") {
				t.Errorf("probe: %s, %v", res, perr)
				return
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			if err := s.cs.Ping(t.Context(), nil); err != nil {
				t.Errorf("ping: %v", err)
				return
			}
			if _, err := listTools(t.Context(), s.cs); err != nil {
				t.Errorf("tools/list: %v", err)
				return
			}
		}
	})
	wg.Wait()
	if n := s.pipe.numPending(); n != 0 {
		t.Errorf("%d raw calls still pending", n)
	}
}

// TestUpstreamPipeProcessExit: when the process exits mid-call every
// pending raw call fails at once as upstream-unavailable, as on the SDK
// path, and the connection keeps no pending call.
func TestUpstreamPipeProcessExit(t *testing.T) {
	for _, path := range []string{"raw", "sdk"} {
		t.Run("path="+path, func(t *testing.T) {
			u, log := startStdio(t, "2025", path == "sdk")
			s := stdioSession(t, u)
			blocked := make(chan *proto.Error, 1)
			go func() {
				_, perr := u.Call(t.Context(), call("hang", "", `{}`))
				blocked <- perr
			}()
			eventually(t, 15*time.Second, "hang call started", func() bool { return strings.Contains(serverLog(log), "block started") })
			_, perr := u.Call(t.Context(), call("exit", "", `{}`))
			if perr == nil || perr.Code != proto.CodeUpstreamUnavailable {
				t.Fatalf("exit call: %v, want code %d", perr, proto.CodeUpstreamUnavailable)
			}
			if perr := recv(t, blocked, "the pending call's failure"); perr == nil || perr.Code != proto.CodeUpstreamUnavailable {
				t.Fatalf("pending call: %v, want code %d", perr, proto.CodeUpstreamUnavailable)
			}
			t.Logf("%s: %v", path, perr)
			if s.pipe != nil {
				if n := s.pipe.numPending(); n != 0 {
					t.Errorf("%d raw calls still pending", n)
				}
				// A call on the dead connection fails at once.
				rp, _ := newRawParams(call("echo", "", `{}`))
				if _, err := u.pipeCall(t.Context(), s.pipe, rp); err == nil {
					t.Error("call on the dead connection succeeded")
				}
			}
			// Supervision restarts the process.
			eventually(t, 15*time.Second, "a new process", func() bool {
				p := u.snap.Load().procs
				return u.State().Up && len(p) == 1 && p[0] != s
			})
			if _, perr := u.Call(t.Context(), call("echo", "", `{}`)); perr != nil {
				t.Fatalf("call after restart: %v", perr)
			}
		})
	}
}

// TestUpstreamStdioMisbehaves: a stdio server that prints lines that are
// not messages (a banner, a JSON log line) keeps its process: the lines
// are skipped and counted; a result over max_message_bytes fails only its
// call, -32065, and the process, and the other calls on it, go on. On the
// raw path and the SDK path.
func TestUpstreamStdioMisbehaves(t *testing.T) {
	for _, path := range []string{"raw", "sdk"} {
		t.Run("path="+path, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "server.log")
			u := startUpstream(t, "", path == "sdk", func(o *Options) {
				o.Spec = proto.UpstreamSpec{
					Name: "up", Transport: proto.TransportStdio, Processes: 1, MaxMessageBytes: 1 << 20,
					Command: []string{os.Args[0]},
					Env:     map[string]string{stdioEraEnv: "2025", stdioLogEnv: logPath, "GORACE": "atexit_sleep_ms=0"},
				}
			})
			s := stdioSession(t, u)
			restarts := u.Restarts()
			blocked := make(chan *proto.Error, 1)
			hctx, hcancel := context.WithCancel(t.Context())
			defer hcancel()
			go func() {
				_, perr := u.Call(hctx, call("hang", "", `{}`))
				blocked <- perr
			}()
			eventually(t, 15*time.Second, "hang call started", func() bool { return strings.Contains(serverLog(logPath), "block started") })
			for range 3 {
				res, perr := u.Call(t.Context(), call("chatty", "", `{}`))
				if perr != nil || !strings.Contains(string(res), "chatted") {
					t.Fatalf("chatty: %s %v", res, perr)
				}
			}
			eventually(t, 5*time.Second, "the lines counted", func() bool {
				return u.Skipped(skipNotJSON) == 3 && u.Skipped(skipInvalid) == 3
			})
			_, perr := u.Call(t.Context(), call("huge", "", `{"arguments":{"bytes":2097152}}`))
			if perr == nil || perr.Code != proto.CodePayloadTooLarge || !strings.Contains(perr.Msg, "response of more than 1048576 bytes") {
				t.Fatalf("huge: %v, want code %d naming the limit", perr, proto.CodePayloadTooLarge)
			}
			if u.Skipped(skipTooLarge) != 1 {
				t.Errorf("too large counted %d", u.Skipped(skipTooLarge))
			}
			if res, perr := u.Call(t.Context(), call("huge", "", `{"arguments":{"bytes":1000}}`)); perr != nil || len(res) < 1000 {
				t.Fatalf("a result under the limit: %d bytes, %v", len(res), perr)
			}
			select {
			case perr := <-blocked:
				t.Fatalf("the other call in flight ended: %v", perr)
			default:
			}
			if p := u.snap.Load().procs; len(p) != 1 || p[0] != s || u.Restarts() != restarts {
				t.Fatalf("the process was replaced (%d restarts)", u.Restarts()-restarts)
			}
		})
	}
}

// TestStdioEnvironmentScrubbed: a stdio server gets the base variables
// programs need, the worker's variables its inherit_env names, and its own
// env, never the rest of the worker's environment (another upstream's
// secret, here).
func TestStdioEnvironmentScrubbed(t *testing.T) {
	t.Setenv("OTHER_UPSTREAM_TOKEN", "s3cret-of-another-upstream")
	t.Setenv("LC_TIME", "C")
	t.Setenv("HTTPS_PROXY", "http://proxy.internal:3128")
	logPath := filepath.Join(t.TempDir(), "server.log")
	u := startUpstream(t, "", false, func(o *Options) {
		o.Spec = proto.UpstreamSpec{
			Name: "up", Transport: proto.TransportStdio, Processes: 1,
			Command:    []string{os.Args[0]},
			Env:        map[string]string{stdioEraEnv: "2025", stdioLogEnv: logPath, "GORACE": "atexit_sleep_ms=0"},
			InheritEnv: []string{"HTTPS_PROXY"},
		}
	})
	res, perr := u.Call(t.Context(), call("env", "", `{}`))
	if perr != nil {
		t.Fatal(perr)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", res, err)
	}
	env := "\n" + r.Content[0].Text + "\n"
	if strings.Contains(env, "s3cret-of-another-upstream") || strings.Contains(env, "OTHER_UPSTREAM_TOKEN") {
		t.Errorf("the worker's secret reached the stdio server: %q", env)
	}
	for _, want := range []string{"\n" + stdioEraEnv + "=2025\n", "\nPATH=", "\nLC_TIME=C\n", "\nHTTPS_PROXY=http://proxy.internal:3128\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the server's environment lacks %q: %q", want, env)
		}
	}
}

// TestUpstreamLogLevels: a 2026-07-28 request's logLevel reaches a
// 2025-era upstream as logging/setLevel; a shared session (a stdio
// process) is made more verbose by a client's logging/setLevel, never
// less (another client's would be cut off); a process started again gets
// the level back. Raw path and SDK path.
func TestUpstreamLogLevels(t *testing.T) {
	for _, path := range []string{"raw", "sdk"} {
		t.Run("path="+path, func(t *testing.T) {
			u, log := startStdio(t, "2025", path == "sdk")
			count := func(level string) int { return strings.Count(serverLog(log), "setLevel "+level+"\n") }
			req2026 := &proto.Request{Method: "tools/call", Upstream: "up", Name: "echo", Edge: "e1", Protocol: "2026-07-28",
				Params: []byte(`{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/logLevel":"info"}}`)}
			if _, perr := u.Call(t.Context(), req2026); perr != nil {
				t.Fatal(perr)
			}
			eventually(t, 5*time.Second, "setLevel info from a 2026 request", func() bool { return count("info") == 1 })
			setLevel := func(session, level string) {
				t.Helper()
				res, perr := u.Request(t.Context(), &proto.Request{Method: "logging/setLevel", Upstream: "up", Edge: "e1", Session: session,
					Params: []byte(`{"level":"` + level + `"}`)})
				if perr != nil || string(res) != "{}" {
					t.Fatalf("setLevel %s for %s: %s %v", level, session, res, perr)
				}
			}
			setLevel("a", "debug")
			eventually(t, 5*time.Second, "setLevel debug", func() bool { return count("debug") == 1 })
			setLevel("b", "error") // would silence a's debug messages
			req2026.Params = []byte(`{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/logLevel":"warning"}}`)
			if _, perr := u.Call(t.Context(), req2026); perr != nil {
				t.Fatal(perr)
			}
			time.Sleep(100 * time.Millisecond)
			if n, m := count("error"), count("warning"); n != 0 || m != 0 {
				t.Fatalf("a less verbose level reached the shared process: error %d, warning %d\n%s", n, m, serverLog(log))
			}
			// The process exits: the new one gets debug again.
			old := stdioSession(t, u)
			_, _ = u.Call(t.Context(), call("exit", "", `{}`))
			eventually(t, 15*time.Second, "a new process", func() bool {
				p := u.snap.Load().procs
				return u.State().Up && len(p) == 1 && p[0] != old
			})
			eventually(t, 5*time.Second, "setLevel debug on the new process", func() bool { return count("debug") == 2 })
		})
	}
}

// startSandboxed runs an Upstream over one 2025-era stdio test server in
// sandbox sb (through the launcher).
func startSandboxed(t *testing.T, sb *proto.Sandbox) (*Upstream, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "server.log")
	u := startUpstream(t, "", false, func(o *Options) {
		o.Spec = proto.UpstreamSpec{
			Name: "up", Transport: proto.TransportStdio, Processes: 1, Sandbox: sb,
			Command: []string{os.Args[0]},
			Env:     map[string]string{stdioEraEnv: "2025", stdioLogEnv: logPath, "GORACE": "atexit_sleep_ms=0"},
		}
	})
	return u, logPath
}

// TestStdioSandboxLimit: a stdio server that meets its sandbox's open-file
// limit and ends fails the call with an error naming the limit, and is
// restarted.
func TestStdioSandboxLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("rlimits through the launcher: Linux")
	}
	u, _ := startSandboxed(t, &proto.Sandbox{OpenFiles: 64})
	old := stdioSession(t, u)
	_, perr := u.Call(t.Context(), call("openfiles", "", `{}`))
	if perr == nil || perr.Code != proto.CodeUpstreamUnavailable || !strings.Contains(perr.Msg, "sandbox limit open_files (64)") {
		t.Fatalf("openfiles: %v, want the limit named", perr)
	}
	eventually(t, 15*time.Second, "a new process", func() bool {
		p := u.snap.Load().procs
		return u.State().Up && len(p) == 1 && p[0] != old
	})
	if _, perr := u.Call(t.Context(), call("echo", "", `{}`)); perr != nil {
		t.Fatalf("a call after the restart: %v", perr)
	}
}

// TestStdioSandboxLandlock: under Landlock rules a stdio server reads what
// they allow and nothing else (a file of another directory: permission
// denied), where the kernel has Landlock.
func TestStdioSandboxLandlock(t *testing.T) {
	if sandbox.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	allowed, denied := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(allowed, "ok.txt"), []byte("allowed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(denied, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := startSandboxed(t, &proto.Sandbox{
		ReadOnly: []string{"/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/sys", "/dev", filepath.Dir(os.Args[0]), allowed},
	})
	read := func(path string) string {
		t.Helper()
		res, perr := u.Call(t.Context(), call("read", "", `{"arguments":{"path":"`+path+`"}}`))
		if perr != nil {
			t.Fatalf("read %s: %v", path, perr)
		}
		return string(res)
	}
	if out := read(filepath.Join(allowed, "ok.txt")); !strings.Contains(out, "content: allowed") {
		t.Errorf("an allowed file: %s", out)
	}
	if out := read(filepath.Join(denied, "secret.txt")); !strings.Contains(out, "permission denied") || strings.Contains(out, "content: secret") {
		t.Errorf("a file outside the rules: %s", out)
	}
}

// TestUpstreamPipeCancel: a cancelled raw call returns at once and the
// server gets notifications/cancelled for its "sy-" id, which ends the
// tool's handler.
func TestUpstreamPipeCancel(t *testing.T) {
	u, log := startStdio(t, "2026", false)
	s := stdioSession(t, u)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan *proto.Error, 1)
	go func() {
		_, perr := u.Call(ctx, call("hang", "", `{}`))
		done <- perr
	}()
	eventually(t, 15*time.Second, "hang call started", func() bool { return strings.Contains(serverLog(log), "block started") })
	cancel()
	if perr := recv(t, done, "the cancelled call"); perr == nil || perr.Code != proto.CodeInternal {
		t.Fatalf("cancelled call: %v, want code %d", perr, proto.CodeInternal)
	}
	eventually(t, 15*time.Second, "notifications/cancelled and the handler's end", func() bool {
		l := serverLog(log)
		return strings.Contains(l, "cancelled sy-") && strings.Contains(l, "block cancelled")
	})
	if n := s.pipe.numPending(); n != 0 {
		t.Errorf("%d raw calls still pending", n)
	}
	if _, perr := u.Call(t.Context(), call("echo", "", `{}`)); perr != nil {
		t.Fatalf("call after cancel: %v", perr)
	}
}

// TestUpstreamPipeDeadline: a call whose deadline passes is a timeout.
func TestUpstreamPipeDeadline(t *testing.T) {
	u, log := startStdio(t, "2025", false)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, perr := u.Call(ctx, call("hang", "", `{}`))
	if perr == nil || perr.Code != proto.CodeTimeout {
		t.Fatalf("call: %v, want code %d", perr, proto.CodeTimeout)
	}
	eventually(t, 15*time.Second, "notifications/cancelled", func() bool { return strings.Contains(serverLog(log), "cancelled sy-") })
}

// TestUpstreamPipeRawSeq: only "sy-" string ids are the raw calls'.
func TestUpstreamPipeRawSeq(t *testing.T) {
	for _, tc := range []struct {
		id   any
		n    uint64
		ours bool
	}{
		{"sy-12", 12, true}, {"sy-x", 0, true}, {float64(12), 0, false}, {"12", 0, false}, {"SY-1", 0, false},
	} {
		id, err := jsonrpc.MakeID(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if n, ours := rawSeq(id); n != tc.n || ours != tc.ours {
			t.Errorf("rawSeq(%v) = %d, %v; want %d, %v", tc.id, n, ours, tc.n, tc.ours)
		}
	}
}

// BenchmarkUpstreamStdioCall is one small tools/call through Upstream.Call
// on a stdio go-sdk server (a re-executed test binary), raw and SDK path.
// Client and server share the CPUs; worker-cpu-ns/op is the CPU time of
// this process alone (the worker's side, the server excluded).
func BenchmarkUpstreamStdioCall(b *testing.B) {
	for _, era := range []string{"2026", "2025"} {
		for _, path := range []string{"raw", "sdk"} {
			b.Run("era="+era+"/path="+path, func(b *testing.B) {
				u, _ := startStdio(b, era, path == "sdk")
				req := call("echo", "", `{"name":"up__echo","arguments":{"text":"hello","n":1}}`)
				if _, perr := u.Call(b.Context(), req); perr != nil {
					b.Fatal(perr)
				}
				b.ReportAllocs()
				cpu := selfCPU()
				for b.Loop() {
					if _, perr := u.Call(b.Context(), req); perr != nil {
						b.Fatal(perr)
					}
				}
				b.ReportMetric(float64(selfCPU()-cpu)/float64(b.N), "worker-cpu-ns/op")
			})
		}
	}
}
