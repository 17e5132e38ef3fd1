package edge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663). Every view
// advertises it: the gateway carries task-augmented tools/call results
// (whether a tool creates a task is its upstream's decision) and serves
// tasks/get, tasks/update and tasks/cancel, which the go-sdk server does
// not know. The edge answers them at the HTTP level, like the fast path:
// it makes the checks SEP-2663 asks of a server (routing headers, the
// client's declaration of the extension, params.taskId) and forwards the
// rest; the router routes by the upstream in the gateway task id and the
// worker opens it under the client's scope (package taskid). tasks/result
// and tasks/list, removed in SEP-2663, stay with the SDK, which answers
// -32601.

// tasksExtension is the extension's id in capabilities.extensions.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskOps are the tasks/* requests the edge serves, with their bus op.
var taskOps = map[string]string{
	"tasks/get":    proto.OpTasksGet,
	"tasks/update": proto.OpTasksUpdate,
	"tasks/cancel": proto.OpTasksCancel,
}

// missingTasksData is the data of the -32021 error for a client that did
// not declare the extension (SEP-2663, SEP-2575 requiredCapabilities).
var missingTasksData = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)

// serveTasks serves r if it is a tasks/get, tasks/update or tasks/cancel
// request of a 2026-07-28 client or of a 2025-era session of v, and
// reports whether it did; when it returns false nothing has been written
// and the SDK answers r.
func (s *Service) serveTasks(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg) bool {
	if m == nil || m.JSONRPC != "2.0" || !validID(m.ID) {
		return false
	}
	op, ok := taskOps[m.Method]
	if !ok || (len(m.Params) > 0 && m.Params[0] != '{') {
		return false
	}
	p := m.params()
	fc := &fastCall{msg: m, op: op}
	var caps []byte
	pv := r.Header.Get("Mcp-Protocol-Version")
	if pv >= protocol2026 {
		if pv != protocol2026 {
			return false // the SDK answers an unsupported version
		}
		fc.protocol, caps = pv, p.meta(mcp.MetaKeyClientCapabilities)
	} else {
		// Not waiting for ready (notifications/initialized, which the SDK
		// handles after answering 202): the SDK cannot serve tasks/* at
		// all, and the session's capabilities are known from initialize.
		cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
		if cs == nil || cs.view != v.name || pv != cs.protocol {
			return false
		}
		fc.session, fc.protocol, caps = cs, cs.protocol, cs.caps
	}
	id, _ := taskid.Param(m.Params)
	if je := checkTaskRequest(r, m, pv, id, caps); je != nil {
		s.writeResponse(&fastOut{w: w}, fc.protocol, m.ID, nil, je)
		return true
	}
	fc.name = id
	s.runFast(w, r, v, fc)
	return true
}

// checkTaskRequest makes SEP-2663's checks of a tasks request, in order:
// on 2026-07-28 the SEP-2243 routing headers (Mcp-Method the method,
// Mcp-Name the params.taskId: -32020), the client's declaration of the
// extension (-32021), and a string params.taskId (-32602).
func checkTaskRequest(r *http.Request, m *probeMsg, pv, id string, caps []byte) *jsonrpc.Error {
	if pv >= protocol2026 {
		if r.Header.Get("Mcp-Method") != m.Method {
			return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "Mcp-Method header does not match the request method"}
		}
		name, ok := r.Header["Mcp-Name"]
		if !ok || len(name) != 1 || strings.Trim(name[0], " \t") != id {
			return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "Mcp-Name header does not match params.taskId"}
		}
	}
	if !declaresTasks(caps) {
		return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
			Message: "Missing required client capability: extension " + tasksExtension, Data: missingTasksData}
	}
	if id == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + m.Method + " needs a string params.taskId"}
	}
	return nil
}

// declaresTasks reports whether the client capabilities object caps (raw
// JSON) lists the tasks extension under extensions.
func declaresTasks(caps []byte) bool {
	if len(caps) == 0 {
		return false
	}
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	v, ok := c.Extensions[tasksExtension]
	return ok && string(v) != "null"
}
