package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	ossignal "os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readMessages returns every message lr yields and the error that ended it.
func readMessages(lr *lineReader) ([]string, error) {
	var got []string
	for {
		m, err := lr.next()
		if err != nil {
			return got, err
		}
		got = append(got, string(m))
	}
}

func TestLineReader(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 100) + `"}}`
	cut := strings.Index(long, `{"text"`) // a token boundary
	idLast := `{"result":{"text":"` + strings.Repeat("x", 100) + `"},"jsonrpc":"2.0","id":"r-7"}`
	bigRequest := `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"x":"` + strings.Repeat("x", 100) + `"}}`
	tooLarge := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32065,"message":"upstream up: response of more than 100 bytes (its max_message_bytes)"}}`
	}
	for _, tc := range []struct {
		name, in string
		want     []string
		skipped  []string // reasons
		err      string   // "" for io.EOF
	}{
		{"lines", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}, nil, ""},
		{"crlf and blank lines", "\r\n{\"a\":1}\r\n\n  \n[1,2]\r\n", []string{`{"a":1}`, `[1,2]`}, nil, ""},
		{"last line without newline", "{\"a\":1}\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}, nil, ""},
		{"longer than the buffer", long + "\n" + long + "\n", []string{long, long}, nil, ""},
		{"spread over lines", "{\"a\":\n 1,\n\"b\":[\n2]}\n{\"c\":3}\n", []string{"{\"a\":\n 1,\n\"b\":[\n2]}", `{"c":3}`}, nil, ""},
		{"long and spread", long[:cut] + "\n" + long[cut:] + "\n", []string{long[:cut] + "\n" + long[cut:]}, nil, ""},
		{"text after a message", "{\"a\":1} {\"b\":2}\n{\"c\":3}\n", []string{`{"c":3}`}, []string{skipTrailing}, ""},
		{"invalid", "{\"a\":1}\n{\"a\" 1}\n{\"c\":3}\n", []string{`{"a":1}`, `{"c":3}`}, []string{skipNotJSON}, ""},
		{"a banner", "Server running on stdio\n{\"a\":1}\n", []string{`{"a":1}`}, []string{skipNotJSON}, ""},
		{"a banner at the end", "{\"a\":1}\nbye", []string{`{"a":1}`}, []string{skipNotJSON}, ""},
		{"a brace alone, then a message", "{\n{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}, []string{skipNotJSON}, ""},
		{"a brace line, then a message", "{ starting\n{\"a\":1}\n", []string{`{"a":1}`}, []string{skipNotJSON}, ""},
		{"ends inside a message", "{\"a\":1}\n{\"b\":", []string{`{"a":1}`}, nil, io.ErrUnexpectedEOF.Error()},
		{"newline inside a string", "{\"a\":\"x\ny\"}\n{\"b\":2}\n", []string{`{"b":2}`}, []string{skipNotJSON, skipNotJSON}, ""},
		{"over the limit", long + "\n{\"b\":2}\n", []string{tooLarge("1"), `{"b":2}`}, []string{skipTooLarge}, ""},
		{"over the limit, its id last", idLast + "\n", []string{tooLarge(`"r-7"`)}, []string{skipTooLarge}, ""},
		{"over the limit, a request", bigRequest + "\n{\"b\":2}\n", []string{`{"b":2}`}, []string{skipTooLarge}, ""},
		{"over the limit across lines", "{\"a\":\n" + strings.Repeat(" ", 150) + "\n{\"b\":2}\n", []string{`{"b":2}`}, []string{skipTooLarge}, ""},
		{"over the limit at the end", long, nil, []string{skipTooLarge}, io.ErrUnexpectedEOF.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := 1 << 20
			if strings.HasPrefix(tc.name, "over the limit") {
				limit = 100
			}
			var skipped []string
			lr := &lineReader{br: bufio.NewReaderSize(strings.NewReader(tc.in), 16), limit: limit, name: "up",
				skip: func(reason string, head []byte) {
					if len(head) > skipHead {
						t.Errorf("skip reported %d bytes", len(head))
					}
					skipped = append(skipped, reason)
				}}
			got, err := readMessages(lr)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("messages %q, want %q", got, tc.want)
			}
			if strings.Join(skipped, ",") != strings.Join(tc.skipped, ",") {
				t.Errorf("skipped %q, want %q", skipped, tc.skipped)
			}
			switch {
			case tc.err == "" && err != io.EOF:
				t.Errorf("error %v, want io.EOF", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestLineReaderBraceFlood: a server writing "{" lines without end (each
// the start of a message the next one breaks) costs a bounded stack and
// linear work; the message after them is read.
func TestLineReaderBraceFlood(t *testing.T) {
	in := strings.Repeat("{\n", 200_000) + `{"jsonrpc":"2.0","method":"x"}` + "\n"
	skipped := 0
	lr := &lineReader{br: bufio.NewReaderSize(strings.NewReader(in), 4096), limit: 1 << 20, skip: func(string, []byte) { skipped++ }}
	got, err := readMessages(lr)
	if err != io.EOF || len(got) != 1 || got[0] != `{"jsonrpc":"2.0","method":"x"}` {
		t.Fatalf("messages %d (%v), want the last line's", len(got), err)
	}
	if skipped == 0 {
		t.Error("the brace lines were not reported")
	}
}

// TestLineReaderManyLines: a message spread over many lines (which the
// spec forbids and the SDK's decoder reads in one pass) is not checked
// whole again at each of its lines, which is quadratic: a pretty-printed
// result of 2 MB took minutes, one of 16 MiB days, stalling the process's
// connection. The work is measured as bytes allocated (each check of an
// incomplete message copies it), a small multiple of the message's size.
func TestLineReaderManyLines(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"content":[`)
	for i := range 1500 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 40) + "\"}")
	}
	b.WriteString("\n]}}\n")
	in := b.String()
	lr := &lineReader{br: bufio.NewReaderSize(strings.NewReader(in), 4096), limit: 1 << 20}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := lr.next()
	runtime.ReadMemStats(&after)
	if err != nil || string(m) != strings.TrimSpace(in) {
		t.Fatalf("message of %d bytes, %v", len(m), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 32*uint64(len(in)) {
		t.Errorf("%d bytes allocated for a message of %d", n, len(in))
	}
}

func TestDecodeLine(t *testing.T) {
	msgs, err := decodeLine([]byte(`[{"jsonrpc":"2.0","method":"ping","id":3},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("batch: %v, %v", msgs, err)
	}
	if r, ok := msgs[0].(*jsonrpc.Request); !ok || r.Method != "ping" || !r.IsCall() {
		t.Errorf("first %#v", msgs[0])
	}
	if r, ok := msgs[1].(*jsonrpc.Request); !ok || r.IsCall() {
		t.Errorf("second %#v", msgs[1])
	}
	for _, bad := range []string{`[]`, `[1]`, `{"jsonrpc":"1.0","id":1,"result":{}}`, `42`} {
		if _, err := decodeLine([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestPipeTake(t *testing.T) {
	for _, tc := range []struct {
		line  string
		taken bool
		n     uint64 // the pending call that gets the result
		want  string // its result
	}{
		{`{"jsonrpc":"2.0","id":"sy-7","result":{"content":[]}}`, true, 7, `{"content":[]}`},
		{`{"result":{"a":1},"id":"sy-7","jsonrpc":"2.0","extra":true}`, true, 7, `{"a":1}`},
		{`{"jsonrpc":"2.0","id":"sy-8","result":{}}`, true, 0, ""}, // no longer pending: dropped
		{`{"jsonrpc":"2.0","id":"sy-7","error":{"code":-1,"message":"x"}}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":"sy-7","result":null}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":"sy-7"}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":"sy-x","result":{}}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":"\u0073y-7","result":{}}`, false, 0, ""},
		{`{"jsonrpc":"1.0","id":"sy-7","result":{}}`, false, 0, ""},
		{`{"id":"sy-7","result":{}}`, false, 0, ""},
		{`{"jsonrpc":"2.0","id":"sy-7","method":"ping","result":{}}`, false, 0, ""},
		{`[{"jsonrpc":"2.0","id":"sy-7","result":{}}]`, false, 0, ""},
	} {
		t.Run(tc.line, func(t *testing.T) {
			ch := make(chan pipeResult, 1)
			c := &pipeConn{pending: map[uint64]chan pipeResult{7: ch}}
			if got := c.take([]byte(tc.line)); got != tc.taken {
				t.Fatalf("take = %v, want %v", got, tc.taken)
			}
			select {
			case r := <-ch:
				if tc.n != 7 || string(r.resp.Result) != tc.want || r.err != nil || r.resp.Error != nil {
					t.Errorf("call 7 got %+v", r)
				}
				if c.numPending() != 0 {
					t.Error("call 7 still pending")
				}
			default:
				if tc.n == 7 {
					t.Error("call 7 got nothing")
				}
			}
		})
	}
}

func TestAppendPipeRequest(t *testing.T) {
	p := &rawParams{method: "tools/call", members: []byte("\"name\":\"echo\",\r\n\"arguments\":{\n\"text\":\"a\\nb\"}"), meta: []byte(`"k":1`)}
	line := appendPipeRequest(42, p, []byte(`"s":2`))
	want := `{"jsonrpc":"2.0","id":"sy-42","method":"tools/call","params":{"_meta":{"k":1,"s":2},"name":"echo",  "arguments":{ "text":"a\nb"}}}` + "\n"
	if string(line) != want {
		t.Fatalf("line\n%s\nwant\n%s", line, want)
	}
	if !json.Valid(line[:len(line)-1]) {
		t.Error("not valid JSON")
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if r, ok := msg.(*jsonrpc.Request); err != nil || !ok || r.ID.Raw() != "sy-42" || r.Method != "tools/call" {
		t.Errorf("decoded %#v, %v", msg, err)
	}
}

// procModeEnv makes the re-executed test binary (TestMain) one of the
// small processes below instead of running the tests.
const procModeEnv = "SWITCHYARD_UPSTREAM_TEST_PROC"

// Lines the test processes write.
const (
	lineA      = `{"jsonrpc":"2.0","method":"a"}`
	lineB      = `{"jsonrpc":"2.0","method":"b"}`
	lineReady  = `{"jsonrpc":"2.0","method":"ready"}`
	lineBadVer = `{"jsonrpc":"1.0","id":1,"result":{}}`
)

// runTestProc is the main of a test process of mode:
//   - cat: copies stdin to stdout;
//   - exit: writes lineA and exits;
//   - garbage: writes lineA, a line that is not JSON, lineB, then waits
//     for stdin to close;
//   - undecodable: the same with lineBadVer instead of the non-JSON line;
//   - sleep: writes lineReady and sleeps, not reading stdin (SIGTERM ends
//     it);
//   - ignoreterm: like sleep, ignoring SIGTERM (only SIGKILL ends it).
func runTestProc(mode string) {
	out := func(lines ...string) {
		for _, l := range lines {
			os.Stdout.WriteString(l + "\n")
		}
	}
	switch mode {
	case "cat":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "exit":
		out(lineA)
	case "garbage", "undecodable":
		bad := "oops"
		if mode == "undecodable" {
			bad = lineBadVer
		}
		out(lineA, bad, lineB)
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "fork":
		// A server that starts a helper, which outlives it unless its
		// process group is killed; its pid as a notification.
		child := exec.Command("sleep", "300")
		if child.Start() != nil {
			os.Exit(2)
		}
		out(`{"jsonrpc":"2.0","method":"pid","params":{"pid":` + strconv.Itoa(child.Process.Pid) + `}}`)
		_, _ = io.Copy(io.Discard, os.Stdin) // ends at Close, leaving the helper
	case "parent":
		// A worker that starts a stdio server as the worker does (isolate)
		// and is then killed: the server's pid on stdout.
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), procModeEnv+"=sleep")
		isolate(child)
		if child.Start() != nil {
			os.Exit(2)
		}
		out(strconv.Itoa(child.Process.Pid))
		time.Sleep(time.Minute)
	case "ignoreterm":
		ossignal.Ignore(syscall.SIGTERM)
		fallthrough
	case "sleep":
		out(lineReady)
		time.Sleep(time.Minute)
	}
}

// testProcess returns a transport running this test binary as a test
// process of mode (see runTestProc).
func testProcess(t *testing.T, mode string, terminate time.Duration) *stdioTransport {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), procModeEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	return &stdioTransport{cmd: cmd, terminate: terminate}
}

// processAlive reports whether pid runs (a zombie, already dead, does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// TestStdioStopKillsItsHelpers: a stdio server that started a helper
// process leaves nothing behind when the upstream stops it, even if it
// exits by itself at once (the helper outlives it otherwise): its process
// group goes.
func TestStdioStopKillsItsHelpers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process groups and Pdeathsig are Linux's")
	}
	tr := testProcess(t, "fork", 100*time.Millisecond)
	isolate(tr.cmd)
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m, err := conn.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ PID int }
	if r, ok := m.(*jsonrpc.Request); !ok || json.Unmarshal(r.Params, &p) != nil || p.PID == 0 {
		t.Fatalf("read %#v", m)
	}
	if !processAlive(p.PID) {
		t.Fatal("the helper is not running")
	}
	_ = conn.Close()
	waitGone(t, p.PID, "the server's helper outlived the upstream's stop")
}

// waitGone waits up to 5 s for pid to be gone, else kills it and fails
// with what.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal(what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStdioServerDiesWithItsWorker: a worker killed with SIGKILL takes its
// stdio server with it (Pdeathsig): the server does not run on, orphaned.
func TestStdioServerDiesWithItsWorker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux's")
	}
	worker := exec.Command(os.Args[0])
	worker.Env = append(os.Environ(), procModeEnv+"=parent", "GORACE=atexit_sleep_ms=0")
	stdout, err := worker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil || !processAlive(pid) {
		_ = worker.Process.Kill()
		t.Fatalf("server pid %q: %v %v", line, err, perr)
	}
	_ = worker.Process.Kill() // SIGKILL
	_ = worker.Wait()
	waitGone(t, pid, "the stdio server outlived its worker's SIGKILL")
}

// readReady reads the test process's lineReady: it has set its signals.
func readReady(t *testing.T, conn mcp.Connection) {
	t.Helper()
	if m, err := conn.Read(t.Context()); err != nil || m.(*jsonrpc.Request).Method != "ready" {
		t.Fatalf("read %#v, %v; want the ready line", m, err)
	}
}

// TestStdioConn: messages both ways through a process (cat echoes what it
// reads), take sees every line first, and Close ends the process.
func TestStdioConn(t *testing.T) {
	tr := testProcess(t, "cat", time.Second)
	var taken []string
	tr.take = func(line []byte) bool {
		taken = append(taken, string(line))
		return strings.Contains(string(line), `"sy-`)
	}
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.conn.writeLine([]byte(`{"jsonrpc":"2.0","id":"sy-1","result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	id, err := jsonrpc.MakeID("r5")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Write(ctx, &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	m1, err := conn.Read(ctx)
	if r, ok := m1.(*jsonrpc.Request); err != nil || !ok || r.Method != "notifications/initialized" {
		t.Fatalf("first read %#v, %v", m1, err)
	}
	m2, err := conn.Read(ctx)
	if r, ok := m2.(*jsonrpc.Response); err != nil || !ok || string(r.Result) != `{"ok":true}` {
		t.Fatalf("second read %#v, %v", m2, err)
	}
	if len(taken) != 3 || !strings.Contains(taken[1], "sy-1") {
		t.Errorf("take saw %q", taken)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := conn.Read(ctx); err != io.EOF {
		t.Errorf("Read after Close: %v", err)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "x"}); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if tr.cmd.ProcessState == nil || !tr.cmd.ProcessState.Exited() {
		t.Errorf("process state %v", tr.cmd.ProcessState)
	}
}

// connectReadA connects tr (closed at the test's end) and reads its
// first message, lineA.
func connectReadA(t *testing.T, tr *stdioTransport) mcp.Connection {
	t.Helper()
	conn, err := tr.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if m, err := conn.Read(t.Context()); err != nil || m.(*jsonrpc.Request).Method != "a" {
		t.Fatalf("first read %#v, %v", m, err)
	}
	return conn
}

// TestStdioConnEnds: the process's exit reaches Read (io.EOF) after the
// messages before it.
func TestStdioConnEnds(t *testing.T) {
	conn := connectReadA(t, testProcess(t, "exit", 100*time.Millisecond))
	_, err := conn.Read(t.Context())
	if err != io.EOF {
		t.Errorf("second read: %v, want io.EOF", err)
	}
	if _, err2 := conn.Read(t.Context()); err2 != err {
		t.Errorf("third read: %v, want the same %v", err2, err)
	}
}

// TestStdioConnSkipsNonMessages: a line that is not JSON, or JSON that is
// not JSON-RPC, is skipped and reported, and the connection goes on: the
// message after it is read.
func TestStdioConnSkipsNonMessages(t *testing.T) {
	for _, tc := range []struct{ mode, reason string }{{"garbage", skipNotJSON}, {"undecodable", skipInvalid}} {
		t.Run(tc.mode, func(t *testing.T) {
			tr := testProcess(t, tc.mode, 100*time.Millisecond)
			var mu sync.Mutex
			var skipped []string
			tr.skip = func(reason string, _ []byte) { mu.Lock(); skipped = append(skipped, reason); mu.Unlock() }
			conn := connectReadA(t, tr)
			m, err := conn.Read(t.Context())
			if tc.mode == "undecodable" {
				// lineBadVer answers id 1: that call fails, in its place.
				if r, ok := m.(*jsonrpc.Response); err != nil || !ok || r.ID.Raw() != int64(1) || r.Error == nil ||
					!strings.Contains(r.Error.Error(), "not JSON-RPC") {
					t.Fatalf("second read %#v, %v, want an error response under id 1", m, err)
				}
				m, err = conn.Read(t.Context())
			}
			if r, ok := m.(*jsonrpc.Request); err != nil || !ok || r.Method != "b" {
				t.Fatalf("read %#v, %v, want the message after the bad line", m, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(skipped) != 1 || skipped[0] != tc.reason {
				t.Errorf("skipped %q, want %q", skipped, tc.reason)
			}
		})
	}
}

// TestStdioConnStop: a process that outlives its closed stdin is sent
// SIGTERM, and one that ignores SIGTERM is killed.
func TestStdioConnStop(t *testing.T) {
	for _, tc := range []struct{ name, mode string }{
		{"SIGTERM", "sleep"},
		{"SIGKILL", "ignoreterm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := testProcess(t, tc.mode, 100*time.Millisecond)
			conn, err := tr.Connect(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			readReady(t, conn)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- conn.Close() }()
			select {
			case err := <-done:
				if err == nil {
					t.Error("Close: no exit error from a signalled process")
				}
			case <-ctx.Done():
				t.Fatal("Close did not return")
			}
			if tr.cmd.ProcessState == nil || tr.cmd.ProcessState.Exited() {
				t.Errorf("process state %v, want signalled", tr.cmd.ProcessState)
			}
		})
	}
}

// TestStdioConnCloseWhileWriting: Close ends a process that does not read
// its stdin while a write to it is blocked (the pipe is full): closing
// stdin must not wait for that write, which only the close can end.
func TestStdioConnCloseWhileWriting(t *testing.T) {
	tr := testProcess(t, "sleep", 50*time.Millisecond)
	if _, err := tr.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := tr.conn
	wrote := make(chan error, 1)
	go func() { wrote <- c.writeLine(append(bytes.Repeat([]byte(" "), 1<<20), '\n')) }()
	// Wait for the write to hold the connection (it cannot finish: a pipe
	// holds 64 KiB and sleep reads nothing).
	for c.wmu.TryLock() {
		c.wmu.Unlock()
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("the cut write succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the write did not return")
	}
}

// TestStdioConnTakeInOrder: a raw call's response is taken only once the
// messages before it were read and handled by Read's caller (pipeConn
// routes the call's progress and log notifications there, in order), so
// that a notification sent before the result reaches the call while it is
// still in flight.
func TestStdioConnTakeInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan pipeResult, 1)
		pc := &pipeConn{pending: map[uint64]chan pipeResult{1: ch}}
		stdout, w := io.Pipe()
		c := newStdioConn(nil, nil, 0, pc.take)
		go c.readLoop(stdout, 1<<20)
		go func() {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`+"\n"+
				`{"jsonrpc":"2.0","id":"sy-1","result":{"content":[]}}`+"\n"+
				`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
			_ = w.Close()
		}()
		m, err := c.Read(t.Context())
		if r, ok := m.(*jsonrpc.Request); err != nil || !ok || r.Method != "notifications/progress" {
			t.Fatalf("first read %#v, %v", m, err)
		}
		synctest.Wait() // the reader has gone as far as it can
		if len(ch) != 0 {
			t.Error("the response was taken while the notification before it was still being handled")
		}
		m, err = c.Read(t.Context())
		if r, ok := m.(*jsonrpc.Request); err != nil || !ok || r.Method != "notifications/message" {
			t.Fatalf("second read %#v, %v", m, err)
		}
		select {
		case r := <-ch:
			if r.err != nil || string(r.resp.Result) != `{"content":[]}` {
				t.Errorf("call 1 got %+v", r)
			}
		default:
			t.Error("call 1 got nothing")
		}
		if _, err := c.Read(t.Context()); err != io.EOF {
			t.Errorf("third read: %v, want io.EOF", err)
		}
	})
}

func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"{\"a\":1}\n", "{\"a\":\n1}\n\n[1]\r\n", "{\"a\":1} x\n", "{", "\"x\ny\"\n", "{\"jsonrpc\":\"2.0\",\"id\":\"sy-1\",\"result\":{}}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lr := &lineReader{br: bufio.NewReaderSize(strings.NewReader(in), 16), limit: 1 << 12}
		c := &pipeConn{pending: map[uint64]chan pipeResult{1: make(chan pipeResult, 1)}}
		for range len(in) + 1 {
			m, err := lr.next()
			if err != nil {
				return
			}
			if !json.Valid(m) {
				t.Fatalf("invalid message %q", m)
			}
			if !c.take(m) {
				_, _ = decodeLine(m)
			}
		}
		t.Fatalf("more messages than input bytes in %q", in)
	})
}

// TestStdioConnReadAfterCloseIsEOF: once Close has run, Read says io.EOF
// even though the reader has also stopped, with the closed pipe's error
// (both are ready; a select between them picked either).
func TestStdioConnReadAfterCloseIsEOF(t *testing.T) {
	for range 200 {
		c := newStdioConn(nil, nil, 0, nil)
		c.readErr = os.ErrClosed
		close(c.readDone)
		close(c.closed)
		if _, err := c.Read(t.Context()); err != io.EOF {
			t.Fatalf("Read after Close: %v, want io.EOF", err)
		}
	}
}

// TestStdioUndecodable: a JSON line that is not JSON-RPC fails the call
// its id names only when it is shaped as a response (jsonrpc, result or
// error); a log line with an "id" of its own fails nothing.
func TestStdioUndecodable(t *testing.T) {
	c := &stdioConn{name: "up"}
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"level":"info","id":5,"msg":"started"}`, false},
		{`{"jsonrpc":"1.0","id":5,"result":{}}`, true},
		{`{"id":"sy-3","error":"boom"}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"x","params":1}`, false},
	} {
		if got := c.undecodable([]byte(tc.line)) != nil; got != tc.want {
			t.Errorf("%s: error response %v, want %v", tc.line, got, tc.want)
		}
	}
}
