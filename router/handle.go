package router

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// onCall runs on a subscription's delivery goroutine. Every path is
// non-blocking: decode, look up in the snapshot, publish. Its time and
// outcome (the code it answered with, 0 when it routed the request or
// answered a list) are the router's hop in the metrics.
func (s *Service) onCall(m *nats.Msg) {
	s.handling.Add(1)
	defer s.handling.Add(-1)
	if m.Reply == "" {
		return // nobody to answer; a call without a reply subject is dropped
	}
	start := time.Now()
	if hop.Traced(m.Header) {
		hop.Set(m.Header, hop.RouterIn)
	}
	var req proto.Request
	sc := scope{}
	s.route(m, &req, &sc)
	sc.span.End()
	if sc.denied != "" {
		s.met.Denied(sc.denied)
	}
	s.met.Routed(req.Method, int64(sc.code), start)
}

// route answers or forwards one request; sc.code is set to the code of
// the error it answered with, if any.
func (s *Service) route(m *nats.Msg, req *proto.Request, sc *scope) {
	tenant, op, ok := proto.RouteTokens(m.Subject)
	if !ok {
		s.failIn(m, sc, proto.Errorf(proto.CodeInvalidRequest, "malformed route subject"))
		return
	}
	// A view of m.Data: the request is re-encoded for the worker and
	// nothing of it is kept once the handler (or its fan-out) is done.
	if err := proto.UnmarshalView(m.Data, req); err != nil {
		s.log.Warn("bad request envelope", proto.LogSubject, m.Subject, proto.LogErr, err)
		s.failIn(m, sc, errBadRequestEnvelope)
		return
	}
	// The tenancy snapshot is read once: the tenant's policy and the
	// catalog snapshot below serve the whole request.
	_, pol, ok := s.tenancy.Current().Tenant(tenant)
	if !ok {
		s.failIn(m, sc, errUnknownTenant)
		return
	}
	sc.tenant, sc.pol, sc.cat = tenant, pol, s.snap.Load()
	sc.ctx, sc.span = s.cfg.Tracer.StartRoute(context.Background(), m.Header, trace.Call{
		Method: req.Method, Name: req.Name, Tenant: sc.tenant, View: req.View,
	})
	// Forwarded messages copy the trace context from m.Header: put the
	// route span there, in place of the edge's.
	m.Header = s.cfg.Tracer.Inject(sc.ctx, m.Header)
	if deadlinePassed(req) {
		s.failIn(m, sc, proto.Errorf(proto.CodeTimeout, "deadline passed before routing"))
		return
	}
	if kind, ok := listOps[op]; ok {
		s.list(m, sc, req, kind)
		return
	}
	switch op {
	case proto.OpToolsCall:
		s.toolsCall(m, sc, req)
	case proto.OpPromptsGet:
		s.promptsGet(m, sc, req)
	case proto.OpResourcesRead, proto.OpResourcesSubscribe, proto.OpResourcesUnsubscribe:
		s.resourceCall(m, sc, req)
	case proto.OpCompletionComplete:
		s.complete(m, sc, req)
	case proto.OpLoggingSetLevel:
		s.setLevel(m, sc, req)
	case proto.OpTasksGet, proto.OpTasksUpdate, proto.OpTasksCancel:
		s.taskCall(m, sc, req)
	default:
		s.failIn(m, sc, proto.Errorf(proto.CodeMethodNotFound, "method %q not found", req.Method))
	}
}

// listOps are the list methods the router answers from its snapshot.
var listOps = map[string]string{
	proto.OpToolsList:             proto.KindTools,
	proto.OpPromptsList:           proto.KindPrompts,
	proto.OpResourcesList:         proto.KindResources,
	proto.OpResourceTemplatesList: proto.KindResourceTemplates,
}

// failIn answers e for the request of sc, noting its code for the metrics.
func (s *Service) failIn(m *nats.Msg, sc *scope, e *proto.Error) {
	sc.code = e.Code
	sc.span.Fail(int64(e.Code), e.Msg)
	s.fail(m, e)
}

func (s *Service) fail(m *nats.Msg, e *proto.Error) {
	if err := bus.RespondError(s.nc, m.Reply, e); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

// errBadRequestEnvelope answers a route message that does not decode; the
// decoder's text (Go types) is in the log.
var errBadRequestEnvelope = &proto.Error{Code: proto.CodeBadEnvelope, Msg: "the router could not decode the request"}

// errUnknownTenant answers a route subject naming a tenant that is not in
// the router's tenancy snapshot. The edge sends only tenants it resolved,
// so this is a race with the tenant's deletion (or, for a tenant just
// added, with this router's snapshot catching up): CodeUnavailable, which
// a client may retry, and the same message whatever the tenant.
var errUnknownTenant = &proto.Error{Code: proto.CodeUnavailable, Msg: "tenant not available"}

// toolView returns the tool view a request addresses, or nil for a
// passthrough view of an upstream that is not in the catalog or that the
// tenant does not see.
func (sc *scope) toolView(req *proto.Request) *catalog.View {
	if req.View == "" {
		return sc.cat.Federated
	}
	if !sc.pol.Upstream(req.View) {
		if sc.cat.Upstreams[req.View] {
			sc.denied = policyUpstreams
		}
		return nil
	}
	return sc.cat.Pass[req.View]
}

// tool returns the tool a tools/call names in its view if the tenant may
// call it, else nil (unknown and denied alike): one map lookup and one
// policy decision, without allocating.
func (sc *scope) tool(req *proto.Request) *catalog.Entry {
	v := sc.toolView(req)
	if v == nil {
		return nil
	}
	e, ok := v.Lookup(req.Name)
	if !ok {
		return nil
	}
	if !sc.pol.Allowed(policy.KindTools, e.Upstream, e.Subject) {
		sc.denied = policyTools
		return nil
	}
	return e
}

// list answers a list method of kind from the tenant's cached view.
func (s *Service) list(m *nats.Msg, sc *scope, req *proto.Request, kind string) {
	data, perr := s.listReply(sc, req, kind)
	if perr != nil {
		s.failIn(m, sc, perr)
		return
	}
	if err := bus.Respond(s.nc, m.Reply, data); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

// listReply returns the encoded reply of a list request (shared: not to
// be modified): the gateway side of a list, without the bus.
func (s *Service) listReply(sc *scope, req *proto.Request, kind string) ([]byte, *proto.Error) {
	cursor, perr := listCursor(req.Params)
	if perr != nil {
		return nil, perr
	}
	return s.views.page(sc, kind, req.View, cursor)
}

// toolsCall routes tools/call by the tool's name in the view. A tool the
// tenant's policy denies takes the path of a name the view does not have,
// before anything else looks at it (parameter headers, placement).
func (s *Service) toolsCall(m *nats.Msg, sc *scope, req *proto.Request) {
	e := sc.tool(req)
	if e == nil {
		s.failIn(m, sc, s.unknownTool(sc, req))
		return
	}
	if len(e.Params) > 0 && req.Protocol >= protocol2026 {
		args, perr := arguments(req.Params)
		if perr != nil {
			s.failIn(m, sc, perr)
			return
		}
		if err := paramhdr.Validate(e.Params, http.Header(m.Header), args); err != nil {
			s.failIn(m, sc, &proto.Error{Code: paramhdr.CodeHeaderMismatch, Msg: err.Error()})
			return
		}
	}
	worker, perr := s.place(req, e.Upstream)
	if perr != nil {
		s.failIn(m, sc, perr)
		return
	}
	req.Upstream, req.Name = e.Upstream, e.Orig
	// Parameter headers are checked here on every call, and the client's
	// Authorization is passed on here: such calls are not granted.
	sc.grant = len(e.Params) == 0 && !sc.cat.Passthrough(e.Upstream)
	s.send(m, sc, req, worker)
}

// send forwards req to worker, answering the edge if that fails.
func (s *Service) send(m *nats.Msg, sc *scope, req *proto.Request, worker string) {
	if err := s.forward(m, sc, req, worker); err != nil {
		s.log.WarnContext(sc.ctx, "forward failed", proto.LogWorker, worker, proto.LogErr, err)
		s.failIn(m, sc, proto.Errorf(proto.CodeInternal, "router could not forward the call"))
	}
}

// to places req on upstream with name as the upstream's own name (or ""
// to leave the params as sent) and forwards it.
func (s *Service) to(m *nats.Msg, sc *scope, req *proto.Request, upstream, name string) {
	worker, perr := s.place(req, upstream)
	if perr != nil {
		s.failIn(m, sc, perr)
		return
	}
	req.Upstream, req.Name = upstream, name
	s.send(m, sc, req, worker)
}

// unknownTool explains a name the view does not list or the tenant may not
// call: if it belongs to a catalog upstream the tenant sees that is not up
// (so its tools are not known now), the error names that upstream;
// otherwise the tool is unknown (-32602). Upstreams the tenant does not
// see are never named, up or down, so a denied name answers exactly as a
// name that does not exist.
func (s *Service) unknownTool(sc *scope, req *proto.Request) *proto.Error {
	u := req.View
	if u == "" {
		u = sc.cat.UpstreamOf(req.Name, sc.pol)
	}
	if u != "" && sc.cat.Upstreams[u] && sc.pol.Upstream(u) && !s.presence.View().Up(u) {
		if _, perr := s.place(req, u); perr != nil {
			return perr
		}
	}
	return proto.Errorf(proto.CodeInvalidParams, "unknown tool %q", req.Name)
}

// forward sends the placement note, then the call, both to be answered on
// the edge's reply subject. Their order is kept: both leave this connection.
// The client's Authorization (proto.HdrAuthorization) goes along only to
// an upstream whose spec asks for it (see authFor).
func (s *Service) forward(m *nats.Msg, sc *scope, req *proto.Request, worker string) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	if len(data) > int(s.nc.MaxPayload()) {
		s.failIn(m, sc, proto.Errorf(proto.CodePayloadTooLarge, "call of %d bytes exceeds the bus limit of %d", len(data), s.nc.MaxPayload()))
		return nil
	}
	note := &nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{worker}}}
	if sc.grant {
		note.Data = s.grantFor(sc.tenant, req)
	}
	if err := s.nc.PublishMsg(note); err != nil {
		return err
	}
	subj, err := proto.AppendWorkerSubject(make([]byte, 0, 64), worker, proto.Op(req.Method))
	if err != nil {
		return err
	}
	// The header is built in a local and the message after it: assigning
	// fwd.Header (a store through a pointer) would move the message and
	// everything in it to the heap.
	hdr := nats.Header{proto.HdrReplyTo: []string{m.Reply}}
	if auth := authFor(sc, m.Header, req.Upstream); auth != nil {
		hdr[proto.HdrAuthorization] = auth
	}
	// route put the route span's context in m.Header.
	hdr = trace.Copy(hdr, m.Header)
	sc.span.SetPlacement(req.Upstream, worker)
	if hop.Traced(m.Header) {
		hop.Copy(hdr, m.Header)
		hop.Set(hdr, hop.RouterOut)
	}
	fwd := &nats.Msg{
		Subject: string(subj),
		Reply:   s.fwdPrefix + worker + "." + m.Reply,
		Header:  hdr,
		Data:    data,
	}
	return s.nc.PublishMsg(fwd)
}

// grantFor returns the encoded proto.RouteGrant of a routed tools/call
// (req.Upstream and req.Name already the upstream's), with its token for
// tenant (the route subject's: the one whose policy allowed it), or nil when it cannot be built (no grant key yet, no live
// worker). Workers are listed as place sees them, live ones only.
func (s *Service) grantFor(tenant string, req *proto.Request) []byte {
	key := s.grantKey.Load()
	if key == nil {
		return nil
	}
	all := s.presence.View().ByUpstream[req.Upstream]
	g := proto.RouteGrant{Upstream: req.Upstream, Name: req.Name, Workers: make([]string, 0, len(all))}
	g.Token = key.Sign(make([]byte, 0, grant.TokenLen), tenant, req.Upstream, req.Name, time.Now().Add(s.cfg.GrantValidity))
	for _, w := range all {
		if w.Upstreams[req.Upstream].Up {
			g.Workers = append(g.Workers, w.ID)
		}
	}
	if len(g.Workers) == 0 {
		return nil
	}
	data, err := proto.Marshal(&g)
	if err != nil {
		return nil
	}
	return data
}

// authFor returns the route message's proto.HdrAuthorization values when
// upstream's spec sets Auth.Passthrough, else nil: a forwarded call is
// built with fresh headers, so the client's credentials reach no other
// upstream.
func authFor(sc *scope, h nats.Header, upstream string) []string {
	if len(h) == 0 {
		return nil
	}
	v := h[proto.HdrAuthorization]
	if len(v) == 0 || !sc.cat.Passthrough(upstream) {
		return nil
	}
	return v
}

// onUndelivered receives NATS's no-responders status for a forwarded call:
// the worker's subscription is gone, so the call did not run anywhere. The
// worker is dropped from placement at once (its heartbeats would take up to
// three intervals to lapse) and the edge is told it may place the call again.
func (s *Service) onUndelivered(m *nats.Msg) {
	if m.Header.Get("Status") != "503" {
		return
	}
	rest := m.Subject[len(s.fwdPrefix):]
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return
	}
	worker, reply := rest[:i], rest[i+1:]
	s.presence.Suspect(worker)
	e := &proto.Error{Code: proto.CodeNotDelivered, Msg: "the worker placed for the call went away before it started"}
	if err := bus.RespondError(s.nc, reply, e); err != nil {
		s.log.Warn("reply failed", proto.LogWorker, worker, proto.LogErr, err)
	}
}

// protocol2026 is the first protocol version with SEP-2243 parameter
// headers, which the edge passes on in the route message's headers.
const protocol2026 = "2026-07-28"

// arguments returns the raw "arguments" member of tools/call params.
func arguments(params []byte) ([]byte, *proto.Error) {
	var args []byte
	perr := paramMembers(params, func(i int, v []byte) {
		if i == fields.ParamArguments {
			args = v
		}
	})
	return args, perr
}
