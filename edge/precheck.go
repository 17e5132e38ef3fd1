package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
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
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true, // tasks extension (SEP-2663: tasks/result and tasks/list are gone)
}

// clientNotifications are the notifications a client may send a server
// (MCP schema, ClientNotification). Others are accepted and dropped: JSON-RPC
// gives a notification no answer, and MCP asks receivers to ignore what they
// do not know.
var clientNotifications = map[string]bool{
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// protocolNoBatches is the first protocol version without JSON-RPC batches
// (2025-06-18 removed them).
const protocolNoBatches = "2025-06-18"

// paramsRequired are the requests whose params the MCP schema requires.
var paramsRequired = map[string]bool{
	"initialize": true, "tools/call": true, "prompts/get": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "completion/complete": true,
	"logging/setLevel": true,
}

// absent reports whether a message's raw params are missing or null.
func absent(params json.RawMessage) bool {
	p := bytes.TrimSpace(params)
	return len(p) == 0 || string(p) == "null"
}

// precheck reads a POST body (bounded) and answers malformed JSON with
// -32700 and requests for unknown methods with -32601, both as JSON-RPC
// error responses, once the request has passed the checks the SDK handler
// makes before it reads a body. It restores the body for the SDK and reports whether the
// request may go on; a body of one message (not a batch) is returned
// decoded for the fast path.
func (s *Service) precheck(w http.ResponseWriter, r *http.Request, v *view) (*probeMsg, bool) {
	if r.Method != http.MethodPost || r.Body == nil || !plainPOST(r) {
		return nil, true // the SDK's transport checks (403, 415, 400) come first
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && r.Header.Get("Mcp-Protocol-Version") < protocol2026 && s.sessions.get(sid) == nil {
		return nil, true // a session the edge does not track: the SDK answers (404)
	}
	start := time.Now() // refusals here are requests answered too (metrics, audit)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, -32600,
				"request body exceeds "+strconv.FormatInt(s.cfg.MaxRequestBodyBytes, 10)+" bytes")
			s.refused(r, v, "", -32600, start)
			return nil, false
		}
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "Parse error: reading body failed")
		s.refused(r, v, "", -32700, start)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	msgs, single, ok := parseBody(body)
	if !ok {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "Parse error: body is not valid JSON-RPC")
		s.refused(r, v, "", -32700, start)
		return nil, false
	}
	stateful := r.Header.Get("Mcp-Protocol-Version") < protocol2026
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if c := m.clashed(); c != "" {
			// Before anything reads the message: the gateway and a lenient
			// upstream decoder could read different values from it.
			s.refuseClash(w, r, v, m, c, start)
			return nil, false
		}
		if single == nil && r.Header.Get("Mcp-Protocol-Version") >= protocolNoBatches {
			// The SDK answers these with a plain-text 400.
			writeRPCError(w, http.StatusBadRequest, nil, int(jsonrpc.CodeInvalidRequest),
				"Invalid Request: JSON-RPC batches are not supported in protocol version "+protocolNoBatches+" and later")
			s.refused(r, v, "", int64(jsonrpc.CodeInvalidRequest), start)
			return nil, false
		}
		if msg := malformed(m); msg != "" {
			// The SDK answers these with a plain-text 400 whose text names
			// Go types ("invalid ID type map[string]interface {}").
			id := m.ID
			if !validID(id) || !idInRange(id) {
				id = nil
			}
			writeRPCError(w, http.StatusBadRequest, id, int(jsonrpc.CodeInvalidRequest), msg)
			s.refused(r, v, m.Method, int64(jsonrpc.CodeInvalidRequest), start)
			return nil, false
		}
		if m.Method != "" && len(m.ID) == 0 && !clientNotifications[m.Method] && single != nil {
			// An unknown notification: accepted and ignored (the SDK
			// answers a plain-text 400). In a batch it is dropped below.
			w.WriteHeader(http.StatusAccepted)
			return nil, false
		}
		if stateful && m.Method != "" && m.Method != "initialize" && r.Header.Get("Mcp-Session-Id") == "" &&
			m.params().meta(perRequestVersionKey) == nil {
			// What the transport spec asks of servers that use sessions; the
			// SDK would answer 200 with a JSON-RPC error of code 0.
			writeRPCError(w, http.StatusBadRequest, m.ID, -32600, "Bad Request: missing Mcp-Session-Id header (initialize first)")
			s.refused(r, v, m.Method, -32600, start)
			return nil, false
		}
		if m.Method != "" && len(m.ID) > 0 && paramsRequired[m.Method] && absent(m.Params) {
			// The SDK answers these with a plain-text HTTP 400; JSON-RPC
			// asks for an error response.
			status := http.StatusOK
			if r.Header.Get("Mcp-Protocol-Version") >= protocol2026 {
				status = http.StatusBadRequest // as errorStatus2026 has it
			}
			writeRPCError(w, status, m.ID, -32602, "Invalid params: "+m.Method+" requires params")
			s.refused(r, v, m.Method, -32602, start)
			return nil, false
		}
		if m.Method != "" && len(m.ID) > 0 && !clientMethods[m.Method] {
			status := http.StatusOK
			if r.Header.Get("Mcp-Protocol-Version") >= protocol2026 {
				status = http.StatusNotFound // what the SDK answers in that era
			}
			writeRPCError(w, status, m.ID, -32601, "Method not found: "+strconv.Quote(m.Method))
			s.refused(r, v, m.Method, -32601, start)
			return nil, false
		}
	}
	if single == nil {
		return nil, dropUnknownNotifications(w, r, body, msgs)
	}
	return single, true
}

// dropUnknownNotifications removes from a batch body the notifications
// no client sends (clientNotifications), which are ignored; a batch of
// nothing else is answered 202 here. It reports whether the request goes
// on.
func dropUnknownNotifications(w http.ResponseWriter, r *http.Request, body []byte, msgs []*probeMsg) bool {
	unknown := 0
	for _, m := range msgs {
		if m != nil && m.Method != "" && len(m.ID) == 0 && !clientNotifications[m.Method] {
			unknown++
		}
	}
	if unknown == 0 {
		return true
	}
	if unknown == len(msgs) {
		w.WriteHeader(http.StatusAccepted)
		return false
	}
	var raws []json.RawMessage
	_ = json.Unmarshal(body, &raws) // parseBody decoded it
	kept := raws[:0]
	for i, m := range msgs {
		if m == nil || m.Method == "" || len(m.ID) > 0 || clientNotifications[m.Method] {
			kept = append(kept, raws[i])
		}
	}
	b, _ := json.Marshal(kept)
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	return true
}

// malformed returns why m is not a JSON-RPC 2.0 message the SDK can
// decode, as the message of a -32600 error; "" when it is one: jsonrpc
// "2.0", an id that is a string, a number float64 holds, or null, and a
// response's error an object with an integer code and a string message.
func malformed(m *probeMsg) string {
	switch {
	case m.JSONRPC != "2.0":
		return `Invalid Request: jsonrpc must be "2.0"`
	case string(m.ID) == "null" && m.Method != "":
		// JSON-RPC discourages it; MCP requires a request's id to be a
		// string or a number (the SDK answers a plain-text 400).
		return "Invalid Request: a request's id must be a string or a number, not null"
	case len(m.ID) > 0 && string(m.ID) != "null" && !validID(m.ID):
		return "Invalid Request: id must be a string, a number or null"
	case len(m.ID) > 0 && !idInRange(m.ID):
		return "Invalid Request: id is a number out of range"
	case m.Method == "" && len(m.Error) > 0 && string(m.Error) != "null" && !wireError(m.Error):
		return "Invalid Request: error must be an object with an integer code and a string message"
	}
	return ""
}

// idInRange reports whether a raw id that is a number fits a float64, as
// the SDK decodes it (other ids are in range).
func idInRange(id json.RawMessage) bool {
	if len(id) == 0 || (id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return true
	}
	_, err := strconv.ParseFloat(string(id), 64)
	return err == nil
}

// wireError reports whether raw (valid JSON) is a JSON-RPC error object
// the SDK decodes: code an integer (int64), message a string when present.
func wireError(raw json.RawMessage) bool {
	ok := true
	isObject := jsonscan.Members(raw, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "code"):
			if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
				ok = false
			}
		case jsonscan.KeyIs(k, "message"):
			ok = ok && (v[0] == '"' || string(v) == "null")
		}
	})
	return isObject && ok
}

// refuseClash answers message m, which gives member c twice (see package
// fields), with HTTP 400 and JSON-RPC -32600 naming the member, under m's
// id (null when the id itself is what clashed, or is not a request's).
func (s *Service) refuseClash(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg, c fields.Clash, start time.Time) {
	id := m.ID
	if c == "id" || !validID(id) {
		id = nil
	}
	writeRPCError(w, http.StatusBadRequest, id, int(jsonrpc.CodeInvalidRequest), c.Message())
	s.refused(r, v, m.Method, int64(jsonrpc.CodeInvalidRequest), start)
}

// parseBody decodes a POST body: a batch into msgs, a single message into
// single (and msgs). ok is false for a body that is not JSON, or whose
// messages are not objects (a null in a batch is kept as nil) with string
// jsonrpc and method members. Every message is read in place, as the
// single message of the hot case, and its members are matched exactly as
// the SDK's decoder matches them (encoding/json would match "Method" to
// method); a member given twice is noted in the message (probeMsg.clash),
// not read twice.
func parseBody(body []byte) (msgs []*probeMsg, single *probeMsg, ok bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil {
			return nil, nil, false
		}
		msgs = make([]*probeMsg, len(raws))
		for i, raw := range raws {
			if string(raw) == "null" {
				continue
			}
			if msgs[i], ok = parseMessage(raw); !ok {
				return nil, nil, false
			}
		}
		return msgs, nil, true
	}
	if !json.Valid(body) {
		return nil, nil, false
	}
	if single, ok = parseMessage(body); !ok {
		return nil, nil, false
	}
	return []*probeMsg{single}, single, true
}

// parseMessage reads one message (valid JSON) in place; ok is false when
// it is not an object or its jsonrpc or method is not a string (or null).
func parseMessage(raw []byte) (*probeMsg, bool) {
	m := &probeMsg{}
	typed := true
	sc := fields.Envelope.Scan()
	isObject := jsonscan.Members(raw, func(k, v []byte) {
		switch sc.Key(k) {
		case fields.EnvJSONRPC:
			m.JSONRPC, typed = stringValue(v, typed)
		case fields.EnvMethod:
			m.Method, typed = stringValue(v, typed)
		case fields.EnvID:
			m.ID = v
		case fields.EnvParams:
			m.Params = v
		case fields.EnvError:
			m.Error = v
		}
	})
	if !isObject || !typed {
		return nil, false
	}
	if name, dup := sc.Clash(); dup {
		m.clash = fields.Clash(name)
	}
	return m, true
}

// stringValue is the string a raw JSON value holds ("" for null); ok
// turns false for any other type, as encoding/json would refuse it.
func stringValue(v []byte, ok bool) (string, bool) {
	switch v[0] {
	case '"':
		return jsonscan.Unquote(v), ok
	case 'n':
		return "", ok
	}
	return "", false
}

// probeMsg is one JSON-RPC message as precheck and the fast path see it.
type probeMsg struct {
	JSONRPC string
	ID      json.RawMessage
	Method  string
	Params  json.RawMessage
	Error   json.RawMessage // a response's

	clash fields.Clash // an envelope member given twice (see fields)
	read  bool         // p is read (params)
	p     probeParams
}

// clashed returns the first member of the message the gateway decides on
// that it gives twice (envelope, params, _meta, ref: package fields), ""
// when none. Such a message is refused (-32600): the gateway and a
// lenient upstream decoder could read different values from it.
func (m *probeMsg) clashed() fields.Clash {
	if m.clash != "" {
		return m.clash
	}
	return m.params().clash
}

// probeParams are the params members the edge looks at, as raw JSON.
type probeParams struct {
	Name      string          // tools/call
	Meta      json.RawMessage // any request: the _meta object
	RequestID json.RawMessage // notifications/cancelled

	// metaAt locates the members of fields.Meta (by index) in Meta: the
	// value is Meta[at[0]-1:at[1]]; zero when absent.
	metaAt [fields.MetaCount][2]uint32
	clash  fields.Clash
}

// params reads the message's params once, in one pass over their members
// and one over their _meta (the members of fields.Meta are located for
// meta) and a completion's ref, noting the first member given twice.
// Params that are not an object, or whose name is not a string, give the
// zero value but for the clash (the SDK then answers them).
func (m *probeMsg) params() *probeParams {
	p := &m.p
	if m.read {
		return p
	}
	m.read = true
	typed := true
	sc := fields.Params.Scan()
	jsonscan.Members(m.Params, func(k, v []byte) {
		switch sc.Key(k) {
		case fields.ParamName:
			p.Name, typed = stringValue(v, typed)
		case fields.ParamMeta:
			p.Meta = v
			if v[0] != '{' {
				return
			}
			msc := fields.Meta.Scan()
			jsonscan.Members(v, func(k, val []byte) {
				if i := msc.Key(k); i >= 0 {
					at := cap(v) - cap(val) // val's offset in v: Members slices v
					p.metaAt[i] = [2]uint32{uint32(at) + 1, uint32(at + len(val))}
				}
			})
			if name, dup := msc.Clash(); dup && p.clash == "" {
				p.clash = fields.Clash("params._meta." + name)
			}
		case fields.ParamRef:
			if c := fields.CheckIn(v, fields.Ref, "params.ref."); c != "" && p.clash == "" {
				p.clash = c
			}
		case fields.ParamRequestID:
			p.RequestID = v
		}
	})
	if name, dup := sc.Clash(); dup {
		p.clash = fields.Clash("params." + name) // before any of _meta's or ref's
	}
	if !typed {
		*p = probeParams{clash: p.clash}
	}
	return p
}

// meta returns the raw value of key in the params' _meta, nil if absent.
// The members of fields.Meta (every key the edge reads) were read with the
// params; another key costs a pass over _meta.
func (p *probeParams) meta(key string) json.RawMessage {
	if i := fields.Meta.Index(key); i >= 0 {
		if at := p.metaAt[i]; at[0] != 0 {
			return p.Meta[at[0]-1 : at[1] : at[1]]
		}
		return nil
	}
	var out json.RawMessage
	jsonscan.Members(p.Meta, func(k, v []byte) {
		if jsonscan.KeyIs(k, key) {
			out = v
		}
	})
	return out
}

// perRequestVersionKey is the _meta key of a 2026-era request that carries
// its protocol version in the body (SEP-2575) instead of a session.
const perRequestVersionKey = "io.modelcontextprotocol/protocolVersion"

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	writeRPCErrorData(w, status, id, code, msg, nil)
}

// writeRPCErrorData is writeRPCError with the error's data member (none
// when data is empty).
func writeRPCErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: rpcError{code, msg, data}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// refused records a request precheck answered with an error itself: its
// metrics, and its audit event (method "" when the body held none that
// could be read).
func (s *Service) refused(r *http.Request, v *view, method string, code int64, start time.Time) {
	s.met.Request(method, code, start)
	if s.tenantLabels {
		s.met.Tenant(v.tenant, s.tenancy.Current().Len(), code)
	}
	if s.audit == nil {
		return
	}
	a := auditRecord{start: start, tenant: v.tenant, method: method, view: v.name, code: code,
		session: r.Header.Get("Mcp-Session-Id") != "", note: &callNote{traceID: headerTraceID(r.Header)}}
	if id := identityOf(r.Context()); id != nil {
		a.principal = id.principal
	}
	s.recordAudit(&a)
}
