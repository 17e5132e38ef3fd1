package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// rawResult is a result that is already JSON: the bytes from the bus go to
// the client without being decoded. Meta set by the SDK (serverInfo for
// 2026-era clients) is merged into the result's _meta.
type rawResult struct {
	mcp.ResultBase
	raw    json.RawMessage
	timing nats.Header // per-hop stamps of a traced call
	op2026 string      // the op of a 2026-07-28 request: see upgrade2026
}

// MarshalJSON returns the stored bytes, with any SDK-added _meta keys the
// upstream did not set itself.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	if r.timing != nil {
		hop.Set(r.timing, hop.EdgeOut)
		if r.Meta == nil {
			r.Meta = mcp.Meta{}
		}
		r.Meta[hop.MetaKey] = hop.Relative(hop.Stamps(r.timing))
	}
	out := mergeMeta(r.raw, r.Meta)
	if r.op2026 != "" {
		out = upgrade2026(out, r.op2026)
	} else {
		out = downgrade2025(out)
	}
	return out, nil
}

// mergeMeta adds the keys of add to the _meta object of the JSON object
// raw, keeping the values raw already has. raw is returned unchanged when
// add is empty or raw is not an object.
func mergeMeta(raw []byte, add map[string]any) []byte {
	if len(add) == 0 {
		return raw
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil { // null decodes to a nil map
		return raw
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok {
		if json.Unmarshal(m, &meta) != nil || meta == nil { // "_meta": null, or not an object
			meta = map[string]json.RawMessage{}
		}
	}
	for k, v := range add {
		if _, ok := meta[k]; ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return raw
		}
		meta[k] = b
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return raw
	}
	obj["_meta"] = b
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}

// middleware answers every forwarded method of the view (proto.Forwarded:
// lists, tools/call, prompts/get, resources/read|subscribe|unsubscribe,
// completion/complete, logging/setLevel) from the bus; initialize, ping and
// notifications stay with the SDK. logging/setLevel is also recorded by the
// SDK session once the upstreams accepted it.
func (s *Service) middleware(v *view) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "server/discover" && legacySSE(ctx) {
				return nil, legacyDiscoverError(req)
			}
			if method == "initialize" {
				res, err := next(ctx, method, req)
				if err == nil {
					s.onInitialize(v, req, res)
				}
				return res, err
			}
			op, ok := proto.Forwarded(method)
			if !ok {
				return next(ctx, method, req)
			}
			name, perr := targetName(req.GetParams())
			if perr != nil {
				return nil, perr
			}
			res, err := s.forward(ctx, v, method, op, name, req)
			if err == nil && method == "logging/setLevel" {
				if _, err := next(ctx, method, req); err != nil {
					return nil, err
				}
				s.noteLevel(req)
			}
			if err == nil && (op == proto.OpResourcesSubscribe || op == proto.OpResourcesUnsubscribe) {
				s.noteSub(req, name, op == proto.OpResourcesSubscribe)
			}
			return res, err
		}
	}
}

// targetName is what the router routes a request by: the tool or prompt
// name, or the resource URI; "" for methods routed otherwise.
func targetName(p mcp.Params) (string, *jsonrpc.Error) {
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		if p == nil {
			return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
		}
		return p.Name, nil
	case *mcp.GetPromptParams:
		return p.Name, nil
	case *mcp.ReadResourceParams:
		return p.URI, nil
	case *mcp.SubscribeParams:
		return p.URI, nil
	case *mcp.UnsubscribeParams:
		return p.URI, nil
	}
	return "", nil
}

// forward publishes one call from the SDK path and waits for its reply.
// Errors it returns are *jsonrpc.Error built by toJSONRPC, or the ctx's
// error when the client went away (the SDK then sends nothing).
func (s *Service) forward(ctx context.Context, v *view, method, op, name string, req mcp.Request) (result mcp.Result, err error) {
	var stamps nats.Header
	if op == proto.OpToolsCall && wantsTiming(req.GetParams()) {
		stamps = newStamps()
	}
	// The SDK decoded the params (member names matched exactly, the last
	// of duplicates kept) and the call goes on as this re-encoding of
	// them: what the router and the worker check is what the upstream
	// gets. A decoded map (_meta) can still hold keys a lenient upstream
	// decoder takes for one another: refused, as precheck refuses them in
	// the body (a legacy SSE POST reaches here without precheck).
	params, err := json.Marshal(req.GetParams())
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"}
	}
	if c := fields.CheckParams(params); c != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: c.Message()}
	}
	preq := proto.Request{Method: method, Tenant: v.tenant, Edge: s.cfg.ID, View: v.name, Name: name, Params: params}
	var authz, user string
	if ex := req.GetExtra(); ex != nil {
		if ti := ex.TokenInfo; ti != nil {
			user = ti.UserID
			preq.Principal, _ = ti.Extra[principalExtra].(string)
			preq.Issuer, _ = ti.Extra[issuerExtra].(string)
			if jwt, _ := ti.Extra[jwtExtra].(bool); jwt && s.passthrough.Load() && ex.Header != nil {
				authz = ex.Header.Get("Authorization")
			}
		}
	}
	var release func() // the call's limit ticket; a suspension takes it over
	defer func() {
		if release != nil {
			release()
		}
	}()
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		preq.Session = ss.ID()
		if cs := s.sessions.of(ss); cs != nil {
			preq.Session = cs.id // a legacy SSE session has no SDK id
			preq.ClientCaps = cs.caps
			preq.Edge = cs.sessionEdge(s.cfg.ID)
		}
		if ip := ss.InitializeParams(); ip != nil {
			preq.Protocol = ip.ProtocolVersion
		}
	}
	var hdr http.Header
	if ex := req.GetExtra(); ex != nil {
		hdr = ex.Header
	}
	ctx, span := s.cfg.Tracer.StartEdge(ctx, hdr, trace.Meta{Params: params}, trace.Call{
		Method: method, Name: name, Protocol: preq.Protocol, Tenant: v.tenant, View: v.name,
	})
	if n := noteOf(ctx); n != nil && span.Recording() {
		n.traceID = span.TraceID()
	}
	defer func() {
		if !span.Recording() {
			span.End() // nothing recorded; je below would cost an allocation per call
			return
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			span.Fail(je.Code, je.Message)
		} else if err != nil {
			span.SetError(err)
		} else if rr, ok := result.(*rawResult); ok {
			span.CheckResult(method, rr.raw)
		}
		span.End()
	}()
	var onMsg func(*nats.Msg) bool
	var asks sync.WaitGroup
	br := &bridge{s: s}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.InitializeParams() != nil && ss.InitializeParams().Capabilities != nil {
		br.caps = capsJSON(ss.InitializeParams().Capabilities)
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		rctx, cancel := context.WithCancel(ctx)
		defer func() { cancel(); asks.Wait() }() // the upstream no longer waits for them
		onMsg = s.sdkRelay(rctx, v, ss, &asks)
		if preq.Session == "" { // 2026-07-28: requests become input_required results
			onMsg = br.wrap(onMsg, op)
			var lv string
			if p := paramsOf(req); p != nil {
				lv, _ = p.GetMeta()[mcp.MetaKeyLogLevel].(string)
			}
			onMsg = logGate(onMsg, lv)
		} else if cs := s.sessions.of(ss); cs != nil {
			onMsg = logGate(onMsg, cs.level())
		}
	}
	var raw []byte
	var timing nats.Header
	if state, responses, ok := bridgeRetry(params); ok && preq.Session == "" {
		raw, timing, err = s.resume(ctx, state, responses, &preq, user, br.caps, &release, onMsg)
	} else {
		done, perr := s.admit(&preq)
		if perr != nil {
			return nil, s.toJSONRPC(ctx, perr, method)
		}
		release = done
		var extra nats.Header
		if op == proto.OpToolsCall && preq.Protocol >= protocol2026 && req.GetExtra() != nil {
			extra = paramHeaders(req.GetExtra().Header)
		}
		extra = withAuthorization(extra, authz)
		raw, timing, err = s.roundTrip(ctx, &preq, op, stamps, extra, onMsg)
	}
	var sp *suspended
	if errors.As(err, &sp) {
		held := release
		release = nil
		return &rawResult{raw: s.suspend(sp, br.asked, user, held)}, nil
	}
	if err != nil {
		return nil, err
	}
	res := &rawResult{raw: raw, timing: timing}
	if preq.Protocol >= protocol2026 {
		res.op2026 = op
	}
	return res, nil
}

// newStamps starts the per-hop timing of a traced call.
func newStamps() nats.Header {
	h := nats.Header{hop.Header: []string{"1"}}
	hop.Set(h, hop.EdgeIn)
	return h
}

// roundTrip sends preq (its ID and deadline are set here) and returns the
// result bytes as the worker sent them, and for a traced call (stamps not
// nil) the reply's timing headers. A call that reached no worker is placed
// again, up to maxAttempts. Errors are *jsonrpc.Error built by toJSONRPC,
// or the ctx's cause when ctx ended first.
//
// onMsg, if not nil, receives the upstream's messages for the client
// (proto.HdrMessage) while the call runs.
//
// When onMsg suspends the call (a 2026-era client must be asked for input)
// the error is a *suspended holding the open call.
//
// extra, if not nil, are headers for the route message (SEP-2243
// parameter headers the router checks).
func (s *Service) roundTrip(ctx context.Context, preq *proto.Request, op string, stamps, extra nats.Header, onMsg func(*nats.Msg) bool) ([]byte, nats.Header, error) {
	deadline := time.Now().Add(s.cfg.CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	preq.DeadlineUnixMs = deadline.UnixMilli()
	// The worker gives up at the deadline and answers with an error naming
	// the upstream; the edge waits a little longer so that answer wins.
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(timeoutGrace))
	defer cancel()

	grantMisses := 0
	for attempt := 1; ; attempt++ {
		raw, timing, direct, err := s.send(ctx, preq, op, stamps, extra, onMsg)
		var pe *proto.Error
		if direct && errors.As(err, &pe) && pe.Code == proto.CodeNotDelivered && grantMisses < maxAttempts {
			// Sent on a route grant whose worker is gone: the grant is
			// dropped, and placing it again is not counted as an attempt
			// (a router learns of the worker only when its own forward
			// fails). Bounded: routers that have not seen the worker go may
			// grant it again meanwhile.
			grantMisses++
			attempt--
			continue
		}
		if errors.As(err, &pe) && pe.Code == proto.CodeNotDelivered && attempt < maxAttempts {
			// It ran nowhere, so placing it again is safe; the pause lets the
			// router drop the worker that is gone.
			select {
			case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		if err == nil {
			return raw, timing, nil
		}
		var sp *suspended
		if errors.As(err, &sp) {
			sp.deadline = deadline
			return nil, nil, sp
		}
		if errors.Is(err, bus.ErrCanceled) {
			return nil, nil, context.Cause(ctx)
		}
		if err == proto.ErrTimeout { //nolint:errorlint // the bus's own sentinel: the edge waited out the call; a worker's timeout reply (same code) keeps its message naming the upstream
			err = proto.Errorf(proto.CodeTimeout, "%s %s: no answer within %s", preq.Method, preq.Name, s.cfg.CallTimeout)
		}
		return nil, nil, s.toJSONRPC(ctx, err, preq.Method)
	}
}

// busWait is how long a call waits for the edge's NATS connection to come
// back before failing: a reconnect to another node of a cluster (a node
// restarting, the edge's connection moved) takes milliseconds, and a call
// sent then loses nothing.
const busWait = 2 * time.Second

// awaitBus waits up to busWait (or until ctx ends) for the NATS connection
// to be connected; false if it is not.
func (s *Service) awaitBus(ctx context.Context) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(busWait)
	for !s.nc.IsConnected() {
		if s.nc.IsClosed() || time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// timeoutGrace is how long the edge waits past a call's deadline for the
// worker's own timeout answer.
const timeoutGrace = 500 * time.Millisecond

// maxAttempts bounds how often a call that reached no worker is placed again.
const maxAttempts = 4

// send publishes one attempt of a call and waits for its reply: the result
// bytes and, for a traced call, the reply's headers. direct reports that
// the attempt went straight to a worker on a route grant.
func (s *Service) send(ctx context.Context, preq *proto.Request, op string, stamps, extra nats.Header, onMsg func(*nats.Msg) bool) (raw []byte, timing nats.Header, direct bool, err error) {
	if !s.nc.IsConnected() && !s.awaitBus(ctx) {
		// A publish would sit in the reconnect buffer until the deadline.
		return nil, nil, false, proto.Errorf(proto.CodeUnavailable, "gateway bus unavailable (NATS %s)", s.nc.Status())
	}
	k := s.caller.New()
	keep := false
	defer func() {
		if !keep {
			k.Close()
		}
	}()
	preq.ID, k.From = k.ID, preq.Edge
	rt := s.routeOf(preq, op)
	if direct = rt.grant != nil; direct {
		k.PlaceDirect(rt.worker)
		// The worker may have been seen leaving since routeOf looked:
		// FailWorker then ran before the call named it, so it would wait
		// for a worker that never answers.
		if s.presence.Gone(rt.worker) {
			s.grants.drop(rt.key, rt.grant)
			return nil, nil, true, &proto.Error{Code: proto.CodeNotDelivered, Msg: "the worker placed for the call went away before it started"}
		}
		// A granted call needs none of the router's headers: its tool has
		// no parameter headers and its upstream takes no client
		// Authorization (proto.RouteGrant).
		extra = nil
	}
	data, err := rt.marshal(preq)
	if err != nil {
		return nil, nil, direct, err
	}
	if len(data) > int(s.nc.MaxPayload()) {
		return nil, nil, direct, proto.Errorf(proto.CodePayloadTooLarge, "request of %d bytes exceeds the bus limit of %d bytes", len(data), s.nc.MaxPayload())
	}
	hdr := extra
	if stamps != nil {
		if hdr == nil {
			hdr = nats.Header{}
		}
		hop.Copy(hdr, stamps)
		hop.Set(hdr, hop.EdgePub)
	}
	if s.cfg.Tracer.Enabled() {
		// The trace context goes into a header of its own, copied over:
		// handing hdr to Inject (which leaks it) would move every header
		// the callers build to the heap, with tracing off too. The
		// header is built in a local, not through msg, for the same
		// reason (a store through a pointer escapes).
		hdr = trace.Copy(hdr, s.cfg.Tracer.Inject(ctx, nil))
	}
	subject := rt.subject
	if subject == "" {
		// To a live router by name, so that the call is sent elsewhere if
		// that router goes before placing it; with none known (yet), on
		// the routers' queue subject.
		if r := s.routers.Pick(); r != "" {
			b, err := proto.AppendRouterRouteSubject(make([]byte, 0, 64+len(r)+len(preq.Tenant)), r, preq.Tenant, op)
			if err != nil {
				return nil, nil, direct, proto.Errorf(proto.CodeInvalidRequest, "route subject: %v", err)
			}
			subject = string(b)
			k.SendToRouter(r)
		} else {
			subject = s.routeFor(preq.Tenant, op)
			k.Describe(describeCall(preq))
		}
	}
	msg := &nats.Msg{Subject: subject, Reply: k.Reply(), Data: data, Header: hdr}
	sent := time.Now()
	if err := s.nc.PublishMsg(msg); err != nil {
		return nil, nil, direct, err
	}
	out, err := k.WaitWith(ctx, onMsg)
	if errors.Is(err, bus.ErrSuspended) {
		keep = true
		return nil, nil, direct, &suspended{k: k, preq: *preq}
	}
	var note *callNote
	if s.audit != nil {
		note = noteOf(ctx)
	}
	raw, timing, err = s.replyOf(k, out, err, stamps, replyClock{method: preq.Method, sent: sent}, note)
	s.noteRoute(&rt, k, err)
	return raw, timing, direct, err
}

// describeCall names a call for an error: its method, and the tool,
// prompt or resource it names.
func describeCall(preq *proto.Request) string {
	if preq.Name == "" {
		return preq.Method
	}
	return preq.Method + " " + strconv.Quote(preq.Name)
}

// replyClock is when a call was published, for the bus time of its reply
// (switchyard_edge_bus_seconds); the zero value records none (a resumed
// call: its first publish was in an earlier request).
type replyClock struct {
	method string
	sent   time.Time
}

// replyOf turns what a call's WaitWith returned into the result bytes and,
// for a traced call, the reply's headers; a call that was cancelled or
// timed out is cancelled at its worker. A worker's reply also gives the
// bus time (recorded when clock has a send time) and, for note (nil: not
// wanted), the upstream and the worker's time.
func (s *Service) replyOf(k *bus.Call, out []byte, err error, stamps nats.Header, clock replyClock, note *callNote) ([]byte, nats.Header, error) {
	if errors.Is(err, bus.ErrCanceled) || errors.Is(err, proto.ErrTimeout) {
		s.cancelAtWorker(k)
	}
	if err != nil {
		return nil, nil, err
	}
	var rep proto.Reply
	// A view of out (the reply message's data, or its reassembled chunks):
	// the result is written to the client and nothing of it is kept.
	if err := proto.UnmarshalView(out, &rep); err != nil {
		// The decoder's text names Go types: it goes to the log.
		id := bus.RandomToken(5)
		s.log.Warn("bad reply envelope", proto.LogWorker, k.Worker(), "correlation_id", id, proto.LogErr, err)
		return nil, nil, proto.Errorf(proto.CodeBadEnvelope, "the gateway could not decode a reply (correlation id %s)", id)
	}
	if rep.ServiceNs > 0 && !clock.sent.IsZero() {
		s.met.Bus(clock.method, time.Since(clock.sent)-time.Duration(rep.ServiceNs))
	}
	if note != nil {
		note.upstream = strings.Clone(rep.Upstream) // rep is a view of out
		note.service = time.Duration(rep.ServiceNs)
	}
	if rep.Error != nil {
		return nil, nil, rep.Error
	}
	var timing nats.Header
	if stamps != nil {
		if timing = k.Header(); timing == nil {
			timing = nats.Header{}
		}
		hop.Set(timing, hop.EdgeRecv)
	}
	return rep.Result, timing, nil
}

// wantsTiming reports whether the client asked for per-hop timings with
// _meta["dev.switchyard/timing"]: true.
func wantsTiming(p mcp.Params) bool {
	if p == nil {
		return false
	}
	v, _ := p.GetMeta()[hop.MetaKey].(bool)
	return v
}

// cancelAtWorker tells the worker that owns k to stop it; the worker then
// cancels the call upstream. Best effort: the reply, if any, is dropped.
func (s *Service) cancelAtWorker(k *bus.Call) {
	w := k.Worker()
	if w == "" {
		return
	}
	subj, err := proto.AppendWorkerSubject(nil, w, proto.OpCancel)
	if err != nil {
		return
	}
	from := k.From
	if from == "" {
		from = s.cfg.ID
	}
	data, err := proto.Marshal(&proto.Cancel{Edge: from, ID: k.ID})
	if err == nil {
		err = s.nc.Publish(string(subj), data)
	}
	if err != nil {
		s.log.Warn("cancel not sent", proto.LogWorker, w, proto.LogErr, err)
	}
}

// toJSONRPC is the one place where errors become JSON-RPC errors. ctx is
// the call's: an internal error is logged with its trace id.
func (s *Service) toJSONRPC(ctx context.Context, err error, method string) *jsonrpc.Error {
	var pe *proto.Error
	if errors.As(err, &pe) {
		je := &jsonrpc.Error{Code: int64(pe.Code), Message: pe.Msg}
		if len(pe.Data) > 0 {
			je.Data = json.RawMessage(pe.Data)
		}
		return je
	}
	id := bus.RandomToken(5)
	s.log.ErrorContext(ctx, "internal error", proto.LogMethod, method, "correlation_id", id, proto.LogErr, err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error (correlation id " + id + ")"}
}

// paramHeaders returns the SEP-2243 Mcp-Param-* headers of a request, for
// the router to check against the tool's annotations; nil when there are
// none.
func paramHeaders(h http.Header) nats.Header {
	var out nats.Header
	for k, v := range h {
		if strings.HasPrefix(k, paramhdr.Prefix) { // http.Header keys are canonical
			if out == nil {
				out = nats.Header{}
			}
			out[k] = v
		}
	}
	return out
}

// noteLevel records the level of a logging/setLevel that succeeded, for
// the session's log gate.
func (s *Service) noteLevel(req mcp.Request) {
	p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
	ss, ok2 := req.GetSession().(*mcp.ServerSession)
	if !ok || !ok2 || p == nil {
		return
	}
	if cs := s.sessions.of(ss); cs != nil {
		lv := string(p.Level)
		cs.logLevel.Store(&lv)
		s.storeLevel(cs, lv)
	}
}

// withAuthorization adds the client's Authorization header value to the
// route message's headers (proto.HdrAuthorization) for a passthrough
// upstream; authz is "" unless the catalog has one.
func withAuthorization(h nats.Header, authz string) nats.Header {
	if authz == "" {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	h[proto.HdrAuthorization] = []string{authz}
	return h
}
