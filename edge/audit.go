package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The audit trail (docs/audit.md): the edge records one audit.Event per
// MCP request it answers, fast path and SDK path alike, on the
// audit.Publisher it runs (Config.Audit). Recording never blocks or fails
// the request: the Publisher queues the event and drops it, counted, when
// its buffer is full.

// callNote is what serving one request learns for its audit event beyond
// what the request and its answer show: the upstream that served it and
// the worker's time on it (proto.Reply), and the request's trace id. It
// travels in the request's context (withNote), and only while auditing is
// on.
type callNote struct {
	upstream string
	service  time.Duration
	traceID  string
}

type noteKey struct{}

func withNote(ctx context.Context, n *callNote) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// noteOf returns ctx's callNote, or nil.
func noteOf(ctx context.Context) *callNote {
	n, _ := ctx.Value(noteKey{}).(*callNote)
	return n
}

// auditRecord is one answered request, as recordAudit turns it into an
// event.
type auditRecord struct {
	start             time.Time
	tenant, principal string
	method            string
	view              string // the endpoint's upstream, "" for the federated one
	name              string // the tool or prompt name the client sent, or the resource URI
	code              int64  // the JSON-RPC error code answered, 0 for a result
	params            []byte // the request's params as raw JSON
	arguments         []byte // params.arguments (tools/call, prompts/get), nil if none
	result            []byte // the result sent, raw JSON
	session           bool
	note              *callNote
}

// recordAudit builds the request's event and hands it to the publisher.
// Arguments and result are copied only for a tenant that records them.
func (s *Service) recordAudit(a *auditRecord) {
	ev := audit.Event{
		Time: a.start, Tenant: a.tenant, Principal: a.principal, Method: a.method,
		Upstream: a.view, Name: a.name, ErrorCode: a.code,
		Duration:     time.Since(a.start),
		RequestBytes: int64(len(a.params)), ResponseBytes: int64(len(a.result)),
		EdgeID: s.cfg.ID, Session: a.session,
	}
	if n := a.note; n != nil {
		if n.upstream != "" {
			ev.Upstream = n.upstream
		}
		ev.UpstreamDuration, ev.TraceID = n.service, n.traceID
	}
	if a.view == "" && (a.method == "tools/call" || a.method == "prompts/get") {
		// A federated name, "<upstream><sep><name>" as the router mangled
		// it: the upstream is the reply's or, when no worker replied (a
		// limit, a timeout, an unknown tool), the catalog upstream the
		// name begins with.
		if ev.Upstream != "" {
			if rest, ok := strings.CutPrefix(a.name, ev.Upstream+s.cfg.NameSeparator); ok {
				ev.Name = rest
			}
		} else if up, rest, ok := strings.Cut(a.name, s.cfg.NameSeparator); ok && s.inCatalog(up) {
			ev.Upstream, ev.Name = up, rest
		}
	}
	ev.Method, ev.Name = clip(ev.Method), clip(ev.Name)
	switch {
	case a.code != 0:
		ev.Outcome = audit.ErrorOutcome(a.code)
	case a.method == "tools/call" && toolError(a.result):
		ev.Outcome = audit.OutcomeToolError
	default:
		ev.Outcome = audit.OutcomeOK
	}
	// Arguments or a result bigger than an event can be are never
	// published (the publisher drops them): not copied either.
	args, result := s.audit.Wants(a.tenant)
	if args && a.arguments != nil && len(a.arguments) <= audit.MaxEventBytes {
		ev.Arguments = bytes.Clone(a.arguments)
	}
	if result && a.code == 0 && a.result != nil && len(a.result) <= audit.MaxEventBytes {
		ev.Result = bytes.Clone(a.result)
	}
	s.audit.Record(&ev)
}

// maxAuditString bounds the method and name an event keeps: both come
// from the client (an unknown method, a tool name no upstream has), and an
// event must stay far below the stream's message size.
const maxAuditString = 1024

// clip cuts s to maxAuditString bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxAuditString {
		return s
	}
	return strings.ToValidUTF8(s[:maxAuditString], "")
}

// inCatalog reports whether name is a catalog upstream.
func (s *Service) inCatalog(name string) bool {
	s.mu.Lock()
	_, ok := s.upstreams[name]
	s.mu.Unlock()
	return ok
}

// toolError reports whether a tools/call result has isError true.
func toolError(result []byte) bool {
	isErr := false
	jsonscan.Members(result, func(k, v []byte) {
		if jsonscan.KeyIs(k, "isError") {
			isErr = string(v) == "true"
		}
	})
	return isErr
}

// argumentsOf returns the arguments member of a tools/call or prompts/get
// request's params (raw JSON), or nil.
func argumentsOf(method string, params []byte) []byte {
	if method != "tools/call" && method != "prompts/get" {
		return nil
	}
	var args []byte
	jsonscan.Members(params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "arguments") {
			args = v
		}
	})
	return args
}

// headerTraceID returns the trace id of a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when there is none or it is
// malformed: the client's trace, recorded even when the edge does not
// trace.
func headerTraceID(h http.Header) string { return traceparentID(h.Get("Traceparent")) }

// traceparentID returns the trace id of a W3C traceparent value, or "".
func traceparentID(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	id := tp[3:35]
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	if id == "00000000000000000000000000000000" {
		return ""
	}
	return id
}

// auditSafely is auditSDK for metered, which runs on the SDK's handler
// goroutine where a panic would end the process: recording must never
// fail a request, let alone the edge, so a defect in it is logged and the
// event is lost.
func (s *Service) auditSafely(v *view, method string, req mcp.Request, res mcp.Result, code int64, start time.Time, note *callNote) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("audit event not recorded", proto.LogMethod, method, proto.LogErr, fmt.Sprint(r))
		}
	}()
	s.auditSDK(v, method, req, res, code, start, note)
}

// auditSDK records a request the SDK path answered (metered).
func (s *Service) auditSDK(v *view, method string, req mcp.Request, res mcp.Result, code int64, start time.Time, note *callNote) {
	a := auditRecord{start: start, tenant: v.tenant, method: method, view: v.name, code: code, note: note}
	if method == "subscriptions/listen" {
		// A listen stream lasts as long as the client keeps it and opens
		// upstream subscriptions for URIs of any upstream: no single
		// upstream or upstream time is its own.
		note.upstream, note.service = "", 0
	}
	p := paramsOf(req)
	if p != nil && note.traceID == "" {
		tp, _ := p.GetMeta()[trace.KeyTraceparent].(string)
		note.traceID = traceparentID(tp)
	}
	if ex := req.GetExtra(); ex != nil {
		if ex.TokenInfo != nil {
			a.principal, _ = ex.TokenInfo.Extra[principalExtra].(string)
		}
		if note.traceID == "" && ex.Header != nil {
			note.traceID = headerTraceID(ex.Header)
		}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		a.session = ss.ID() != "" || s.sessions.of(ss) != nil
	}
	if p != nil {
		a.params, _ = json.Marshal(p)
		a.name = paramsName(p)
		a.arguments = argumentsOf(method, a.params)
	}
	switch r := res.(type) {
	case nil:
	case *rawResult:
		a.result = r.raw
	default:
		a.result, _ = json.Marshal(r)
	}
	s.recordAudit(&a)
}

// paramsOf returns req's params, or nil when it has none: a request sent
// without params holds a nil pointer of its params type, which a nil
// check of the interface does not catch.
func paramsOf(req mcp.Request) mcp.Params {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p
}

// paramsName is what a request names: a tool or prompt name, or a
// resource URI ("" for none).
func paramsName(p mcp.Params) string {
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		return p.Name
	case *mcp.CallToolParams:
		return p.Name
	case *mcp.GetPromptParams:
		return p.Name
	case *mcp.ReadResourceParams:
		return p.URI
	case *mcp.SubscribeParams:
		return p.URI
	case *mcp.UnsubscribeParams:
		return p.URI
	}
	return ""
}

// The SDK answers some requests itself, before any handler runs: params
// that do not decode into the method's params type (-32602), a 2026-07-28
// request whose Mcp-Method or Mcp-Name header does not match its body
// (-32020). metered never sees them, so serve watches the SDK's answer to
// each request it hands over: metered marks the request as recorded
// through a header of the request (the SDK passes the request's header to
// handlers, not its context), and a request still unmarked when the SDK
// is done is recorded (metrics and audit, as refused) from the JSON-RPC
// error code the SDK wrote.

// auditTokenHeader carries a request's sdkAudits token to metered. serve
// sets or deletes it on every request it hands to the SDK, so a client
// cannot send one of its own.
const auditTokenHeader = "Sy-Audit-Token"

// watchSDK prepares r for the SDK: it returns the writer to hand the SDK
// and a function to call once the SDK is done, which records the request
// if no handler did. Only single requests are watched (a batch, a
// notification or a response is not one request).
func (s *Service) watchSDK(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg) (http.ResponseWriter, func()) {
	if m == nil || m.Method == "" || !validID(m.ID) || strings.HasPrefix(m.Method, "notifications/") {
		r.Header.Del(auditTokenHeader)
		return w, func() {}
	}
	start := time.Now()
	tok := strconv.FormatUint(auditTokens.Add(1), 36)
	mark := new(atomic.Bool)
	s.sdkAudits.Store(tok, mark)
	r.Header.Set(auditTokenHeader, tok)
	sw := &sniffWriter{ResponseWriter: w}
	return sw, func() {
		s.sdkAudits.Delete(tok)
		if mark.Load() {
			return
		}
		code, ok := errorCodeIn(sw.head)
		if !ok {
			return // nothing the SDK wrote reads as an error answer
		}
		s.met.Request(m.Method, code, start)
		if s.audit == nil {
			return
		}
		a := auditRecord{start: start, tenant: v.tenant, method: m.Method, view: v.name, code: code,
			params: m.Params, session: r.Header.Get("Mcp-Session-Id") != "", note: &callNote{traceID: headerTraceID(r.Header)}}
		if id := identityOf(r.Context()); id != nil {
			a.principal = id.principal
		}
		if m.Method == "tools/call" || m.Method == "prompts/get" {
			a.name = m.params().Name
		}
		s.recordAudit(&a)
	}
}

// auditTokens numbers watched requests.
var auditTokens atomic.Uint64

// markAudited tells watchSDK that a handler recorded the request whose
// header h is.
func (s *Service) markAudited(h http.Header) {
	if tok := h.Get(auditTokenHeader); tok != "" {
		if mark, ok := s.sdkAudits.Load(tok); ok {
			mark.(*atomic.Bool).Store(true)
		}
	}
}

// sniffHead bounds what sniffWriter keeps of an answer: an error
// response's code is near its start.
const sniffHead = 512

// sniffWriter keeps the first bytes the SDK writes.
type sniffWriter struct {
	http.ResponseWriter
	head []byte
}

func (w *sniffWriter) Write(p []byte) (int, error) {
	if n := sniffHead - len(w.head); n > 0 {
		w.head = append(w.head, p[:min(n, len(p))]...)
	}
	return w.ResponseWriter.Write(p)
}

func (w *sniffWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sniffWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errorCodeIn finds the code of a JSON-RPC error response in what the SDK
// wrote (a JSON body or an SSE event's data): the integer after
// `"error":{"code":`.
func errorCodeIn(head []byte) (int64, bool) {
	i := bytes.Index(head, []byte(`"error":{"code":`))
	if i < 0 {
		return 0, false
	}
	rest := head[i+len(`"error":{"code":`):]
	end := 0
	for end < len(rest) && (rest[end] == '-' || rest[end] >= '0' && rest[end] <= '9') {
		end++
	}
	code, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return code, err == nil && code != 0
}
