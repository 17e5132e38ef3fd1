package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663). Every
// streamable-HTTP view advertises it (legacy HTTP+SSE sessions do not: see
// withoutTasks): the gateway carries task-augmented tools/call results
// (whether a tool creates a task is its upstream's decision) and serves
// tasks/get, tasks/update and tasks/cancel, which the go-sdk server does
// not know. The edge answers them at the HTTP level, like the fast path:
// it makes the checks SEP-2663 asks of a server (checkTaskRequest) and
// forwards the rest; the router routes by the upstream in the gateway task
// id and the worker opens it under the client's scope (package taskid).
// tasks/result and tasks/list, removed in SEP-2663, are not client methods
// here: the edge answers them -32601 (precheck).

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
	if !ok {
		return false
	}
	fc := &fastCall{msg: m, op: op}
	var caps []byte
	pv := r.Header.Get("Mcp-Protocol-Version")
	if pv >= protocol2026 {
		if pv != protocol2026 {
			return false // the SDK answers an unsupported version
		}
		fc.protocol = pv
	} else {
		// Not waiting for ready (notifications/initialized, which the SDK
		// handles after answering 202): the SDK cannot serve tasks/* at
		// all, and the session's capabilities are known from initialize.
		// As for every method, the header may be absent (2025-03-26
		// clients send none) or name any 2025-era revision.
		cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
		if cs == nil || cs.view != v.key || !version2025[pv] {
			return false
		}
		fc.session, fc.protocol, caps = cs, cs.protocol, cs.caps
	}
	start := time.Now()
	id, je := checkTaskRequest(r, m, pv, caps)
	if je != nil {
		s.writeResponse(&fastOut{w: w}, fc.protocol, m.ID, nil, je)
		s.refused(r, v, m.Method, je.Code, start)
		return true
	}
	fc.name = id
	s.runFast(w, r, v, fc)
	return true
}

// version2025 are the MCP-Protocol-Version values of 2025-era sessions'
// requests ("": none, as 2025-03-26 clients send).
var version2025 = map[string]bool{"": true, "2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// checkTaskRequest makes SEP-2663's checks of a tasks request and returns
// its taskId, or the error to answer. In order: Mcp-Method (2026-07-28,
// -32020); params an object (-32602); the SEP-2575 _meta protocolVersion
// (2026-07-28: missing -32602, another version -32020); the client's
// declaration of the extension, from _meta (2026-07-28) or initialize
// (caps; -32021); params naming the task once, as a string (-32602); and
// Mcp-Name, =?base64?…?= decoded, equal to it (2026-07-28, -32020).
func checkTaskRequest(r *http.Request, m *probeMsg, pv string, caps []byte) (string, *jsonrpc.Error) {
	stateless := pv >= protocol2026
	if stateless && r.Header.Get("Mcp-Method") != m.Method {
		return "", &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "Mcp-Method header does not match the request method"}
	}
	params := bytes.TrimSpace(m.Params)
	if len(params) == 0 || params[0] != '{' {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + m.Method + " needs a params object"}
	}
	if stateless {
		p := m.params()
		var metaVersion string
		switch raw := p.meta(mcp.MetaKeyProtocolVersion); {
		case raw == nil || json.Unmarshal(raw, &metaVersion) != nil:
			return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: _meta must carry " + mcp.MetaKeyProtocolVersion}
		case metaVersion != pv:
			return "", &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "MCP-Protocol-Version header does not match _meta " + mcp.MetaKeyProtocolVersion}
		}
		caps = p.meta(mcp.MetaKeyClientCapabilities)
	}
	if !declaresTasks(caps) {
		return "", &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
			Message: "Missing required client capability: extension " + tasksExtension, Data: missingTasksData}
	}
	id, ok := taskid.Param(params)
	if !ok {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + m.Method + " must name the task once, as the string params.taskId"}
	}
	if stateless {
		name, ok := r.Header["Mcp-Name"]
		var v string
		if ok && len(name) == 1 {
			v, ok = paramhdr.Decode(name[0])
		}
		if !ok || v != id {
			return "", &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "Mcp-Name header does not match params.taskId"}
		}
	}
	return id, nil
}

// declaresTasks reports whether the client capabilities object caps (raw
// JSON) lists the tasks extension under extensions, with an object of
// settings.
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
	v := bytes.TrimSpace(c.Extensions[tasksExtension])
	return len(v) > 0 && v[0] == '{'
}
