package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestClassify(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		res  *mcp.CallToolResult
		err  error
		want string
	}{
		{"ok", context.Background(), &mcp.CallToolResult{}, nil, outOK},
		{"tool error", context.Background(), &mcp.CallToolResult{IsError: true}, nil, "tool error"},
		{"json-rpc", context.Background(), nil, fmt.Errorf("calling: %w", &jsonrpc.Error{Code: -32064, Message: "lost"}), "code -32064"},
		{"rejected", context.Background(), nil, &jsonrpc.Error{Code: codeRejected}, "rejected by the client's transport"},
		{"session", context.Background(), nil, fmt.Errorf("x: %w", mcp.ErrSessionMissing), outLost},
		{"hung", expired, nil, context.DeadlineExceeded, outHung},
		{"502", context.Background(), nil, errors.New("POST: Bad Gateway"), "http 502"},
		{"other", context.Background(), nil, errors.New("connection reset"), outTransport},
	} {
		if got := classify(c.ctx, c.res, c.err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestWindowAndBar: a window counts the calls started in it, its errors
// by outcome, hung calls and lost sessions; the bar fails a graceful
// scenario on any error and every scenario on a hung call or lost session.
func TestWindowAndBar(t *testing.T) {
	t0 := time.Unix(100, 0)
	d := NewDriver("", "", 0, time.Second)
	d.record(call{start: t0.Add(-time.Second), end: t0.Add(-time.Millisecond), outcome: "code -1"}) // over before: not counted
	d.record(call{start: t0.Add(-time.Second), end: t0.Add(time.Second), outcome: "code -32064"})   // in flight at t0: counted
	d.record(call{start: t0, end: t0.Add(10 * time.Millisecond), outcome: outOK})
	d.record(call{start: t0.Add(time.Second), end: t0.Add(2 * time.Second), outcome: "code -32064", msg: "lost"})
	d.record(call{start: t0.Add(time.Second), end: t0.Add(3 * time.Second), outcome: outHung})
	w := d.Window(t0, t0.Add(5*time.Second))
	if w.Calls != 4 || w.Errors["code -32064"] != 2 || w.Hung != 1 || len(w.Failed) != 3 || !w.LastErr.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("window %+v", w)
	}
	r := Result{Scenario: Scenario{Name: "x"}, Window: w}
	if r.OK() {
		t.Fatal("a hung call passed")
	}
	w.Hung, w.Errors = 0, map[string]int{"code -32064": 1}
	r.Window = w
	if !r.OK() {
		t.Fatal("an error failed a scenario that is not graceful")
	}
	r.Scenario.Graceful = true
	if r.OK() {
		t.Fatal("an error passed a graceful scenario")
	}
	r.Window.Lost, r.Window.Errors, r.Scenario.Graceful = 1, nil, false
	if r.OK() {
		t.Fatal("a lost session passed")
	}
	if tb := Table([]Result{r}); !strings.Contains(tb, "| x | 4 |") || !strings.Contains(tb, "FAIL") {
		t.Fatalf("table:\n%s", tb)
	}
}

// TestScenarios: every role is killed and stopped, and each graceful
// scenario is a SIGTERM or the rolling restart.
func TestScenarios(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Scenarios() {
		names[s.Name] = true
		if s.Graceful != (strings.HasPrefix(s.Name, "SIGTERM") || s.Name == "rolling restart") {
			t.Errorf("%s: graceful %v", s.Name, s.Graceful)
		}
	}
	for _, r := range []string{"edge-1", "router-1", "worker-1", "tenancy-svc"} {
		if !names["kill -9 "+r] || !names["SIGTERM "+r] {
			t.Errorf("%s is not killed and stopped", r)
		}
	}
}

// TestRunCounter: a call whose echo text reaches the upstream twice is
// counted as run twice; other requests are not counted.
func TestRunCounter(t *testing.T) {
	c := NewRunCounter()
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); len(b) == 0 {
			t.Error("the handler got no body")
		}
	}))
	for _, body := range []string{
		`{"method":"tools/call","params":{"arguments":{"text":"s1-1"}}}`,
		`{"method":"tools/call","params":{"arguments":{"text":"s1-2"}}}`,
		`{"method":"tools/call","params":{"arguments":{"text":"s1-1"}}}`,
		`{"method":"tools/list","params":{}}`,
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)))
	}
	if total, twice := c.Counts(); total != 2 || len(twice) != 1 || twice[0] != "s1-1" {
		t.Fatalf("counts %d %v", total, twice)
	}
	if a := c.Arrivals("s1-1"); len(a) != 2 || !strings.Contains(a[0], "session -") {
		t.Fatalf("arrivals of s1-1: %q", a)
	}
	if a := c.Arrivals("s1-2"); len(a) != 0 {
		t.Fatalf("arrivals of a text that came once: %q", a)
	}
}
