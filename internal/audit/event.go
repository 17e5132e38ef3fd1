package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Outcome values that are not an error code. Any other outcome is the
// JSON-RPC error code of the reply, in decimal ("-32602", "-32060").
const (
	// OutcomeOK is a successful reply.
	OutcomeOK = "ok"
	// OutcomeToolError is a tools/call whose result has isError set: the
	// call reached the tool, which failed (a result, not a JSON-RPC error).
	OutcomeToolError = "tool_error"
	// OutcomeError is a query-only value matching every outcome but ok.
	OutcomeError = "error"
)

// ErrorOutcome returns the outcome of a reply with JSON-RPC error code.
func ErrorOutcome(code int64) string { return strconv.FormatInt(code, 10) }

// Event is one audit record: one per MCP request the edge answered.
//
// Tenant, Method and Outcome are always set by a well-behaved recorder;
// Upstream and Name are empty for requests that no single upstream
// served (tools/list, initialize). Name is the tool or prompt name as the
// upstream knows it (without the "<upstream>__" prefix) or the resource
// URI. Arguments and Result are raw JSON, set only for tenants that record
// them ([TenantPolicy]); the [Publisher] redacts them before publishing.
// No field holds request headers: Authorization and API keys never reach
// an Event, and the Publisher scrubs secret-shaped strings from Name,
// Principal, Arguments and Result ([ScrubString]).
type Event struct {
	// Time is when the request arrived at the edge.
	Time      time.Time `json:"time"`
	Tenant    string    `json:"tenant"`
	Principal string    `json:"principal,omitempty"`
	Method    string    `json:"method"`
	Upstream  string    `json:"upstream,omitempty"`
	Name      string    `json:"name,omitempty"`
	// Outcome is OutcomeOK, OutcomeToolError or ErrorOutcome(ErrorCode).
	Outcome   string `json:"outcome"`
	ErrorCode int64  `json:"error_code,omitempty"`
	// Duration is the edge's total time for the request; UpstreamDuration
	// the part the upstream call took as the worker measured it (0 when
	// no upstream was called).
	Duration         time.Duration `json:"duration_ns"`
	UpstreamDuration time.Duration `json:"upstream_duration_ns,omitempty"`
	// RequestBytes and ResponseBytes are the JSON-RPC message sizes in
	// bytes as the client sent and received them.
	RequestBytes  int64 `json:"request_bytes"`
	ResponseBytes int64 `json:"response_bytes"`
	// TraceID is the W3C trace id (32 hex digits), if any.
	TraceID string `json:"trace_id,omitempty"`
	// EdgeID is the edge that answered.
	EdgeID string `json:"edge_id,omitempty"`
	// Session is true when the request belonged to an MCP session.
	Session   bool            `json:"session"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// wireEvent is Event on the wire: msgpack with short keys and integer
// times (compact; an Event costs about 150 bytes without arguments).
type wireEvent struct {
	Time          int64  `msgpack:"t"`
	Tenant        string `msgpack:"tn,omitempty"`
	Principal     string `msgpack:"p,omitempty"`
	Method        string `msgpack:"m,omitempty"`
	Upstream      string `msgpack:"u,omitempty"`
	Name          string `msgpack:"n,omitempty"`
	Outcome       string `msgpack:"o,omitempty"`
	ErrorCode     int64  `msgpack:"ec,omitempty"`
	Duration      int64  `msgpack:"d,omitempty"`
	UpstreamDur   int64  `msgpack:"ud,omitempty"`
	RequestBytes  int64  `msgpack:"rq,omitempty"`
	ResponseBytes int64  `msgpack:"rs,omitempty"`
	TraceID       string `msgpack:"tr,omitempty"`
	EdgeID        string `msgpack:"e,omitempty"`
	Session       bool   `msgpack:"s,omitempty"`
	Arguments     []byte `msgpack:"a,omitempty"`
	Result        []byte `msgpack:"r,omitempty"`
}

// MaxEventBytes bounds an encoded event; the Publisher drops the
// arguments and result of a bigger one rather than the event.
const MaxEventBytes = 256 << 10

// AppendEncode appends the msgpack encoding of ev to dst. The error is
// always nil today; it is kept so that a field that cannot be encoded
// can be refused later without changing callers.
func AppendEncode(dst []byte, ev *Event) ([]byte, error) {
	w := wireEvent{
		Tenant: ev.Tenant, Principal: ev.Principal, Method: ev.Method,
		Upstream: ev.Upstream, Name: ev.Name, Outcome: ev.Outcome,
		ErrorCode: ev.ErrorCode, Duration: int64(ev.Duration), UpstreamDur: int64(ev.UpstreamDuration),
		RequestBytes: ev.RequestBytes, ResponseBytes: ev.ResponseBytes,
		TraceID: ev.TraceID, EdgeID: ev.EdgeID, Session: ev.Session,
		Arguments: ev.Arguments, Result: ev.Result,
	}
	if !ev.Time.IsZero() {
		w.Time = ev.Time.UnixNano()
	}
	return appendWire(dst, &w), nil
}

// ErrDecode is returned by Decode for bytes that are not an event.
var ErrDecode = errors.New("audit: malformed event")

// Decode decodes an event encoded by AppendEncode. Strings and byte
// slices are copied, so data may be reused. Unknown keys are skipped;
// malformed input yields an error wrapping ErrDecode, never a panic, and
// allocation is bounded by len(data). Arguments and Result are returned
// only when they hold valid JSON (they are rendered as JSON).
func Decode(data []byte, ev *Event) error {
	var w wireEvent
	if err := proto.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	*ev = Event{
		Tenant: w.Tenant, Principal: w.Principal, Method: w.Method,
		Upstream: w.Upstream, Name: w.Name, Outcome: w.Outcome,
		ErrorCode: w.ErrorCode, Duration: time.Duration(w.Duration), UpstreamDuration: time.Duration(w.UpstreamDur),
		RequestBytes: w.RequestBytes, ResponseBytes: w.ResponseBytes,
		TraceID: w.TraceID, EdgeID: w.EdgeID, Session: w.Session,
	}
	if w.Time != 0 {
		ev.Time = time.Unix(0, w.Time).UTC()
	}
	if len(w.Arguments) > 0 && json.Valid(w.Arguments) {
		ev.Arguments = w.Arguments
	}
	if len(w.Result) > 0 && json.Valid(w.Result) {
		ev.Result = w.Result
	}
	return nil
}

// SubjectPrefix is the first tokens of every audit subject.
const SubjectPrefix = proto.SubjAudit

// SubjectAll matches every audit subject; the stream binds it.
const SubjectAll = SubjectPrefix + ".>"

// Subject returns the subject ev is published on:
//
//	switchyard.v1.audit.<tenant>.<upstream>.<outcome>.<name bucket>
//
// Each token is escaped with [EscapeToken]; the name bucket is
// [NameBucket](ev.Name). Tenant, upstream and outcome make searches by
// them subject filters; the name bucket narrows a search by tool to
// about 1/4096 of the other names without an unbounded subject count.
func Subject(ev *Event) string {
	var b strings.Builder
	b.Grow(len(SubjectPrefix) + len(ev.Tenant) + len(ev.Upstream) + len(ev.Outcome) + 8)
	b.WriteString(SubjectPrefix)
	b.WriteByte('.')
	appendEscaped(&b, ev.Tenant)
	b.WriteByte('.')
	appendEscaped(&b, ev.Upstream)
	b.WriteByte('.')
	appendEscaped(&b, ev.Outcome)
	b.WriteByte('.')
	b.WriteString(NameBucket(ev.Name))
	return b.String()
}

// FilterSubject returns the subject filter for a search: the given
// tokens, "*" for the empty ones. name filters by its bucket only.
func FilterSubject(tenant, upstream, outcome, name string) string {
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return EscapeToken(s)
	}
	nb := "*"
	if name != "" {
		nb = NameBucket(name)
	}
	if tenant == "" && upstream == "" && outcome == "" && name == "" {
		return SubjectAll
	}
	return SubjectPrefix + "." + tok(tenant) + "." + tok(upstream) + "." + tok(outcome) + "." + nb
}

// NameBucket returns the subject token for a tool, prompt or resource
// name: "_" for none, else three hex digits of its FNV-1a hash (4096
// buckets: a tenant's tools rarely share one, and the subject count stays
// bounded whatever names clients send).
func NameBucket(name string) string {
	if name == "" {
		return "_"
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	const hexd = "0123456789abcdef"
	v := h.Sum32()
	return string([]byte{hexd[v>>8&0xf], hexd[v>>4&0xf], hexd[v&0xf]})
}

// EscapeToken returns s as a subject token that cannot change a
// subject's shape: letters, digits, '-' and '_' stay, every other byte
// becomes %XX, and the empty string becomes "%". Slugs (tenant and
// upstream names) and outcomes come through unchanged. The mapping is
// injective, so distinct values never share a token.
func EscapeToken(s string) string {
	var b strings.Builder
	appendEscaped(&b, s)
	return b.String()
}

func appendEscaped(b *strings.Builder, s string) {
	if s == "" {
		b.WriteByte('%')
		return
	}
	const hexd = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&0xf])
	}
}
