package stdiofront

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/testutil/syncbuf"
)

// wait is the generous bound of every wait in these tests.
const wait = 10 * time.Second

// counting wraps a gateway handler: it counts requests by method, can
// refuse GET (405) or forget every session (404), and records the session
// id of each DELETE.
type counting struct {
	next            http.Handler
	posts, gets     atomic.Int32
	deletes         atomic.Int32
	deletedSessions sync.Map
	noGET           atomic.Bool
	expired         atomic.Bool
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		c.deletes.Add(1)
		c.deletedSessions.Store(r.Header.Get("Mcp-Session-Id"), true)
	}
	if c.expired.Load() && r.Header.Get("Mcp-Session-Id") != "" {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodPost:
		c.posts.Add(1)
	case http.MethodGet: // counted past the expiry check: a counted GET saw the session alive
		c.gets.Add(1)
		if c.noGET.Load() {
			w.Header().Set("Allow", "POST, DELETE")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
	}
	c.next.ServeHTTP(w, r)
}

// gateway is a go-sdk server behind httptest, with the tools the tests
// call.
type gateway struct {
	server  *mcp.Server
	http    *counting
	url     string
	blocked chan struct{} // the block tool has started
	release chan struct{} // closed when the test ends: block returns
}

type nameArgs struct {
	Name string `json:"name"`
}

func newGateway(t *testing.T, opts *mcp.StreamableHTTPOptions) *gateway {
	t.Helper()
	g := &gateway{blocked: make(chan struct{}, 8), release: make(chan struct{})}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "v1"}, nil)
	mcp.AddTool(g.server, &mcp.Tool{Name: "echo", Description: "says hello"},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			return text("hello " + a.Name), nil, nil
		})
	mcp.AddTool(g.server, &mcp.Tool{Name: "chatty", Description: "logs and reports progress before answering"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"}); err != nil {
				return nil, nil, err
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2}); err != nil {
					return nil, nil, err
				}
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(g.server, &mcp.Tool{Name: "ask", Description: "asks the user for a name"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-g.release: // a test that failed must not leave the server waiting
					cancel()
				case <-ctx.Done():
				}
			}()
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: "your name?",
				RequestedSchema: map[string]any{
					"type":       "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}},
				},
			})
			if err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("%s %v", res.Action, res.Content["name"])), nil, nil
		})
	mcp.AddTool(g.server, &mcp.Tool{Name: "block", Description: "waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			g.blocked <- struct{}{}
			select {
			case <-ctx.Done():
			case <-g.release:
			}
			return text("released"), nil, nil
		})
	g.http = &counting{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, opts)}
	srv := httptest.NewServer(g.http)
	t.Cleanup(srv.Close)
	// Sessions end before the server closes, so no handler outlives it.
	t.Cleanup(func() {
		for ss := range g.server.Sessions() {
			_ = ss.Close()
		}
	})
	t.Cleanup(func() { close(g.release) })
	g.url = srv.URL + "/mcp"
	return g
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// run is one bridge between pipes: the test is the stdio client.
type run struct {
	t      *testing.T
	stdin  *io.PipeWriter // what the client writes
	stdout *io.PipeReader // what the client reads
	lines  chan string    // stdout lines, when read with line
	once   sync.Once
	done   chan error
	logs   *syncbuf.Buffer
}

// startBridge runs a bridge to url until the test ends.
func startBridge(t *testing.T, url string, tweak func(*Config)) *run {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg := Config{URL: url, Stdin: inR, Stdout: outW, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	r := &run{t: t, stdin: inW, stdout: outR, done: make(chan error, 1), logs: &syncbuf.Buffer{}}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	go func() {
		r.done <- b.Run(ctx)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		if _, err := r.wait(); err != nil {
			t.Error(err)
		}
		outR.Close()
		if t.Failed() {
			t.Logf("bridge log:\n%s", r.logs.String())
		}
	})
	return r
}

// wait returns Run's result, once.
func (r *run) wait() (error, error) {
	var res, timeout error
	r.once.Do(func() {
		select {
		case res = <-r.done:
		case <-time.After(wait):
			timeout = errors.New("Run did not return within 10s")
		}
	})
	return res, timeout
}

// finish closes stdin and returns Run's result.
func (r *run) finish() error {
	r.t.Helper()
	r.stdin.Close()
	res, timeout := r.wait()
	if timeout != nil {
		r.t.Fatal(timeout)
	}
	return res
}

// send writes one stdin line.
func (r *run) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatalf("write stdin: %v", err)
	}
}

// line returns the next stdout line.
func (r *run) line() string {
	r.t.Helper()
	if r.lines == nil {
		r.lines = make(chan string, 64)
		go func() {
			defer close(r.lines)
			sc := bufio.NewScanner(r.stdout)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				r.lines <- sc.Text()
			}
		}()
	}
	select {
	case l, ok := <-r.lines:
		if !ok {
			r.t.Fatal("stdout closed, want a line")
		}
		return l
	case <-time.After(wait):
		r.t.Fatal("no stdout line within 10s")
	}
	return ""
}

// expect reads a stdout line and checks it holds each of want.
func (r *run) expect(want ...string) string {
	r.t.Helper()
	l := r.line()
	for _, w := range want {
		if !strings.Contains(l, w) {
			r.t.Fatalf("stdout line %s\n does not contain %s", l, w)
		}
	}
	return l
}

// eventually polls cond until it holds or the wait is over.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting: %s", what)
		}
	}
}

// Raw JSON lines of a 2025-11-25 client.
const (
	initLine        = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)
