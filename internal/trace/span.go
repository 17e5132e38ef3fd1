package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Attribute keys. The mcp.*, gen_ai.*, jsonrpc.*, rpc.*, network.* and
// error.type keys are the OpenTelemetry semantic conventions for MCP
// (status: development); switchyard.* are the gateway's own.
// mcp.session.id is deliberately absent: session ids are never recorded.
const (
	AttrMethod          = "mcp.method.name"
	AttrProtocol        = "mcp.protocol.version"
	AttrResourceURI     = "mcp.resource.uri"
	AttrToolName        = "gen_ai.tool.name"
	AttrPromptName      = "gen_ai.prompt.name"
	AttrOperation       = "gen_ai.operation.name"
	AttrRequestID       = "jsonrpc.request.id"
	AttrStatusCode      = "rpc.response.status_code"
	AttrErrorType       = "error.type"
	AttrNetTransport    = "network.transport"
	AttrNetProtocolName = "network.protocol.name"
	AttrTenant          = "switchyard.tenant"
	AttrUpstream        = "switchyard.upstream"
	AttrWorker          = "switchyard.worker"
	AttrView            = "switchyard.view"
)

// Error types that are not JSON-RPC codes (error.type).
const (
	ErrTypeToolError = "tool_error" // a CallToolResult with isError (semantic conventions)
	ErrTypeTimeout   = "timeout"
	ErrTypeCancelled = "cancelled"
	ErrTypeOther     = "_OTHER"
)

// MCP methods whose params name a tool, a prompt or a resource.
const (
	methodToolsCall = "tools/call"
	methodPromptGet = "prompts/get"
	methodRead      = "resources/read"
	methodSub       = "resources/subscribe"
	methodUnsub     = "resources/unsubscribe"
)

// Call describes the MCP call a span is about. Fields a hop does not know
// stay empty and are not recorded.
type Call struct {
	// Method is the MCP method, "tools/call". Required.
	Method string
	// Name is what the call addresses, as this hop names it: the tool
	// (tools/call: the namespaced name at the edge, the upstream's own
	// name at the worker), the prompt (prompts/get) or the resource URI
	// (resources/read, subscribe, unsubscribe). Tool and prompt names go
	// in the span name too; URIs (unbounded) only in mcp.resource.uri.
	Name string
	// RequestID is the client's JSON-RPC id as sent (a JSON string or
	// number); edge only.
	RequestID json.RawMessage
	// Protocol is the MCP protocol version of the client's request.
	Protocol string
	// Tenant is the tenant the call runs for.
	Tenant string
	// View is the edge's passthrough view (an upstream's name), "" for the
	// federated endpoint.
	View string
	// Upstream is the upstream that serves the call, where the hop knows
	// it (router after placement: see [Span.SetPlacement]; worker).
	Upstream string
	// Worker is the worker that runs the call (worker: its own id).
	Worker string
}

// target is the low-cardinality part of the span name (semantic
// conventions: "{mcp.method.name} {target}").
func (c *Call) target() string {
	switch c.Method {
	case methodToolsCall, methodPromptGet:
		return c.Name
	}
	return ""
}

func (c *Call) spanName(prefix string) string {
	if prefix != "" {
		return prefix + c.Method
	}
	if t := c.target(); t != "" {
		return c.Method + " " + t
	}
	return c.Method
}

// attrs returns the call's attributes (only for a recording span: it
// allocates).
func (c *Call) attrs() []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 10)
	kv = append(kv, attribute.String(AttrMethod, c.Method))
	switch c.Method {
	case methodToolsCall:
		if c.Name != "" {
			kv = append(kv, attribute.String(AttrToolName, c.Name), attribute.String(AttrOperation, "execute_tool"))
		}
	case methodPromptGet:
		if c.Name != "" {
			kv = append(kv, attribute.String(AttrPromptName, c.Name))
		}
	case methodRead, methodSub, methodUnsub:
		if c.Name != "" {
			kv = append(kv, attribute.String(AttrResourceURI, c.Name))
		}
	}
	if id := requestID(c.RequestID); id != "" {
		kv = append(kv, attribute.String(AttrRequestID, id))
	}
	for _, a := range [...]struct{ k, v string }{
		{AttrProtocol, c.Protocol}, {AttrTenant, c.Tenant}, {AttrView, c.View},
		{AttrUpstream, c.Upstream}, {AttrWorker, c.Worker},
	} {
		if a.v != "" {
			kv = append(kv, attribute.String(a.k, a.v))
		}
	}
	return kv
}

// requestID is the string form of a JSON-RPC id: a string's contents or
// a number's text; "" for null or none (semantic conventions: not
// recorded then).
func requestID(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		return jsonscan.Unquote(raw)
	}
	return string(raw)
}

// Span is one hop's span. The zero Span (tracing off) does nothing.
type Span struct{ s oteltrace.Span }

// Recording reports whether the span records (tracing on and the trace
// sampled).
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// SpanContext returns the span's context (zero when off).
func (s Span) SpanContext() oteltrace.SpanContext {
	if s.s == nil {
		return oteltrace.SpanContext{}
	}
	return s.s.SpanContext()
}

// TraceID returns the trace id in hex, "" when off.
func (s Span) TraceID() string {
	if sc := s.SpanContext(); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// End ends the span. Call it once, when the hop is done with the call.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Fail records a JSON-RPC error answer: error.type and
// rpc.response.status_code are the code, the status is Error with msg
// (semantic conventions: the JSONRPCError.message).
func (s Span) Fail(code int64, msg string) {
	if !s.Recording() {
		return
	}
	c := strconv.FormatInt(code, 10)
	s.s.SetAttributes(attribute.String(AttrErrorType, c), attribute.String(AttrStatusCode, c))
	s.s.SetStatus(codes.Error, msg)
}

// ToolError records a tools/call result with isError true: the call
// succeeded at the JSON-RPC level but the tool failed (error.type
// tool_error).
func (s Span) ToolError() {
	if !s.Recording() {
		return
	}
	s.s.SetAttributes(attribute.String(AttrErrorType, ErrTypeToolError))
	s.s.SetStatus(codes.Error, ErrTypeToolError)
}

// SetError records err as the call's failure: a *proto.Error by its code
// (as [Span.Fail]), a context deadline as "timeout", a cancellation as
// "cancelled", anything else as "_OTHER" with err's text. nil does
// nothing.
func (s Span) SetError(err error) {
	if err == nil || !s.Recording() {
		return
	}
	var pe *proto.Error
	switch {
	case errors.As(err, &pe):
		s.Fail(int64(pe.Code), pe.Msg)
	case errors.Is(err, context.DeadlineExceeded):
		s.s.SetAttributes(attribute.String(AttrErrorType, ErrTypeTimeout))
		s.s.SetStatus(codes.Error, err.Error())
	case errors.Is(err, context.Canceled):
		s.s.SetAttributes(attribute.String(AttrErrorType, ErrTypeCancelled))
		s.s.SetStatus(codes.Error, err.Error())
	default:
		s.s.SetAttributes(attribute.String(AttrErrorType, ErrTypeOther))
		s.s.SetStatus(codes.Error, err.Error())
	}
}

// CheckResult records a tools/call result whose isError is true as
// [Span.ToolError]; other results, and any result of a span that does not
// record, are not looked at.
func (s Span) CheckResult(method string, result []byte) {
	if method != methodToolsCall || !s.Recording() || !bytes.Contains(result, []byte(`"isError"`)) {
		return
	}
	isErr := false
	jsonscan.Members(result, func(k, v []byte) {
		if jsonscan.KeyIs(k, "isError") && string(v) == "true" {
			isErr = true
		}
	})
	if isErr {
		s.ToolError()
	}
}

// SetPlacement records where the router sent the call.
func (s Span) SetPlacement(upstream, worker string) {
	if !s.Recording() {
		return
	}
	s.s.SetAttributes(attribute.String(AttrUpstream, upstream), attribute.String(AttrWorker, worker))
}

// SetAttributes adds attributes (for example network.transport "pipe"
// for a stdio upstream at the worker). Never pass session ids, arguments,
// results or credentials.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.Recording() {
		s.s.SetAttributes(kv...)
	}
}

// start starts a span of kind under parent and sets c's attributes if it
// records.
func (p *Provider) start(parent context.Context, name string, kind oteltrace.SpanKind, c *Call, extra []attribute.KeyValue, links []oteltrace.Link) (context.Context, Span) {
	opts := []oteltrace.SpanStartOption{oteltrace.WithSpanKind(kind)}
	if len(links) > 0 {
		opts = append(opts, oteltrace.WithLinks(links...))
	}
	ctx, sp := p.tracer.Start(parent, name, opts...)
	if sp.IsRecording() {
		sp.SetAttributes(c.attrs()...)
		sp.SetAttributes(extra...)
	}
	return ctx, Span{s: sp}
}

// StartEdge starts the edge's SERVER span for a client's MCP request,
// named "{method} {tool or prompt}" (or "{method}"). Its parent is, in
// this order, the trace context in the request's params._meta (SEP-414),
// the HTTP request's traceparent header h (nil for none), or ctx's own
// span; the others, when valid and different, are recorded as links
// (semantic conventions: _meta is the parent, the transport's context a
// link). Off, it returns ctx and a zero Span without allocating.
//
// Pass the returned context to [Inject] for the route message's headers,
// and End the span when the response is written.
func (p *Provider) StartEdge(ctx context.Context, h http.Header, meta Meta, c Call) (context.Context, Span) {
	if !p.Enabled() {
		return ctx, Span{}
	}
	var cands [3]oteltrace.SpanContext
	var mc metaCarrier
	if mc.read(meta) {
		cands[0] = oteltrace.SpanContextFromContext(propagator.Extract(context.Background(), &mc))
	}
	if len(h[httpTraceparent]) > 0 {
		cands[1] = oteltrace.SpanContextFromContext(propagator.Extract(context.Background(), httpCarrier(h)))
	}
	cands[2] = oteltrace.SpanContextFromContext(ctx)
	parent := ctx
	var links []oteltrace.Link
	var chosen oteltrace.SpanContext
	for i, sc := range cands {
		switch {
		case !sc.IsValid() || sc.Equal(chosen):
		case !chosen.IsValid():
			chosen = sc
			if i < 2 {
				parent = oteltrace.ContextWithRemoteSpanContext(ctx, sc)
			}
		default:
			links = append(links, oteltrace.Link{SpanContext: sc})
		}
	}
	return p.start(parent, c.spanName(""), oteltrace.SpanKindServer, &c, []attribute.KeyValue{
		attribute.String(AttrNetTransport, "tcp"),
		attribute.String(AttrNetProtocolName, "http"),
	}, links)
}

// StartRoute starts the router's INTERNAL span "route {method}" for a
// route message with headers h, continuing the edge's span carried in
// them (a root span when there is none). ctx is the base context (the
// router's handlers have none: pass context.Background()). Off, it
// returns ctx and a zero Span without allocating.
//
// After placing the call, record it with [Span.SetPlacement], [Inject]
// the returned context into the forwarded message's headers, and End.
func (p *Provider) StartRoute(ctx context.Context, h nats.Header, c Call) (context.Context, Span) {
	if !p.Enabled() {
		return ctx, Span{}
	}
	return p.start(Extract(ctx, h), c.spanName("route "), oteltrace.SpanKindInternal, &c, nil, nil)
}

// StartUpstream starts the worker's CLIENT span "{method} {tool or
// prompt}" for the call to the upstream, continuing the router's span
// carried in the forwarded message's headers h. ctx is the call's context
// (its deadline and cancellation); the returned one carries the span, for
// [InjectMetaMap]/[InjectMetaJSON] into the upstream request (SEP-414) and
// for logs. Off, it returns ctx and a zero Span without allocating.
func (p *Provider) StartUpstream(ctx context.Context, h nats.Header, c Call) (context.Context, Span) {
	if !p.Enabled() {
		return ctx, Span{}
	}
	return p.start(Extract(ctx, h), c.spanName(""), oteltrace.SpanKindClient, &c, nil, nil)
}

// WrapUpstream returns work wrapped in the worker's span of the call: the
// wrapper starts it ([Provider.StartUpstream] with h, the forwarded
// message's headers) under the context it is given, runs work with the
// span's context, records the reply (its Error as [Span.Fail], a
// tools/call result's isError as [Span.ToolError]) and ends the span. Off,
// it returns work itself. A call refused before work runs (admission) gets
// no worker span: nothing went upstream.
func (p *Provider) WrapUpstream(h nats.Header, c Call, work func(context.Context) *proto.Reply) func(context.Context) *proto.Reply {
	if !p.Enabled() {
		return work
	}
	return func(ctx context.Context) *proto.Reply {
		ctx, span := p.StartUpstream(ctx, h, c)
		defer span.End()
		r := work(ctx)
		if r == nil {
			return r
		}
		if r.Error != nil {
			span.Fail(int64(r.Error.Code), r.Error.Msg)
		} else {
			span.CheckResult(c.Method, r.Result)
		}
		return r
	}
}
