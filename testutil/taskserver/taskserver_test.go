package taskserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a manual clock for Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a Server under test behind an httptest.Server, and a client
// that speaks like the conformance suite's stateless 2026-07-28 client.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	url   string
	clock *fakeClock
}

func newFixture(t *testing.T, next http.Handler, opts Options) *fixture {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)}
	opts.Now = clock.Now
	if next == nil {
		next = GreetHandler()
	}
	ts := httptest.NewServer(New(next, opts))
	t.Cleanup(ts.Close)
	return &fixture{t: t, ctx: t.Context(), url: ts.URL, clock: clock}
}

type rpcReply struct {
	Status int
	Result map[string]any
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// req describes one request; zero fields mean what the suite's client does.
type req struct {
	method   string
	params   map[string]any
	declared bool              // _meta clientCapabilities carries the tasks extension
	headers  map[string]string // overrides; "" deletes the header
	noMeta   bool              // send no SEP-2575 _meta (a pre-2026 request)
}

func (f *fixture) do(r req) rpcReply {
	f.t.Helper()
	rep, err := f.send(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// send is do for goroutines other than the test's: it returns its error.
func (f *fixture) send(r req) (rpcReply, error) {
	params := map[string]any{}
	for k, v := range r.params {
		params[k] = v
	}
	caps := map[string]any{}
	if r.declared {
		caps["extensions"] = map[string]any{ExtensionID: map[string]any{}}
	}
	meta := map[string]any{
		metaProtocolVersion:                  "2026-07-28",
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "taskserver-test", "version": "1"},
		metaClientCapabilities:               caps,
	}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	if !r.noMeta {
		params["_meta"] = meta
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": r.method, "params": params})
	if err != nil {
		return rpcReply{}, err
	}
	hr, err := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		return rpcReply{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set(headerProtocolVersion, "2026-07-28")
	hr.Header.Set(headerMethod, r.method)
	if n, ok := r.params["name"].(string); ok && r.method == "tools/call" {
		hr.Header.Set(headerName, n)
	}
	if id, ok := r.params["taskId"].(string); ok && strings.HasPrefix(r.method, "tasks/") {
		hr.Header.Set(headerName, id)
	}
	for k, v := range r.headers {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return rpcReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcReply{}, err
	}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id":7`) {
				msg = []byte(d)
			}
		}
	}
	out := rpcReply{Status: resp.StatusCode}
	if err := json.Unmarshal(msg, &out); err != nil {
		return out, fmt.Errorf("%s: response %q: %v", r.method, raw, err)
	}
	return out, nil
}

// ok sends r and fails the test unless it gets a result.
func (f *fixture) ok(r req) map[string]any {
	f.t.Helper()
	rep := f.do(r)
	if rep.Error != nil || rep.Result == nil {
		f.t.Fatalf("%s %v: want a result, got HTTP %d error %+v", r.method, r.params, rep.Status, rep.Error)
	}
	return rep.Result
}

// fails sends r and checks the JSON-RPC error code and HTTP status.
func (f *fixture) fails(r req, code, status int) rpcReply {
	f.t.Helper()
	rep := f.do(r)
	if rep.Error == nil {
		f.t.Fatalf("%s %v: want error %d, got result %v", r.method, r.params, code, rep.Result)
	}
	if rep.Error.Code != code || rep.Status != status {
		f.t.Fatalf("%s %v: got error %d (%s) HTTP %d, want %d HTTP %d", r.method, r.params, rep.Error.Code, rep.Error.Message, rep.Status, code, status)
	}
	return rep
}

func (f *fixture) create(tool string, args map[string]any) string {
	f.t.Helper()
	res := f.ok(req{method: "tools/call", params: map[string]any{"name": tool, "arguments": args}, declared: true})
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		f.t.Fatalf("%s: want a CreateTaskResult, got %v", tool, res)
	}
	return id
}

func (f *fixture) get(id string) map[string]any {
	f.t.Helper()
	return f.ok(req{method: "tasks/get", params: map[string]any{"taskId": id}, declared: true})
}

func text(result any) string {
	r, _ := result.(map[string]any)
	c, _ := r["content"].([]any)
	if len(c) == 0 {
		return ""
	}
	b, _ := c[0].(map[string]any)
	s, _ := b["text"].(string)
	return s
}

func keys(m any) []string {
	mm, _ := m.(map[string]any)
	var out []string
	for k := range mm {
		out = append(out, k)
	}
	return out
}

func TestTaskServerLifecycle(t *testing.T) {
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		advance time.Duration
		check   func(t *testing.T, done map[string]any)
	}{
		{
			name: "slow_compute completes with its result inlined", tool: "slow_compute",
			args: map[string]any{"seconds": 2, "label": "lc"}, advance: 2 * time.Second,
			check: func(t *testing.T, done map[string]any) {
				if done["status"] != StatusCompleted || !strings.Contains(text(done["result"]), `"lc"`) {
					t.Errorf("want completed with a result naming the label, got %v", done)
				}
				if r, _ := done["result"].(map[string]any); r["_meta"] != nil {
					t.Errorf("inlined result carries _meta: %v", r["_meta"])
				}
			},
		},
		{
			name: "failing_job completes with isError", tool: "failing_job", advance: failingJobDelay,
			check: func(t *testing.T, done map[string]any) {
				r, _ := done["result"].(map[string]any)
				if done["status"] != StatusCompleted || r["isError"] != true {
					t.Errorf("want completed with result.isError, got %v", done)
				}
			},
		},
		{
			name: "protocol_error_job fails with an inlined error", tool: "protocol_error_job", advance: protocolErrorDelay,
			check: func(t *testing.T, done map[string]any) {
				e, _ := done["error"].(map[string]any)
				if done["status"] != StatusFailed || e["code"] != float64(CodeInternalError) || e["message"] == "" {
					t.Errorf("want failed with error{code,message}, got %v", done)
				}
				if _, ok := done["result"]; ok {
					t.Errorf("failed task carries a result: %v", done)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, Options{TTL: time.Minute, PollInterval: 100 * time.Millisecond})
			created := f.ok(req{method: "tools/call", params: map[string]any{"name": tc.tool, "arguments": tc.args}, declared: true})
			for _, k := range []string{"result", "error", "inputRequests", "requestState", "task", "ttl", "pollInterval"} {
				if _, ok := created[k]; ok {
					t.Errorf("CreateTaskResult carries %q: %v", k, created)
				}
			}
			want := map[string]any{
				"resultType": "task", "taskId": created["taskId"], "status": StatusWorking,
				"createdAt": "2026-07-28T12:00:00.000Z", "lastUpdatedAt": "2026-07-28T12:00:00.000Z",
				"ttlMs": float64(60000), "pollIntervalMs": float64(100),
			}
			if d := cmp.Diff(want, created); d != "" {
				t.Errorf("CreateTaskResult (-want +got):\n%s", d)
			}
			id := created["taskId"].(string)

			working := f.get(id)
			if working["resultType"] != "complete" || working["status"] != StatusWorking || working["taskId"] != id {
				t.Errorf("tasks/get while working: %v", working)
			}
			if _, ok := working["result"]; ok {
				t.Errorf("working task carries a result: %v", working)
			}

			f.clock.Advance(tc.advance - time.Millisecond)
			if got := f.get(id)["status"]; got != StatusWorking {
				t.Errorf("status 1ms before the work ends = %v, want working", got)
			}
			f.clock.Advance(time.Millisecond)
			done := f.get(id)
			if done["resultType"] != "complete" {
				t.Errorf("tasks/get resultType = %v, want complete", done["resultType"])
			}
			wantUpdated := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC).Add(tc.advance).Format(timeLayout)
			if done["lastUpdatedAt"] != wantUpdated {
				t.Errorf("lastUpdatedAt = %v, want %s", done["lastUpdatedAt"], wantUpdated)
			}
			tc.check(t, done)
		})
	}
}

func TestTaskServerGating(t *testing.T) {
	wantData := map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}}
	tests := []struct {
		name     string
		r        req
		wantCode int // 0: a result
		wantType string
	}{
		{name: "tasks/get undeclared", r: req{method: "tasks/get", params: map[string]any{"taskId": "gate-test"}}, wantCode: CodeMissingRequiredClientCapability},
		{name: "tasks/update undeclared", r: req{method: "tasks/update", params: map[string]any{"taskId": "gate-test", "inputResponses": map[string]any{}}}, wantCode: CodeMissingRequiredClientCapability},
		{name: "tasks/cancel undeclared", r: req{method: "tasks/cancel", params: map[string]any{"taskId": "gate-test"}}, wantCode: CodeMissingRequiredClientCapability},
		{name: "required tool undeclared", r: req{method: "tools/call", params: map[string]any{"name": "failing_job"}}, wantCode: CodeMissingRequiredClientCapability},
		{name: "required MRTR tool undeclared", r: req{method: "tools/call", params: map[string]any{"name": "test_tool_with_task"}}, wantCode: CodeMissingRequiredClientCapability},
		{name: "optional tool undeclared runs sync", r: req{method: "tools/call", params: map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "s"}}}, wantType: "complete"},
		{name: "optional tool declared is a task", r: req{method: "tools/call", params: map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}}, declared: true}, wantType: "task"},
		{name: "per-request _meta opt-in is a task", r: req{method: "tools/call", params: map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1},
			"_meta": map[string]any{metaClientCapabilities: map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}}}}, wantType: "task"},
		{name: "sync protocol error is a JSON-RPC error", r: req{method: "tools/call", params: map[string]any{"name": "protocol_error_job"}}, wantCode: CodeInternalError},
		{name: "bad arguments", r: req{method: "tools/call", params: map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": -1}}, declared: true}, wantCode: CodeInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, Options{})
			if tc.wantCode != 0 {
				status := http.StatusBadRequest
				if tc.wantCode == CodeInternalError {
					status = http.StatusOK
				}
				rep := f.fails(tc.r, tc.wantCode, status)
				if tc.wantCode == CodeMissingRequiredClientCapability {
					var data map[string]any
					if err := json.Unmarshal(rep.Error.Data, &data); err != nil || !cmp.Equal(data, wantData) {
						t.Errorf("error data = %s, want %v", rep.Error.Data, wantData)
					}
				}
				return
			}
			res := f.ok(tc.r)
			if res["resultType"] != tc.wantType {
				t.Fatalf("resultType = %v, want %s: %v", res["resultType"], tc.wantType, res)
			}
			if tc.wantType == "complete" && (res["taskId"] != nil || text(res) == "") {
				t.Errorf("sync result must carry content and no taskId: %v", res)
			}
		})
	}
}

func TestTaskServerHeaders(t *testing.T) {
	f := newFixture(t, nil, Options{Greet: true})
	id := f.create("slow_compute", map[string]any{"seconds": 60})
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	get := func(h map[string]string) req {
		return req{method: "tasks/get", params: map[string]any{"taskId": id}, declared: true, headers: h}
	}
	greet := func(h map[string]string) req {
		return req{method: "tools/call", params: map[string]any{"name": "greet", "arguments": map[string]any{"name": "hdr"}}, declared: true, headers: h}
	}
	tests := []struct {
		name    string
		r       req
		wantErr bool
	}{
		{name: "tasks/get matched", r: get(nil)},
		{name: "tasks/get base64 Mcp-Name", r: get(map[string]string{headerName: b64(id)})},
		{name: "tasks/get missing Mcp-Method", r: get(map[string]string{headerMethod: ""}), wantErr: true},
		{name: "tasks/get other Mcp-Method", r: get(map[string]string{headerMethod: "tasks/cancel"}), wantErr: true},
		{name: "tasks/get missing Mcp-Name", r: get(map[string]string{headerName: ""}), wantErr: true},
		{name: "tasks/get other Mcp-Name", r: get(map[string]string{headerName: "sep-2663-wrong-task-id"}), wantErr: true},
		{name: "tasks/get invalid base64 Mcp-Name", r: get(map[string]string{headerName: "=?base64?!!!?="}), wantErr: true},
		{name: "tasks/get before 2026-07-28 is not checked", r: get(map[string]string{headerProtocolVersion: "2025-11-25", headerMethod: "", headerName: ""})},
		{name: "tools/call matched", r: greet(nil)},
		{name: "tools/call Mcp-Method tasks/get", r: greet(map[string]string{headerMethod: "tasks/get"}), wantErr: true},
		{name: "tools/call other Mcp-Name", r: greet(map[string]string{headerName: "slow_compute"}), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantErr {
				f.fails(tc.r, CodeHeaderMismatch, http.StatusBadRequest)
				return
			}
			f.ok(tc.r)
		})
	}
}

func TestTaskServerCancel(t *testing.T) {
	ack := map[string]any{"resultType": "complete"}
	tests := []struct {
		name       string
		setup      func(f *fixture) string
		wantStatus string
	}{
		{name: "working", wantStatus: StatusCancelled, setup: func(f *fixture) string {
			return f.create("slow_compute", map[string]any{"seconds": 60})
		}},
		{name: "input_required", wantStatus: StatusCancelled, setup: func(f *fixture) string {
			return f.create("confirm_delete", map[string]any{"filename": "a.txt"})
		}},
		{name: "terminal is idempotent", wantStatus: StatusCompleted, setup: func(f *fixture) string {
			id := f.create("slow_compute", map[string]any{"seconds": 1})
			f.clock.Advance(time.Second)
			return id
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, Options{TTL: time.Hour})
			id := tc.setup(f)
			for range 2 {
				got := f.ok(req{method: "tasks/cancel", params: map[string]any{"taskId": id}, declared: true})
				if d := cmp.Diff(ack, got); d != "" {
					t.Errorf("cancel ack (-want +got):\n%s", d)
				}
			}
			f.clock.Advance(time.Hour / 2) // nothing moves a cancelled task on
			if got := f.get(id); got["status"] != tc.wantStatus || got["inputRequests"] != nil {
				t.Errorf("after cancel: %v, want status %s", got, tc.wantStatus)
			}
		})
	}
	t.Run("unknown task", func(t *testing.T) {
		f := newFixture(t, nil, Options{})
		f.fails(req{method: "tasks/cancel", params: map[string]any{"taskId": "nope"}, declared: true}, CodeInvalidParams, http.StatusBadRequest)
		f.fails(req{method: "tasks/get", params: map[string]any{"taskId": "tasks-conformance-nonexistent-12345"}, declared: true}, CodeInvalidParams, http.StatusBadRequest)
	})
}

func TestTaskServerUpdate(t *testing.T) {
	accept := func(content map[string]any) map[string]any {
		return map[string]any{"action": "accept", "content": content}
	}
	update := func(f *fixture, id string, responses any) map[string]any {
		f.t.Helper()
		return f.ok(req{method: "tasks/update", params: map[string]any{"taskId": id, "inputResponses": responses}, declared: true})
	}

	t.Run("confirm_delete resumes to completed", func(t *testing.T) {
		f := newFixture(t, nil, Options{})
		id := f.create("confirm_delete", map[string]any{"filename": "x.txt"})
		parked := f.get(id)
		ks := keys(parked["inputRequests"])
		if parked["status"] != StatusInputRequired || len(ks) != 1 {
			t.Fatalf("want input_required with one input request, got %v", parked)
		}
		ir := parked["inputRequests"].(map[string]any)[ks[0]].(map[string]any)
		if ir["method"] != "elicitation/create" {
			t.Errorf("input request method = %v, want elicitation/create", ir["method"])
		}
		if got := update(f, id, map[string]any{ks[0]: accept(map[string]any{"confirm": true})}); !cmp.Equal(got, map[string]any{"resultType": "complete"}) {
			t.Errorf("update ack = %v", got)
		}
		if got := f.get(id)["status"]; got != StatusWorking {
			t.Errorf("status right after the answer = %v, want working", got)
		}
		f.clock.Advance(resumeDelay)
		done := f.get(id)
		if done["status"] != StatusCompleted || text(done["result"]) != "Deleted x.txt" {
			t.Errorf("want completed \"Deleted x.txt\", got %v", done)
		}
	})

	t.Run("multi_input partial fulfilment", func(t *testing.T) {
		f := newFixture(t, nil, Options{})
		id := f.create("multi_input", nil)
		ks := keys(f.get(id)["inputRequests"])
		if len(ks) != 2 {
			t.Fatalf("want two input requests, got %v", ks)
		}
		update(f, id, map[string]any{"unknown-key": map[string]any{"ignored": true}})
		update(f, id, map[string]any{ks[0]: accept(map[string]any{"name": "partial-1", "confirm": true})})
		mid := f.get(id)
		if got := keys(mid["inputRequests"]); mid["status"] != StatusInputRequired || !cmp.Equal(got, []string{ks[1]}) {
			t.Fatalf("after a partial update: status %v keys %v, want input_required [%s]", mid["status"], got, ks[1])
		}
		// Answering the same key again changes nothing.
		update(f, id, map[string]any{ks[0]: accept(map[string]any{"name": "again"})})
		update(f, id, map[string]any{ks[1]: accept(map[string]any{"name": "partial-2", "confirm": true})})
		f.clock.Advance(resumeDelay)
		if done := f.get(id); done["status"] != StatusCompleted || text(done["result"]) == "" {
			t.Errorf("want completed, got %v", done)
		}
	})

	t.Run("bad inputResponses", func(t *testing.T) {
		f := newFixture(t, nil, Options{})
		id := f.create("confirm_delete", map[string]any{"filename": "x"})
		for _, bad := range []any{nil, 42, "x", []any{}} {
			f.fails(req{method: "tasks/update", params: map[string]any{"taskId": id, "inputResponses": bad}, declared: true}, CodeInvalidParams, http.StatusBadRequest)
		}
		f.fails(req{method: "tasks/update", params: map[string]any{"taskId": "nope", "inputResponses": map[string]any{}}, declared: true}, CodeInvalidParams, http.StatusBadRequest)
	})
}

func TestTaskServerMRTRComposition(t *testing.T) {
	f := newFixture(t, nil, Options{})
	call := func(extra map[string]any) rpcReply {
		params := map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}}
		for k, v := range extra {
			params[k] = v
		}
		return f.do(req{method: "tools/call", params: params, declared: true})
	}
	r1 := call(nil).Result
	if r1["resultType"] != "input_required" || r1["taskId"] != nil || r1["requestState"] == nil {
		t.Fatalf("round 1: want an InputRequiredResult with requestState and no taskId, got %v", r1)
	}
	if ks := keys(r1["inputRequests"]); !cmp.Equal(ks, []string{userNameKey}) {
		t.Fatalf("round 1 inputRequests keys = %v", ks)
	}

	if rep := call(map[string]any{"requestState": "tampered", "inputResponses": map[string]any{userNameKey: map[string]any{"action": "accept", "content": map[string]any{"name": "Eve"}}}}); rep.Error == nil || rep.Error.Code != CodeInvalidParams {
		t.Errorf("tampered requestState: want -32602, got %+v", rep)
	}
	if r := call(map[string]any{"requestState": r1["requestState"], "inputResponses": map[string]any{userNameKey: map[string]any{"action": "decline"}}}).Result; r["resultType"] != "input_required" {
		t.Errorf("declined answer: want the question again, got %v", r)
	}

	r2 := call(map[string]any{"requestState": r1["requestState"], "inputResponses": map[string]any{userNameKey: map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}}).Result
	if r2["resultType"] != "task" || r2["taskId"] == nil || r2["requestState"] != nil || r2["inputRequests"] != nil {
		t.Fatalf("round 2: want a plain CreateTaskResult, got %v", r2)
	}
	f.clock.Advance(mrtrTaskDelay)
	done := f.get(r2["taskId"].(string))
	if done["status"] != StatusCompleted || !strings.Contains(text(done["result"]), "Alice") {
		t.Errorf("want completed with a result naming Alice, got %v", done)
	}
}

func TestTaskServerTTL(t *testing.T) {
	f := newFixture(t, nil, Options{TTL: 10 * time.Second})
	id := f.create("slow_compute", map[string]any{"seconds": 30}) // longer than the TTL: running tasks do not expire
	f.clock.Advance(30*time.Second + 10*time.Second - time.Millisecond)
	if got := f.get(id)["status"]; got != StatusCompleted {
		t.Fatalf("status = %v, want completed (readable until ttlMs after completion)", got)
	}
	f.clock.Advance(time.Millisecond)
	f.fails(req{method: "tasks/get", params: map[string]any{"taskId": id}, declared: true}, CodeInvalidParams, http.StatusBadRequest)
}

// TestTaskServerPassthrough runs the fixture in front of the go-sdk handler
// GreetHandler: responses it patches come back as SSE, and what it does not
// answer gets the SDK's answer.
func TestTaskServerPassthrough(t *testing.T) {
	f := newFixture(t, nil, Options{})

	for _, r := range []req{
		{method: "server/discover"},
		{method: "initialize", noMeta: true, headers: map[string]string{headerProtocolVersion: "", headerMethod: ""},
			params: map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}},
	} {
		method := r.method
		res := f.ok(r)
		caps, _ := res["capabilities"].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext[ExtensionID]; !ok || caps["tools"] == nil || caps["tasks"] != nil {
			t.Errorf("%s capabilities = %v, want the SDK's plus extensions[%q]", method, caps, ExtensionID)
		}
	}

	res := f.ok(req{method: "tools/list"})
	support := map[string]any{}
	for _, raw := range res["tools"].([]any) {
		tool := raw.(map[string]any)
		name := tool["name"].(string)
		if _, dup := support[name]; dup {
			t.Errorf("tool %s listed twice", name)
		}
		support[name] = nil
		if e, ok := tool["execution"].(map[string]any); ok {
			support[name] = e["taskSupport"]
		}
	}
	want := map[string]any{
		"greet": nil, "slow_compute": "optional", "failing_job": "required", "protocol_error_job": "optional",
		"confirm_delete": "required", "multi_input": "required", "test_tool_with_task": "required",
	}
	if d := cmp.Diff(want, support); d != "" {
		t.Errorf("tools/list task support (-want +got):\n%s", d)
	}

	for _, m := range []string{"tasks/result", "tasks/list"} {
		f.fails(req{method: m, params: map[string]any{"taskId": "x"}, declared: true}, CodeMethodNotFound, http.StatusNotFound)
	}
	greet := f.ok(req{method: "tools/call", params: map[string]any{"name": "greet", "arguments": map[string]any{"name": "World"}, "task": map[string]any{"ttl": 60000}}, declared: true})
	if greet["resultType"] != "complete" || text(greet) != "Hello, World!" || greet["taskId"] != nil {
		t.Errorf("greet through the SDK: %v", greet)
	}
}

// TestTaskServerGreetOption checks the fixture's own greet and that
// tools/list never lists a tool twice.
func TestTaskServerGreetOption(t *testing.T) {
	tests := []struct {
		name       string
		nextTools  string
		wantGreets int
	}{
		{name: "next lacks greet", nextTools: `[{"name":"other","inputSchema":{"type":"object"}}]`, wantGreets: 1},
		{name: "next has greet", nextTools: `[{"name":"greet","inputSchema":{"type":"object"}}]`, wantGreets: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","tools":`+tc.nextTools+`}}`)
			})
			f := newFixture(t, next, Options{Greet: true})
			n := 0
			for _, raw := range f.ok(req{method: "tools/list"})["tools"].([]any) {
				if raw.(map[string]any)["name"] == "greet" {
					n++
				}
			}
			if n != tc.wantGreets {
				t.Errorf("greet listed %d times, want %d", n, tc.wantGreets)
			}
			res := f.ok(req{method: "tools/call", params: map[string]any{"name": "greet", "arguments": map[string]any{"name": "sep-2243"}}, headers: map[string]string{headerMethod: "tools/call"}})
			if res["resultType"] != "complete" || text(res) != "Hello, sep-2243!" {
				t.Errorf("fixture greet: %v", res)
			}
		})
	}
}

func TestTaskServerPatchSSE(t *testing.T) {
	in := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		"event: message\nid: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"capabilities\":{\"tools\":{}}}}\n\n"
	out, ok := patchBody("text/event-stream", []byte(in), patchCapabilities)
	if !ok {
		t.Fatal("patchBody reported no change")
	}
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		"event: message\nid: 3\ndata: {\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{\"capabilities\":{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}},\"tools\":{}}}}\n\n"
	if d := cmp.Diff(want, string(out)); d != "" {
		t.Errorf("patched stream (-want +got):\n%s", d)
	}
	if _, ok := patchBody("application/json", []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`), patchCapabilities); ok {
		t.Error("an error response was patched")
	}
}

// TestTaskServerPassesBatches checks that what the fixture does not answer
// reaches next byte for byte.
func TestTaskServerPassesBatches(t *testing.T) {
	var got []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
	})
	ts := httptest.NewServer(New(next, Options{}))
	t.Cleanup(ts.Close)
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}]`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"not_a_fixture_tool"}}`,
	} {
		hr, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || string(got) != body {
			t.Errorf("next got %q (HTTP %d), want %q", got, resp.StatusCode, body)
		}
	}
}

// TestTaskServerConcurrent exercises the store from many goroutines (for
// -race).
func TestTaskServerConcurrent(t *testing.T) {
	f := newFixture(t, nil, Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				rep, err := f.send(req{method: "tools/call", params: map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1}}, declared: true})
				id, _ := rep.Result["taskId"].(string)
				if err != nil || id == "" {
					t.Errorf("create: %v %+v", err, rep)
					return
				}
				f.clock.Advance(time.Millisecond)
				for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/get"} {
					if rep, err := f.send(req{method: m, params: map[string]any{"taskId": id}, declared: true}); err != nil || rep.Error != nil {
						t.Errorf("%s: %v %+v", m, err, rep.Error)
					}
				}
			}
		})
	}
	wg.Wait()
}
