package trace

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// W3C trace context keys: the NATS header names (nats.Header is
// case-sensitive; these are always written lowercase) and the MCP
// params._meta keys (SEP-414: unprefixed, an exception to _meta's DNS
// prefixes).
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// Canonical forms of the keys in an http.Header, looked up directly so
// that no lookup canonicalizes (allocates) a key.
const (
	httpTraceparent = "Traceparent"
	httpTracestate  = "Tracestate"
)

// propagator is W3C Trace Context only: baggage is not carried (a client's
// baggage would cross every hop and reach the upstreams unchecked).
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// HeaderCarrier adapts a nats.Header to a propagation.TextMapCarrier.
// Get reads the first value of the exact key; Set replaces the key's
// values. Not safe for concurrent use (nor is a nats.Header).
type HeaderCarrier nats.Header

// Get returns the first value of key, or "".
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set sets key to the single value v.
func (c HeaderCarrier) Set(key, v string) { c[key] = []string{v} }

// Keys returns the header's keys.
func (c HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Inject writes the trace context of ctx's span into h (traceparent, and
// tracestate if the span has one; a stale tracestate in h is removed) and
// returns h, allocating it when nil. Without a valid span context in ctx
// it returns h untouched and allocates nothing, so a role whose tracing is
// off adds no headers. The returned header is the one to publish.
func Inject(ctx context.Context, h nats.Header) nats.Header {
	if !oteltrace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = make(nats.Header, 2)
	}
	delete(h, KeyTracestate)
	propagator.Inject(ctx, HeaderCarrier(h))
	return h
}

// Extract returns ctx with the remote span context carried in h, or ctx
// itself (allocating nothing) when h has no valid traceparent.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h[KeyTraceparent]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}

// httpCarrier reads an http.Header (canonical keys) without
// canonicalizing the propagator's lowercase keys.
type httpCarrier http.Header

func (c httpCarrier) Get(key string) string {
	var v []string
	switch key {
	case KeyTraceparent:
		v = c[httpTraceparent]
	case KeyTracestate:
		v = c[httpTracestate]
	default:
		return http.Header(c).Get(key)
	}
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (c httpCarrier) Set(key, v string) { http.Header(c).Set(key, v) }

func (c httpCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// ExtractHTTP returns ctx with the remote span context of an HTTP
// request's traceparent/tracestate headers, or ctx itself when there is
// none (allocating nothing).
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h[httpTraceparent]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, httpCarrier(h))
}

// Meta is an MCP request's params._meta, in the form a role has it: the
// raw _meta object (the edge's fast path), the whole raw params object
// (the edge's SDK path, which marshals them anyway), or the decoded map.
// The first set field is read, only when tracing is on. The zero Meta is
// empty.
type Meta struct {
	Raw    json.RawMessage // the _meta object
	Params json.RawMessage // the params object holding _meta
	Map    map[string]any  // the decoded _meta
}

// metaCarrier holds the trace context keys read from a Meta.
type metaCarrier struct{ parent, state string }

func (c *metaCarrier) Get(key string) string {
	switch key {
	case KeyTraceparent:
		return c.parent
	case KeyTracestate:
		return c.state
	}
	return ""
}
func (c *metaCarrier) Set(string, string) {}
func (c *metaCarrier) Keys() []string     { return []string{KeyTraceparent, KeyTracestate} }

// read fills c from m; it reports whether m has a traceparent string.
func (c *metaCarrier) read(m Meta) bool {
	if m.Map != nil {
		c.parent, _ = m.Map[KeyTraceparent].(string)
		c.state, _ = m.Map[KeyTracestate].(string)
		return c.parent != ""
	}
	raw := m.Raw
	if len(raw) == 0 {
		raw = m.Params
	}
	// A cheap test first: most requests carry no trace context.
	if len(raw) == 0 || !bytes.Contains(raw, []byte(KeyTraceparent)) || !json.Valid(raw) {
		return false
	}
	if len(m.Raw) == 0 {
		raw = nil
		jsonscan.Members(m.Params, func(k, v []byte) {
			if jsonscan.KeyIs(k, "_meta") {
				raw = v
			}
		})
	}
	jsonscan.Members(raw, func(k, v []byte) {
		if len(v) == 0 || v[0] != '"' {
			return
		}
		switch {
		case jsonscan.KeyIs(k, KeyTraceparent):
			c.parent = jsonscan.Unquote(v)
		case jsonscan.KeyIs(k, KeyTracestate):
			c.state = jsonscan.Unquote(v)
		}
	})
	return c.parent != ""
}

// ExtractMeta returns ctx with the remote span context of an MCP
// request's params._meta (SEP-414 keys traceparent and tracestate), or
// ctx itself when it has none.
func ExtractMeta(ctx context.Context, m Meta) context.Context {
	var c metaCarrier
	if !c.read(m) {
		return ctx
	}
	return propagator.Extract(ctx, &c)
}

// InjectMetaMap sets the SEP-414 trace context keys of ctx's span in an
// outgoing request's _meta map (replacing the client's) and returns it,
// allocating it when nil; without a span in ctx it returns m untouched.
// For the worker's SDK path (a Params' Meta).
func InjectMetaMap(ctx context.Context, m map[string]any) map[string]any {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return m
	}
	if m == nil {
		m = make(map[string]any, 2)
	}
	m[KeyTraceparent] = traceparent(sc)
	if ts := sc.TraceState().String(); ts != "" {
		m[KeyTracestate] = ts
	} else {
		delete(m, KeyTracestate)
	}
	return m
}

// InjectMetaJSON returns the raw _meta object meta (nil or empty for none)
// with the SEP-414 trace context keys of ctx's span, replacing the
// client's; the other members are kept as they were, in order. Without a
// span in ctx, or when meta is not valid JSON, it returns meta untouched.
// For a request's whole _meta object.
func InjectMetaJSON(ctx context.Context, meta json.RawMessage) json.RawMessage {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() || (len(meta) > 0 && !json.Valid(meta)) {
		return meta
	}
	out := make([]byte, 1, len(meta)+128)
	out[0] = '{'
	out = appendMembers(out, sc, meta)
	return append(out, '}')
}

// InjectMetaMembers is [InjectMetaJSON] for the members of a _meta object
// without its braces (`"a":1,"b":2`, or empty), as the worker's raw path
// holds them (rawParams.meta); it returns members in the same form.
func InjectMetaMembers(ctx context.Context, members []byte) []byte {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return members
	}
	obj := make([]byte, 0, len(members)+2)
	obj = append(append(append(obj, '{'), members...), '}')
	if !json.Valid(obj) {
		return members
	}
	return appendMembers(make([]byte, 0, len(members)+128), sc, obj)
}

// appendMembers appends the members of the object obj (nil for none) but
// the trace context keys, then sc's, to out.
func appendMembers(out []byte, sc oteltrace.SpanContext, obj []byte) []byte {
	jsonscan.Members(obj, func(k, v []byte) {
		if jsonscan.KeyIs(k, KeyTraceparent) || jsonscan.KeyIs(k, KeyTracestate) {
			return
		}
		out = append(append(append(append(out, k...), ':'), v...), ',')
	})
	out = append(out, `"traceparent":"`...)
	out = append(out, traceparent(sc)...)
	out = append(out, '"')
	if ts := sc.TraceState().String(); ts != "" {
		// A tracestate is printable ASCII: Go quoting is JSON quoting.
		out = append(out, `,"tracestate":`...)
		out = strconv.AppendQuote(out, ts)
	}
	return out
}

// Copy copies the trace context keys of src into dst (allocating dst
// when nil and there is something to copy) and returns dst; src without
// a traceparent gives dst untouched, without allocating. For a hop that
// builds a message from one it received, after [Provider.Inject] put its
// own span in src (the router's fan-out).
func Copy(dst, src nats.Header) nats.Header {
	tp := src[KeyTraceparent]
	if len(tp) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(nats.Header, 2)
	}
	dst[KeyTraceparent] = tp
	if ts := src[KeyTracestate]; len(ts) > 0 {
		dst[KeyTracestate] = ts
	} else {
		delete(dst, KeyTracestate)
	}
	return dst
}

// traceparent formats sc as a W3C traceparent value (version 00, only
// the sampled and random flags kept, as propagation.TraceContext writes
// it).
func traceparent(sc oteltrace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := [1]byte{byte(sc.TraceFlags() & (oteltrace.FlagsSampled | oteltrace.FlagsRandom))}
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], flags[:])
	return string(b[:])
}

// Inject is the package [Inject] when p is on; off, it returns h at once
// (not even looking into ctx, whose value chain may be long). Roles call
// this form.
func (p *Provider) Inject(ctx context.Context, h nats.Header) nats.Header {
	if !p.Enabled() {
		return h
	}
	return Inject(ctx, h)
}

// InjectMetaJSON is the package [InjectMetaJSON] when p is on; off, it
// returns meta at once.
func (p *Provider) InjectMetaJSON(ctx context.Context, meta json.RawMessage) json.RawMessage {
	if !p.Enabled() {
		return meta
	}
	return InjectMetaJSON(ctx, meta)
}

// InjectMetaMap is the package [InjectMetaMap] when p is on; off, it
// returns m at once.
func (p *Provider) InjectMetaMap(ctx context.Context, m map[string]any) map[string]any {
	if !p.Enabled() {
		return m
	}
	return InjectMetaMap(ctx, m)
}

// InjectMetaMembers is the package [InjectMetaMembers] when p is on; off,
// it returns members at once.
func (p *Provider) InjectMetaMembers(ctx context.Context, members []byte) []byte {
	if !p.Enabled() {
		return members
	}
	return InjectMetaMembers(ctx, members)
}
