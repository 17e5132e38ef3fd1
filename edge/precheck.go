package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// clientMethods are the methods a client may send to a server (MCP
// 2025-11-25 and 2026-07-28, basic and server features). The SDK answers a
// method outside its table with a plain-text 400; the edge answers a
// request for a method outside the spec with JSON-RPC -32601, as JSON-RPC
// requires.
var clientMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
}

// precheck reads a POST body (bounded) and answers malformed JSON with
// -32700 and requests for unknown methods with -32601, both as JSON-RPC
// error responses. It restores the body for the SDK and reports whether the
// request may go on; a body of one message (not a batch) is returned
// decoded for the fast path.
func (s *Service) precheck(w http.ResponseWriter, r *http.Request) (*probeMsg, bool) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, -32600,
				"request body exceeds "+strconv.FormatInt(s.cfg.MaxRequestBodyBytes, 10)+" bytes")
			return nil, false
		}
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "Parse error: reading body failed")
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	var msgs []*probeMsg
	var single *probeMsg
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(body, &msgs)
	} else {
		single = &probeMsg{}
		err = json.Unmarshal(body, single)
		msgs = []*probeMsg{single}
	}
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "Parse error: body is not valid JSON-RPC")
		return nil, false
	}
	stateful := r.Header.Get("Mcp-Protocol-Version") < protocol2026
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if stateful && m.Method != "" && m.Method != "initialize" && r.Header.Get("Mcp-Session-Id") == "" &&
			m.params().Meta[perRequestVersionKey] == nil {
			// What the transport spec asks of servers that use sessions; the
			// SDK would answer 200 with a JSON-RPC error of code 0.
			writeRPCError(w, http.StatusBadRequest, m.ID, -32600, "Bad Request: missing Mcp-Session-Id header (initialize first)")
			return nil, false
		}
		if m.Method != "" && len(m.ID) > 0 && !clientMethods[m.Method] {
			status := http.StatusOK
			if r.Header.Get("Mcp-Protocol-Version") >= protocol2026 {
				status = http.StatusNotFound // what the SDK answers in that era
			}
			writeRPCError(w, status, m.ID, -32601, "Method not found: "+strconv.Quote(m.Method))
			return nil, false
		}
	}
	return single, true
}

// probeMsg is one JSON-RPC message as precheck and the fast path see it.
type probeMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`

	p *probeParams // decoded on first use
}

// probeParams are the params fields the edge looks at.
type probeParams struct {
	Name      string                     `json:"name"`      // tools/call
	Meta      map[string]json.RawMessage `json:"_meta"`     // any request
	RequestID json.RawMessage            `json:"requestId"` // notifications/cancelled
}

// params decodes the message's params once; params that are not an object
// give the zero value (the SDK then answers them).
func (m *probeMsg) params() *probeParams {
	if m.p == nil {
		m.p = &probeParams{}
		if len(m.Params) > 0 && m.Params[0] == '{' {
			if json.Unmarshal(m.Params, m.p) != nil {
				*m.p = probeParams{}
			}
		}
	}
	return m.p
}

// perRequestVersionKey is the _meta key of a 2026-era request that carries
// its protocol version in the body (SEP-2575) instead of a session.
const perRequestVersionKey = "io.modelcontextprotocol/protocolVersion"

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
