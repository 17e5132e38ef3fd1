package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The fast path answers tools/call and tools/list at the HTTP level: the
// params go on the bus as the client sent them and the result bytes come
// back into a JSON-RPC response the edge writes itself, with no SDK decode
// or encode on the way (the SDK's writer compacts every result twice). It
// takes only requests whose every check it can make as the SDK would; any
// other request (batches, progress tokens, unknown sessions, mismatched
// headers, DNS-rebinding suspects) goes to the SDK, which answers or
// rejects it. Sessions, initialize and every other method stay with the
// SDK.

// fastMethods are the methods the fast path serves, with their bus op.
var fastMethods = map[string]string{"tools/call": proto.OpToolsCall, "tools/list": proto.OpToolsList}

// fastCall is what the fast path checked and took from one request.
type fastCall struct {
	msg      *probeMsg
	op       string
	session  *clientSession // nil for a 2026-era call
	protocol string
	name     string // what the router routes by, when not a tool's name: a tasks request's taskId
}

// serveFast serves r on the fast path if it qualifies and reports whether
// it did; when it returns false nothing has been written.
func (s *Service) serveFast(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg) bool {
	// precheck returned m only for a POST that passed the SDK's transport
	// checks.
	if m == nil || s.noFastPath || m.JSONRPC != "2.0" || r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	op, ok := fastMethods[m.Method]
	if !ok || !validID(m.ID) || (len(m.Params) > 0 && m.Params[0] != '{') || tooDeep(m.Params) {
		return false
	}
	p := m.params()
	if op == proto.OpToolsCall && p.Name == "" {
		return false // the SDK rejects missing params or name
	}
	if p.meta("progressToken") != nil {
		return false // progress notifications need the SDK's stream
	}
	fc := &fastCall{msg: m, op: op}
	pv := r.Header.Get("Mcp-Protocol-Version")
	if pv >= protocol2026 {
		if !statelessCallOK(r, m, p, pv) {
			return false
		}
		fc.protocol = pv
	} else {
		cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
		// A session that ended (a DELETE, another edge's end) is the
		// SDK's to refuse: it closes the session before this edge's table
		// lets go of it.
		if cs == nil || cs.view != v.key || !cs.ready.Load() || cs.ended.Load() || pv != cs.protocol || p.meta(mcp.MetaKeyProtocolVersion) != nil {
			return false // a 2026 _meta on a stateful session: the SDK refuses it
		}
		fc.session, fc.protocol = cs, cs.protocol
	}
	s.runFast(w, r, v, fc)
	return true
}

// statelessCallOK makes the SDK's checks of a 2026-07-28 call (SEP-2243
// headers, the SEP-2575 _meta triple): true only when all of them pass.
func statelessCallOK(r *http.Request, m *probeMsg, p *probeParams, pv string) bool {
	if pv != protocol2026 || r.Header.Get("Mcp-Method") != m.Method {
		return false
	}
	if m.Method == "tools/call" && (p.Name == "" || r.Header.Get("Mcp-Name") != p.Name) {
		return false
	}
	version, caps, info := p.meta(mcp.MetaKeyProtocolVersion), p.meta(mcp.MetaKeyClientCapabilities), p.meta(mcp.MetaKeyClientInfo)
	if !jsonStringIs(version, pv) {
		return false
	}
	if len(caps) == 0 || caps[0] != '{' || !clientCapsOK.valid(caps) {
		return false
	}
	if info != nil && (info[0] != '{' || !clientInfoOK.valid(info)) {
		return false
	}
	return true
}

// The SDK decodes a 2026-era request's clientCapabilities and clientInfo
// on every request; a client sends the same bytes each time.
var (
	clientCapsOK = newDecodeCache[mcp.ClientCapabilities]()
	clientInfoOK = newDecodeCache[mcp.Implementation]()
)

// jsonStringIs reports whether raw is a JSON string whose value is s: the
// plain quoted form is compared as bytes, any other (escapes) decoded.
func jsonStringIs(raw []byte, s string) bool {
	if len(raw) == len(s)+2 && raw[0] == '"' && raw[len(raw)-1] == '"' && string(raw[1:len(raw)-1]) == s && plainJSON(s) {
		return true
	}
	var v string
	return json.Unmarshal(raw, &v) == nil && v == s
}

// plainJSON reports whether s appears unescaped between a JSON string's
// quotes and decodes to itself: valid UTF-8, with no quote, backslash or
// control character.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(s)
}

// runFast sends the call over the bus and writes its JSON-RPC response.
func (s *Service) runFast(w http.ResponseWriter, r *http.Request, v *view, fc *fastCall) {
	m, p := fc.msg, fc.msg.params()
	start := time.Now()
	s.met.InFlight.Inc()
	// code is what the request is answered with, for its metrics; a
	// client that went away gets no answer and counts as cancelled.
	code := int64(codeRequestCancelled)
	defer func() { s.record(v.tenant, m.Method, code, start) }()
	// A 2026-era call ends with its HTTP request (the SDK's
	// PropagateRequestCancellation); a 2025-era one does not: a dropped
	// connection is not a cancellation (MCP transports), only
	// notifications/cancelled or the session's end are.
	parent := r.Context()
	if fc.session != nil {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	preq := proto.Request{Method: m.Method, Tenant: v.tenant, Edge: s.cfg.ID, View: v.name, Protocol: fc.protocol, Params: m.Params}
	if fc.session != nil {
		preq.Edge = fc.session.sessionEdge(s.cfg.ID)
	}
	var user string
	if id := identityOf(r.Context()); id != nil {
		preq.Principal, preq.Issuer, user = id.principal, id.issuer, id.user
	}
	if fc.op == proto.OpToolsCall {
		preq.Name = p.Name
	} else if fc.name != "" {
		preq.Name = fc.name
	}
	var span trace.Span
	ctx, span = s.cfg.Tracer.StartEdge(ctx, r.Header, trace.Meta{Raw: p.Meta}, trace.Call{
		Method: m.Method, Name: preq.Name, RequestID: m.ID, Protocol: fc.protocol,
		Tenant: v.tenant, View: v.name,
	})
	defer span.End()
	defer func() {
		hdr := r.Header
		if span.Recording() {
			hdr = nil
		}
		s.logAnswered(ctx, v.tenant, m.Method, m.ID, code, start, hdr)
	}()
	var written []byte // the result sent, for the audit event
	if s.audit != nil {
		// The span's trace, else the client's: _meta first, as the
		// tracing spec has it, then the HTTP header.
		note := &callNote{traceID: span.TraceID()}
		if raw := p.meta(trace.KeyTraceparent); note.traceID == "" && raw != nil {
			var tp string
			_ = json.Unmarshal(raw, &tp)
			note.traceID = traceparentID(tp)
		}
		if note.traceID == "" {
			note.traceID = headerTraceID(r.Header)
		}
		ctx = withNote(ctx, note)
		defer func() {
			s.recordAudit(&auditRecord{
				start: start, tenant: v.tenant, principal: preq.Principal, method: m.Method, view: v.name,
				name: preq.Name, code: code, params: m.Params, arguments: argumentsOf(m.Method, m.Params),
				result: written, session: fc.session != nil, note: note,
			})
		}()
	}
	if len(preq.Params) == 0 {
		preq.Params = emptyParams
	}
	// The call's limit ticket: a resumed call carries on with the one its
	// suspension held; a suspension takes it over.
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	state, responses, resuming := bridgeRetry(m.Params)
	resuming = resuming && fc.session == nil
	if !resuming {
		done, perr := s.admit(&preq)
		if perr != nil {
			setRetryAfter(w, perr)
			code = int64(perr.Code)
			je := s.toJSONRPC(ctx, perr, m.Method)
			span.Fail(je.Code, je.Message)
			s.writeResponse(&fastOut{w: w}, fc.protocol, m.ID, nil, je)
			return
		}
		release = done
	}
	// mayAnswer takes the call out of its session's table before its
	// response goes out: false when the client cancelled it first, and
	// then no response is sent (MCP, "Cancellation"), whatever the
	// upstream answered.
	mayAnswer := func() bool { return true }
	if cs := fc.session; cs != nil {
		preq.Session, preq.ClientCaps = cs.id, cs.caps
		id := idKey(m.ID)
		entry := cs.track(id, cancel)
		if entry == nil {
			code = int64(jsonrpc.CodeInvalidRequest)
			span.Fail(int64(jsonrpc.CodeInvalidRequest), "duplicate in-flight request ID")
			writeRPCError(w, http.StatusBadRequest, m.ID, int(jsonrpc.CodeInvalidRequest), "duplicate in-flight request ID "+string(m.ID))
			return
		}
		defer cs.untrack(id, entry)
		mayAnswer = func() bool { return cs.answering(id, entry) }
	}
	var stamps nats.Header
	if fc.op == proto.OpToolsCall && string(p.meta(hop.MetaKey)) == "true" {
		stamps = newStamps()
	}
	out := &fastOut{w: w}
	var asks sync.WaitGroup
	defer func() { cancel(); asks.Wait(); out.forget(fc.session); out.close() }()
	onMsg := s.fastRelay(ctx, v, fc, out, &asks)
	br := &bridge{caps: p.meta(mcp.MetaKeyClientCapabilities), s: s}
	var raw []byte
	var timing nats.Header
	var err error
	if fc.session == nil { // 2026-07-28: requests become input_required results
		onMsg = br.wrap(onMsg, fc.op)
		var lv string
		_ = json.Unmarshal(p.meta(mcp.MetaKeyLogLevel), &lv)
		onMsg = logGate(onMsg, lv)
	} else {
		onMsg = logGate(onMsg, fc.session.level())
	}
	if resuming {
		raw, timing, err = s.resume(ctx, state, responses, &preq, user, br.caps, &release, onMsg)
	} else {
		var extra nats.Header
		if fc.session == nil && fc.op == proto.OpToolsCall {
			extra = paramHeaders(r.Header)
		}
		if s.passthrough.Load() {
			extra = withAuthorization(extra, passAuthorization(identityOf(r.Context()), r.Header))
		}
		raw, timing, err = s.roundTrip(ctx, &preq, fc.op, stamps, extra, onMsg)
	}
	var sp *suspended
	if errors.As(err, &sp) {
		held := release
		release = nil
		raw, timing, err = s.suspend(sp, br.asked, user, held), nil, nil
	}
	if !mayAnswer() {
		span.Fail(codeRequestCancelled, "cancelled by the client")
		out.noAnswer()
		return
	}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			if r.Context().Err() != nil {
				return // the client went away: nobody to answer
			}
			je = &jsonrpc.Error{Code: codeRequestCancelled, Message: "request cancelled"}
		}
		code = je.Code
		span.Fail(je.Code, je.Message)
		s.writeResponse(out, fc.protocol, m.ID, nil, je)
		return
	}
	if timing != nil {
		hop.Set(timing, hop.EdgeOut)
		add := map[string]any{hop.MetaKey: hop.Relative(hop.Stamps(timing))}
		if fc.session == nil {
			add[mcp.MetaKeyServerInfo] = s.impl
		}
		raw = mergeMeta(raw, add)
	} else if fc.session == nil {
		// The router builds list pages itself, without _meta; a call's
		// result is the upstream's and may have one.
		raw = s.withServerInfo(raw, fc.op == proto.OpToolsList)
	}
	if fc.session == nil {
		raw = upgrade2026(raw, fc.op)
	} else {
		raw = downgrade2025(raw)
	}
	code, written = 0, raw
	span.CheckResult(m.Method, raw)
	s.writeResponse(out, fc.protocol, m.ID, raw, nil)
}

// codeRequestCancelled answers a call cancelled by the gateway (its
// client session ended); a call the client cancelled gets no response
// (fastOut.noAnswer). Metrics and the audit count both under it.
const codeRequestCancelled = -32800

var emptyParams = json.RawMessage("{}")

// withServerInfo adds the edge's serverInfo to a 2026-era result's _meta
// (SEP-2575) unless the result has one already (the upstream's), as the
// SDK does for its own results (annotateServerInfo). The result's bytes are
// kept: the member is spliced in after the opening brace of the result's
// _meta object, or a _meta member after the result's own opening brace; a
// _meta that is null or not an object is replaced. noMeta says the result
// is known to have no _meta. A result that is not a JSON object is returned
// as it is; one that starts like an object but is not valid JSON may come
// back with the member spliced in, no more valid than it was: only a result
// that may have a _meta is checked with json.Valid, a full scan that costs
// more than the splice (a result without _meta must not pay it).
func (s *Service) withServerInfo(raw []byte, noMeta bool) []byte {
	start := len(raw) - len(bytes.TrimLeft(raw, " \t\r\n"))
	if start == len(raw) || raw[start] != '{' {
		return raw
	}
	if noMeta || !mayHaveMeta(raw) {
		return spliceMember(raw, start+1, s.serverInfoMeta)
	}
	if !json.Valid(raw) {
		return raw
	}
	var meta []byte
	jsonscan.Members(raw[start:], func(key, val []byte) {
		if jsonscan.KeyIs(key, "_meta") {
			meta = val // the last one, as decoders keep
		}
	})
	if meta == nil { // "_meta" only inside a member's value
		return spliceMember(raw, start+1, s.serverInfoMeta)
	}
	at := cap(raw) - cap(meta) // meta's offset in raw: Members slices raw
	member := s.serverInfoMeta[len(`"_meta":{`) : len(s.serverInfoMeta)-1]
	if meta[0] != '{' {
		out := make([]byte, 0, len(raw)+len(member)+2)
		out = append(append(append(out, raw[:at]...), '{'), member...)
		return append(append(out, '}'), raw[at+len(meta):]...)
	}
	has := false
	jsonscan.Members(meta, func(key, _ []byte) {
		has = has || jsonscan.KeyIs(key, mcp.MetaKeyServerInfo)
	})
	if has {
		return raw
	}
	return spliceMember(raw, at+1, member)
}

// mayHaveMeta reports whether raw may have a member named _meta. Besides
// "_meta" as written, that is a key with any of its characters escaped
// ("\u005fmeta"): spliced in after the opening brace, the edge's _meta would
// come before the upstream's, and decoders keep the last, so the result
// would go out without the edge's serverInfo (and with the upstream's _meta
// null when it was). Those escapes are \u005f, \u006d, \u0065, \u0074 and
// \u0061, all \u005x-\u007x; encoders do not escape letters, so results
// rarely have one.
func mayHaveMeta(raw []byte) bool {
	if bytes.Contains(raw, []byte(`"_meta"`)) {
		return true
	}
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u00`))
		if j < 0 {
			return false
		}
		i += j + len(`\u00`)
		if i < len(raw) && raw[i] >= '5' && raw[i] <= '7' {
			return true
		}
	}
}

// spliceMember returns raw with the object member (key and value) inserted
// at i, just after an object's opening brace, with a comma when the object
// has members.
func spliceMember(raw []byte, i int, member []byte) []byte {
	rest := bytes.TrimLeft(raw[i:], " \t\r\n")
	out := make([]byte, 0, len(raw)+len(member)+1)
	out = append(append(out, raw[:i]...), member...)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[i:]...)
}

// writeResponse writes one JSON-RPC response (result or error) the way the
// SDK's streamable handler would: an SSE "message" event, or
// application/json when the edge is configured for JSON responses; in the
// 2026-07-28 era the errors SEP-2575 gives an HTTP status are plain JSON
// with that status.
//
// Once upstream messages started the event stream (out.started), the
// response is its last event.
func (s *Service) writeResponse(out *fastOut, protocol string, id json.RawMessage, result []byte, je *jsonrpc.Error) {
	w := out.w
	status, sse := http.StatusOK, !s.cfg.JSONResponse
	if je != nil && protocol >= protocol2026 && !out.started {
		if st := errorStatus2026(je.Code); st != 0 {
			status, sse = st, false
		}
	}
	// The result goes out as its own Write: a big list page is not copied
	// into the envelope.
	head := make([]byte, 0, 160)
	if sse {
		head = append(head, "event: message\ndata: "...)
	}
	head = append(head, `{"jsonrpc":"2.0","id":`...)
	head = append(head, id...)
	if je != nil {
		head = append(head, `,"error":{"code":`...)
		head = strconv.AppendInt(head, je.Code, 10)
		head = append(head, `,"message":`...)
		msg, _ := json.Marshal(je.Message)
		head = append(head, msg...)
		if len(je.Data) > 0 {
			head = append(head, `,"data":`...)
			head = appendOneLine(head, je.Data)
		}
		head = append(head, '}')
		result = nil
	} else {
		head = append(head, `,"result":`...)
		if sse && hasNewline(result) {
			result = appendOneLine(nil, result)
		}
	}
	tail := "}"
	if sse {
		tail = "}\n\n"
	}
	if out.res != nil && out.last(head, result, tail) {
		return
	}
	if out.res != nil {
		// A primed stream stores the response, so it is built whole.
		msg := append(append(append(make([]byte, 0, len(head)+len(result)+1), head[len("event: message\ndata: "):]...), result...), '}')
		out.write(msg, true)
		return
	}
	if out.started {
		if _, err := w.Write(head); err == nil && len(result) > 0 {
			_, _ = w.Write(result)
		}
		_, _ = io.WriteString(w, tail)
		out.flush()
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	if sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(head)+len(result)+len(tail)))
	w.WriteHeader(status)
	if _, err := w.Write(head); err == nil && len(result) > 0 {
		_, err = w.Write(result)
	}
	_, _ = io.WriteString(w, tail)
	// Out now: the handler's deferred work (audit, metrics, log, span)
	// must not hold the response, which net/http would send only once
	// the handler returns.
	out.flush()
}

func hasNewline(b []byte) bool {
	return bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0
}

// errorStatus2026 is the HTTP status SEP-2575 requires for a JSON-RPC
// error in the 2026-07-28 era (0: none, the error rides a 200), as the
// SDK's extractErrorStatus maps it.
func errorStatus2026(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities,
		mcp.CodeHeaderMismatch:
		return http.StatusBadRequest
	}
	return 0
}

// appendOneLine appends JSON value v, compacted when it spans lines (an
// SSE data field is one line).
func appendOneLine(dst, v []byte) []byte {
	if !hasNewline(v) {
		return append(dst, v...)
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// idKey is the in-flight table key of a raw JSON-RPC id, equal for ids
// the SDK takes as equal: a number by its integer value (1, 1.0 and 1e0
// are one id), a string by its value however it is escaped.
func idKey(raw json.RawMessage) string {
	if raw[0] == '"' {
		return "s" + jsonscan.Unquote(raw)
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return "n" + strconv.FormatInt(n, 10)
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	return "n" + strconv.FormatInt(int64(f), 10)
}

// maxDepth is the deepest nesting the SDK's decoder accepts; deeper
// params go to the SDK, which refuses them.
const maxDepth = 1000

// tooDeep reports whether valid JSON v nests arrays and objects close to
// maxDepth (the envelope adds a level or two).
func tooDeep(v []byte) bool {
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth >= maxDepth-2 {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// validID reports whether a raw JSON-RPC id is a string or a number, the
// ids of a request (null and absent ids go to the SDK).
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	c := id[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// plainPOST reports whether r passes the SDK handler's transport checks:
// JSON content, an Accept of both JSON and SSE, and the localhost DNS
// rebinding rule (a loopback listener only answers loopback Host names).
func plainPOST(r *http.Request) bool {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
		if isLoopback(la.String()) && !isLoopback(r.Host) {
			return false
		}
	}
	return true
}

// acceptsBoth is the SDK's Accept rule for POST: application/json and
// text/event-stream, or their wildcards.
func acceptsBoth(values []string) bool {
	var jsonOK, sseOK bool
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK && sseOK
}

// isLoopback reports whether a host or host:port names the loopback
// interface, by the SDK's rule (go-sdk internal/util.IsLoopback).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
