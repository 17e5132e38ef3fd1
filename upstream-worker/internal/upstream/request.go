package upstream

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// Request runs req, a client request of any method that proto.Forwarded
// maps, on the upstream and returns the upstream's raw JSON result,
// unchanged. tools/call is [Upstream.Call]. For the other methods the
// params go upstream as the client sent them (rawParams: the hop _meta
// keys dropped; for prompts/get and a completion/complete "ref/prompt"
// reference, req.Name, when set, replaces the client's name), on the
// session tools/call would use: the pool or req's dedicated session (HTTP),
// or req's process (stdio).
//
// The error, if any, is one of: the upstream's own JSON-RPC error (code,
// message, data unchanged); proto.CodeMethodNotFound for a method that is
// not forwarded; proto.CodeInvalidParams for params that are not a JSON
// object (or, on the SDK path, do not decode into the method's params);
// proto.CodeUpstreamUnavailable when the upstream is down or the transport
// failed; proto.CodePayloadTooLarge when the response exceeds
// MaxResultBytes; proto.CodeTimeout when ctx's deadline passed;
// proto.CodeInternal when ctx was cancelled. tasks/get, tasks/update and
// tasks/cancel name the task by its gateway id (see tasks.go); one that
// does not open under req's scope is proto.CodeInvalidParams. Safe for concurrent use; it
// returns when ctx ends even if the upstream ignores the cancellation.
//
// On streamable HTTP and stdio upstreams the request bypasses the SDK
// client as tools/call does (rawCall, pipeCall); on legacy SSE upstreams it
// goes through the SDK client's typed method with a capture hook (the
// params are decoded into the method's typed params, so members the SDK
// does not know are not forwarded there).
func (u *Upstream) Request(ctx context.Context, req *proto.Request) ([]byte, *proto.Error) {
	switch {
	case req.Method == methodToolsCall:
		return u.Call(ctx, req)
	case isTaskMethod(req.Method):
		return u.taskRequest(ctx, req)
	}
	return u.request(ctx, req)
}

// request is Request for a method other than tools/call, with any task id
// already translated.
func (u *Upstream) request(ctx context.Context, req *proto.Request) ([]byte, *proto.Error) {
	if _, ok := proto.Forwarded(req.Method); !ok {
		return nil, proto.Errorf(proto.CodeMethodNotFound, "upstream %s: method %q is not forwarded", u.name, req.Method)
	}
	p, perr := newForwardParams(req)
	if perr != nil {
		return nil, perr
	}
	st := u.beginCall(ctx, req)
	defer st.end()
	p.meta = st.rewriteMeta(p.meta)
	p.meta = trace.InjectMetaMembers(ctx, p.meta)
	var attempt sendFunc
	if u.rawCalls {
		attempt = func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
			return u.callRawOn(ctx, s, l, p, st)
		}
	} else {
		f, perr := sdkRequest(p)
		if perr != nil {
			return nil, perr
		}
		attempt = func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
			return u.forwardOn(ctx, s, l, f)
		}
	}
	if req.Method == methodSetLevel {
		attempt = u.setLevelOnShared(req, attempt)
	}
	if req.Method == methodSubscribe || req.Method == methodUnsubscribe {
		if attempt, perr = listenOn2026(p, attempt, u); perr != nil {
			return nil, perr
		}
		if req.Session != "" {
			attempt = trackSubscription(req, attempt)
		}
	}
	return u.send(ctx, req, st, attempt)
}

// listenOn2026 makes a resources/(un)subscribe on a session that
// negotiated 2026-07-28 or later go through the SDK client, which
// subscribes on a subscriptions/listen stream of its own (SEP-2575: that
// revision has no resources/subscribe) and cancels it on unsubscribe; the
// stream's notifications/resources/updated reach the client session as
// any of the session's messages do. Other sessions keep next.
func listenOn2026(p *rawParams, next sendFunc, u *Upstream) (sendFunc, *proto.Error) {
	f, perr := sdkRequest(p)
	if perr != nil {
		return nil, perr
	}
	return func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
		if ir := s.cs.InitializeResult(); ir == nil || ir.ProtocolVersion < protocol2026 {
			return next(ctx, s, l)
		}
		return u.forwardOn(ctx, s, l, f)
	}, nil
}

// trackSubscription wraps the attempt of a client session's
// resources/subscribe or resources/unsubscribe so that a shared session
// (stdio process) knows which client sessions to send the URI's
// notifications/resources/updated to. An unsubscribe while other client
// sessions are still subscribed through the same session is answered {}
// without reaching the upstream, which would stop their updates too.
func trackSubscription(req *proto.Request, next sendFunc) sendFunc {
	uri := updatedURI(req.Params)
	k := sessKey{req.Edge, req.Session}
	sub := req.Method == methodSubscribe
	return func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
		if s.owner != nil || uri == "" {
			return next(ctx, s, l)
		}
		if !sub && s.othersSubscribed(uri, k) {
			s.unsubscribed(uri, k)
			return []byte(`{}`), nil
		}
		res, err := next(ctx, s, l)
		if err == nil {
			if sub {
				s.subscribed(uri, k)
			} else {
				s.unsubscribed(uri, k)
			}
		}
		return res, err
	}
}

// sdkForward is a forwarded request for the SDK path: the typed call and
// the stub its captured result is replaced with.
type sdkForward struct {
	call func(context.Context, *mcp.ClientSession) (any, error)
	stub []byte
	// cached: on a 2026-07-28 session the SDK caches the method's result
	// (lists, resources/read) and may answer from the cache without a
	// request; a stub would poison the cache, so the SDK decodes the real
	// result there.
	cached bool
}

// sdkRequest decodes p into the typed params of its method. A decoding
// failure is invalid params.
func sdkRequest(p *rawParams) (*sdkForward, *proto.Error) {
	var f *sdkForward
	var err error
	switch p.method {
	case "tools/list":
		f, err = typed(p, `{"tools":[]}`, true, (*mcp.ClientSession).ListTools)
	case "prompts/list":
		f, err = typed(p, `{"prompts":[]}`, true, (*mcp.ClientSession).ListPrompts)
	case methodPromptsGet:
		f, err = typed(p, `{"messages":[]}`, false, (*mcp.ClientSession).GetPrompt)
	case "resources/list":
		f, err = typed(p, `{"resources":[]}`, true, (*mcp.ClientSession).ListResources)
	case "resources/templates/list":
		f, err = typed(p, `{"resourceTemplates":[]}`, true, (*mcp.ClientSession).ListResourceTemplates)
	case methodRead:
		f, err = typed(p, `{"contents":[]}`, true, (*mcp.ClientSession).ReadResource)
	case methodComplete:
		f, err = typed(p, `{"completion":{"values":[]}}`, false, (*mcp.ClientSession).Complete)
	case methodSetLevel:
		f, err = typed(p, `{}`, false, noResult((*mcp.ClientSession).SetLoggingLevel))
	case methodSubscribe:
		f, err = typed(p, `{}`, false, noResult((*mcp.ClientSession).Subscribe))
	case methodUnsubscribe:
		f, err = typed(p, `{}`, false, noResult((*mcp.ClientSession).Unsubscribe))
	default:
		return nil, proto.Errorf(proto.CodeMethodNotFound, "method %q is not forwarded", p.method)
	}
	if err != nil {
		return nil, invalidParams(p.method, "%s", decodeProblem(err))
	}
	return f, nil
}

// typed decodes p's params (rewritten, hop _meta keys dropped) into the
// typed params of method call. The forwarded _meta values stay raw JSON, so
// they go upstream byte for byte.
func typed[T any, P interface {
	*T
	mcp.Params
}, R any](p *rawParams, stub string, cached bool, call func(*mcp.ClientSession, context.Context, P) (R, error)) (*sdkForward, error) {
	params := P(new(T))
	if err := json.Unmarshal(p.appendParams(nil, nil), params); err != nil {
		return nil, err
	}
	var meta map[string]json.RawMessage
	if len(p.meta) > 0 {
		if err := json.Unmarshal(append(append([]byte{'{'}, p.meta...), '}'), &meta); err != nil {
			return nil, err
		}
	}
	if len(meta) > 0 {
		m := make(map[string]any, len(meta))
		for k, v := range meta {
			m[k] = v
		}
		params.SetMeta(m)
	} else {
		params.SetMeta(nil)
	}
	return &sdkForward{
		stub:   []byte(stub),
		cached: cached,
		call: func(ctx context.Context, cs *mcp.ClientSession) (any, error) {
			// The SDK adds its protocol _meta keys to the params it is
			// given: each attempt gets its own copy.
			p2 := *params
			P(&p2).SetMeta(cloneMeta(params.GetMeta()))
			return call(cs, ctx, &p2)
		},
	}, nil
}

// noResult adapts a typed method without a result.
func noResult[P any](f func(*mcp.ClientSession, context.Context, P) error) func(*mcp.ClientSession, context.Context, P) (any, error) {
	return func(cs *mcp.ClientSession, ctx context.Context, p P) (any, error) { return nil, f(cs, ctx, p) }
}

func cloneMeta(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// forwardOn runs f on s through the SDK client and returns the captured
// raw result.
func (u *Upstream) forwardOn(ctx context.Context, s *session, l *lazy, f *sdkForward) ([]byte, error) {
	if l != nil {
		defer l.use()()
	}
	stub := f.stub
	if ir := s.cs.InitializeResult(); f.cached && ir != nil && ir.ProtocolVersion >= protocol2026 {
		stub = nil
	}
	slot := capture.NewSlot(stub)
	defer slot.Release()
	hop.Mark(ctx, hop.UpSent)
	res, err := f.call(capture.With(ctx, slot), s.cs)
	hop.Mark(ctx, hop.UpRecv)
	if err != nil {
		return nil, err
	}
	if raw, ok := slot.Result(); ok {
		return raw, nil
	}
	// Not captured: a result the SDK served from its cache (2026-07-28), or
	// a request the SDK answered itself (Subscribe on 2026-07-28). The
	// typed result is the best there is.
	if res == nil {
		return []byte(`{}`), nil
	}
	return json.Marshal(res)
}
