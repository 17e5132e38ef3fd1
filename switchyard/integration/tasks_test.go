package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/testutil/taskserver"
)

// taskClient speaks the tasks extension (SEP-2663) by hand, as a 2026-07-28
// client (no session) or a 2025-11-25 session: the go-sdk client has no
// tasks/* methods.
type taskClient struct {
	t      *testing.T
	url    string
	auth   string // the Authorization header, "" for none
	sid    string // 2025-era session, "" for 2026-07-28
	caps   string // the client capabilities object
	nextID int
}

const tasksCaps = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

func newTaskClient(t *testing.T, url, version, caps string) *taskClient {
	return newTaskClientAuth(t, url, version, caps, "")
}

// newTaskClientAuth is newTaskClient with an Authorization header on
// every request.
func newTaskClientAuth(t *testing.T, url, version, caps, auth string) *taskClient {
	c := &taskClient{t: t, url: url, caps: caps, auth: auth}
	if version == "2025-11-25" {
		_, _, h := c.post("initialize", "", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}`)
		c.sid = h.Get("Mcp-Session-Id")
		if c.sid == "" {
			t.Fatal("initialize: no session id")
		}
		c.notify("notifications/initialized")
	}
	return c
}

// rpcReply is one JSON-RPC response.
type rpcReply struct {
	Result map[string]json.RawMessage
	Error  *struct {
		Code    int64
		Message string
	}
}

// call sends a request; name is the Mcp-Name header (2026-07-28).
func (c *taskClient) call(method, name, params string) rpcReply {
	c.t.Helper()
	if c.sid == "" {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + c.caps + `}`
		params = strings.TrimSuffix(params, "}")
		if strings.TrimSpace(params) != "{" {
			params += ","
		}
		params += meta + "}"
	}
	_, body, _ := c.post(method, name, params)
	var r rpcReply
	if err := json.Unmarshal(body, &r); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, body)
	}
	return r
}

func (c *taskClient) notify(method string) {
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","method":"`+method+`"}`))
	c.headers(req, "", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
}

func (c *taskClient) headers(req *http.Request, method, name string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	} else if method != "initialize" && method != "" {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
}

// post sends one request and returns the status and the JSON-RPC message
// (taken from an SSE response's last message event).
func (c *taskClient) post(method, name, params string) (int, []byte, http.Header) {
	c.t.Helper()
	c.nextID++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.nextID, method, params)
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	c.headers(req, method, name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(d, []byte(`"id"`)) {
				last = append([]byte(nil), d...)
			}
		}
		data = last
	}
	return resp.StatusCode, data, resp.Header
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// startTask calls tool and returns the taskId of its CreateTaskResult.
func (c *taskClient) startTask(tool, args string) string {
	c.t.Helper()
	r := c.call("tools/call", tool, `{"name":"`+tool+`","arguments":`+args+`}`)
	if r.Error != nil || str(r.Result["resultType"]) != "task" || str(r.Result["taskId"]) == "" {
		c.t.Fatalf("tools/call %s: %+v, want a CreateTaskResult", tool, r)
	}
	return str(r.Result["taskId"])
}

// await polls tasks/get until the task has status want.
func (c *taskClient) await(id, want string) map[string]json.RawMessage {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.call("tasks/get", id, `{"taskId":"`+id+`"}`)
		if r.Error != nil {
			c.t.Fatalf("tasks/get: %+v", r.Error)
		}
		if got := str(r.Result["status"]); got == want {
			if str(r.Result["taskId"]) != id {
				c.t.Fatalf("tasks/get answered taskId %s, want %s", r.Result["taskId"], id)
			}
			return r.Result
		} else if time.Now().After(deadline) {
			c.t.Fatalf("task %s: status %s, want %s", id, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *taskClient) wantError(r rpcReply, code int64, what string) {
	c.t.Helper()
	if r.Error == nil || r.Error.Code != code {
		c.t.Fatalf("%s: %+v, want error %d", what, r, code)
	}
}

// TestIntegrationTasks: the tasks extension crosses the gateway to an
// upstream that implements it (testutil/taskserver): task-augmented calls,
// tasks/get, tasks/update and tasks/cancel, in the passthrough and the
// federated view and in both eras; task ids are the gateway's, and reach
// only the session (2025) or the tenant and endpoint (2026) that created
// them.
func TestIntegrationTasks(t *testing.T) {
	up := httptest.NewServer(taskserver.New(taskserver.GreetHandler(), taskserver.Options{}))
	t.Cleanup(up.Close)
	g := startGateway(t, loadConfig(t, fmt.Sprintf("upstreams:\n  - name: tk\n    url: %s\n", up.URL)))
	pass, fed := g.url+"/mcp/tk", g.url+"/mcp"

	c := newTaskClient(t, pass, "2026-07-28", tasksCaps)
	disc := c.call("server/discover", "", `{}`)
	if !bytes.Contains(disc.Result["capabilities"], []byte(`"io.modelcontextprotocol/tasks"`)) {
		t.Fatalf("server/discover: %+v, want the tasks extension advertised", disc)
	}
	eventually(t, 20*time.Second, func() error { // the worker connects to tk
		if r := c.call("tools/call", "greet", `{"name":"greet","arguments":{"name":"W"}}`); str(r.Result["resultType"]) != "complete" {
			return fmt.Errorf("sync tool: %+v %+v", r, r.Error)
		}
		return nil
	})

	// Lifecycle: create, get (working), cancel, get (cancelled).
	id := c.startTask("slow_compute", `{"seconds":60,"label":"it"}`)
	if !strings.HasPrefix(id, "sy1.") {
		t.Fatalf("taskId %q is not a gateway id", id)
	}
	c.await(id, "working")
	if r := c.call("tasks/cancel", id, `{"taskId":"`+id+`"}`); r.Error != nil || str(r.Result["resultType"]) != "complete" || r.Result["taskId"] != nil {
		t.Fatalf("tasks/cancel: %+v, want the empty ack", r)
	}
	c.await(id, "cancelled")

	// Input: input_required, tasks/update, completed with the result.
	id = c.startTask("confirm_delete", `{"filename":"a.txt"}`)
	det := c.await(id, "input_required")
	var asks map[string]json.RawMessage
	_ = json.Unmarshal(det["inputRequests"], &asks)
	resp := map[string]any{}
	for k := range asks {
		resp[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	rb, _ := json.Marshal(map[string]any{"taskId": id, "inputResponses": resp})
	if len(asks) == 0 {
		t.Fatalf("input_required without inputRequests: %s", det["inputRequests"])
	}
	if r := c.call("tasks/update", id, string(rb)); r.Error != nil || str(r.Result["resultType"]) != "complete" {
		t.Fatalf("tasks/update: %+v", r)
	}
	if done := c.await(id, "completed"); !bytes.Contains(done["result"], []byte(`"content"`)) {
		t.Fatalf("completed task without its result: %s", done["result"])
	}

	// Scope: the id reaches nothing from another endpoint, a 2025 session,
	// when forged, or as the upstream's own id; undeclared clients get -32021.
	id = c.startTask("slow_compute", `{"seconds":60,"label":"scope"}`)
	other := newTaskClient(t, fed, "2026-07-28", tasksCaps)
	other.wantError(other.call("tasks/get", id, `{"taskId":"`+id+`"}`), -32602, "another endpoint's task")
	s1 := newTaskClient(t, pass, "2025-11-25", tasksCaps)
	s1.wantError(s1.call("tasks/get", "", `{"taskId":"`+id+`"}`), -32602, "a stateless task from a session")
	forged := id[:len(id)-3] + "AAA"
	c.wantError(c.call("tasks/get", forged, `{"taskId":"`+forged+`"}`), -32602, "a forged id")
	c.wantError(c.call("tasks/get", "t-1", `{"taskId":"t-1"}`), -32602, "an upstream id")
	c.wantError(c.call("tasks/get", id, `{"taskId":"`+id+`","TaskId":"t-1"}`), -32600, "a second taskId, by case") // docs/architecture.md, Request validation
	undeclared := newTaskClient(t, pass, "2026-07-28", `{}`)
	undeclared.wantError(undeclared.call("tasks/get", id, `{"taskId":"`+id+`"}`), -32021, "an undeclared client")
	c.call("tasks/cancel", id, `{"taskId":"`+id+`"}`)

	// Federated view: the namespaced tool creates a task its view can poll.
	fid := other.startTask("tk__slow_compute", `{"seconds":0.2,"label":"fed"}`)
	other.await(fid, "completed")

	// 2025-era sessions: a task is the session's own.
	sid := s1.startTask("slow_compute", `{"seconds":60,"label":"s1"}`)
	s1.await(sid, "working")
	s2 := newTaskClient(t, pass, "2025-11-25", tasksCaps)
	s2.wantError(s2.call("tasks/get", "", `{"taskId":"`+sid+`"}`), -32602, "another session's task")
	s2.wantError(s2.call("tasks/cancel", "", `{"taskId":"`+sid+`"}`), -32602, "cancelling another session's task")
	if r := s1.call("tasks/cancel", "", `{"taskId":"`+sid+`"}`); r.Error != nil {
		t.Fatalf("tasks/cancel on the owning session: %+v", r.Error)
	}
	s1.await(sid, "cancelled")

	// Legacy HTTP+SSE sessions cannot reach tasks/*: the extension is
	// neither advertised to them nor declared upstream for them, so a
	// task-supporting tool answers synchronously.
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/tasks", map[string]any{})
	legacy, err := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).
		Connect(t.Context(), &mcp.SSEClientTransport{Endpoint: g.url + "/sse/tk"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if ext := legacy.InitializeResult().Capabilities.Extensions; ext["io.modelcontextprotocol/tasks"] != nil {
		t.Fatalf("legacy SSE session offered the tasks extension: %v", ext)
	}
	res, err := legacy.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_compute", Arguments: map[string]any{"seconds": 0.05, "label": "sse"}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("slow_compute over legacy SSE: %+v, %v; want a synchronous result", res, err)
	}
}

// TestIntegrationTasksPrincipals: a task is its creator's. Two API keys of
// one tenant are two principals: the second can neither get, update nor
// cancel the first's task, on the same endpoint in either era, and is
// answered exactly as for a task id that never existed (so it learns
// nothing of the task); the task is untouched and its creator still
// reaches it. A principal of another tenant is refused the same way.
func TestIntegrationTasksPrincipals(t *testing.T) {
	up := httptest.NewServer(taskserver.New(taskserver.GreetHandler(), taskserver.Options{}))
	t.Cleanup(up.Close)
	keys := map[string]string{"ALICE": mintKey(t), "ALAN": mintKey(t), "BOB": mintKey(t)}
	for n, k := range keys {
		t.Setenv("SY_TEST_TASKS_"+n+"_KEY", k)
	}
	g := startGateway(t, loadConfig(t, fmt.Sprintf(`upstreams:
  - name: tk
    url: %s
tenants:
  - {name: acme, policy: {all_upstreams: true, default: allow}}
  - {name: globex, policy: {all_upstreams: true, default: allow}}
api_keys:
  - {tenant: acme, principal: alice, key_env: SY_TEST_TASKS_ALICE_KEY}
  - {tenant: acme, principal: alan, key_env: SY_TEST_TASKS_ALAN_KEY}
  - {tenant: globex, principal: bob, key_env: SY_TEST_TASKS_BOB_KEY}
`, up.URL)))
	pass := g.url + "/mcp/tk"
	bearer := func(n string) string { return "Bearer " + keys[n] }

	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			alice := newTaskClientAuth(t, pass, era, tasksCaps, bearer("ALICE"))
			eventually(t, 20*time.Second, func() error { // the worker connects to tk
				if r := alice.call("tools/call", "greet", `{"name":"greet","arguments":{"name":"W"}}`); r.Error != nil || len(r.Result["content"]) == 0 {
					return fmt.Errorf("sync tool: %+v %+v", r, r.Error)
				}
				return nil
			})
			work := alice.startTask("slow_compute", `{"seconds":60,"label":"alice"}`)
			alice.await(work, "working")
			ask := alice.startTask("confirm_delete", `{"filename":"a.txt"}`)
			alice.await(ask, "input_required")

			// refusal returns the -32602 message of method for id, with
			// the id taken out.
			refusal := func(c *taskClient, method, id string) string {
				t.Helper()
				params := `{"taskId":"` + id + `"}`
				if method == "tasks/update" {
					params = `{"taskId":"` + id + `","inputResponses":{"x":{"action":"accept","content":{"confirm":true}}}}`
				}
				r := c.call(method, id, params)
				if r.Error == nil || r.Error.Code != -32602 {
					t.Fatalf("%s of %s: %+v, want -32602", method, id, r)
				}
				return strings.ReplaceAll(r.Error.Message, id, "<id>")
			}
			// never is an id of the same upstream and length that never
			// existed: its sealed part's last characters changed.
			never := func(id string) string {
				n := id[:len(id)-6] + "AAAAAA"
				if n == id {
					n = id[:len(id)-6] + "BBBBBB"
				}
				return n
			}
			for _, other := range []struct{ who, key string }{{"another principal of the tenant", "ALAN"}, {"a principal of another tenant", "BOB"}} {
				c := newTaskClientAuth(t, pass, era, tasksCaps, bearer(other.key))
				for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
					for _, id := range []string{work, ask} {
						want := refusal(c, method, never(id))
						if got := refusal(c, method, id); got != want {
							t.Fatalf("%s: %s of the task: %q, want the answer to an unknown id, %q", other.who, method, got, want)
						}
					}
				}
			}
			// Untouched: still working and still waiting for input, and
			// its creator still updates and cancels it.
			alice.await(work, "working")
			det := alice.await(ask, "input_required")
			var asks map[string]json.RawMessage
			_ = json.Unmarshal(det["inputRequests"], &asks)
			resp := map[string]any{}
			for k := range asks {
				resp[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
			}
			rb, _ := json.Marshal(map[string]any{"taskId": ask, "inputResponses": resp})
			if r := alice.call("tasks/update", ask, string(rb)); r.Error != nil {
				t.Fatalf("tasks/update by the creator: %+v", r.Error)
			}
			alice.await(ask, "completed")
			if r := alice.call("tasks/cancel", work, `{"taskId":"`+work+`"}`); r.Error != nil {
				t.Fatalf("tasks/cancel by the creator: %+v", r.Error)
			}
			alice.await(work, "cancelled")
		})
	}
}
