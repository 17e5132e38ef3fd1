package router

import (
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// onCall runs on a subscription's delivery goroutine. Every path is
// non-blocking: decode, look up in the snapshot, publish.
func (s *Service) onCall(m *nats.Msg) {
	if m.Reply == "" {
		return // nobody to answer; a call without a reply subject is dropped
	}
	if hop.Traced(m.Header) {
		hop.Set(m.Header, hop.RouterIn)
	}
	tenant, op, ok := proto.RouteTokens(m.Subject)
	if !ok {
		s.fail(m, proto.Errorf(proto.CodeInvalidRequest, "malformed route subject"))
		return
	}
	var req proto.Request
	// A view of m.Data: the request is re-encoded for the worker and
	// nothing of it is kept once the handler (or its fan-out) is done.
	if err := proto.UnmarshalView(m.Data, &req); err != nil {
		s.log.Warn("bad request envelope", proto.LogSubject, m.Subject, proto.LogErr, err)
		s.fail(m, proto.Errorf(proto.CodeBadEnvelope, "router: undecodable request: %v", err))
		return
	}
	if tenant != DefaultTenant {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "unknown tenant %q", tenant))
		return
	}
	if deadlinePassed(&req) {
		s.fail(m, proto.Errorf(proto.CodeTimeout, "deadline passed before routing"))
		return
	}
	if kind, ok := listOps[op]; ok {
		s.list(m, &req, kind)
		return
	}
	switch op {
	case proto.OpToolsCall:
		s.toolsCall(m, &req)
	case proto.OpPromptsGet:
		s.promptsGet(m, &req)
	case proto.OpResourcesRead, proto.OpResourcesSubscribe, proto.OpResourcesUnsubscribe:
		s.resourceCall(m, &req)
	case proto.OpCompletionComplete:
		s.complete(m, &req)
	case proto.OpLoggingSetLevel:
		s.setLevel(m, &req)
	case proto.OpTasksGet, proto.OpTasksUpdate, proto.OpTasksCancel:
		s.taskCall(m, &req)
	default:
		s.fail(m, proto.Errorf(proto.CodeMethodNotFound, "method %q not found", req.Method))
	}
}

// listOps are the list methods the router answers from its snapshot.
var listOps = map[string]string{
	proto.OpToolsList:             proto.KindTools,
	proto.OpPromptsList:           proto.KindPrompts,
	proto.OpResourcesList:         proto.KindResources,
	proto.OpResourceTemplatesList: proto.KindResourceTemplates,
}

func (s *Service) fail(m *nats.Msg, e *proto.Error) {
	if err := bus.RespondError(s.nc, m.Reply, e); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

// view returns the tool view a request addresses, or nil for an unknown
// upstream.
func (s *Service) view(req *proto.Request) *catalog.View {
	snap := s.snap.Load()
	if req.View == "" {
		return snap.Federated
	}
	return snap.Pass[req.View]
}

type listParams struct {
	Cursor string `json:"cursor"`
}

// list answers a list method of kind from the snapshot.
func (s *Service) list(m *nats.Msg, req *proto.Request, kind string) {
	var p listParams
	if err := decodeParams(req.Params, &p); err != nil {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "invalid params: %v", err))
		return
	}
	v := s.snap.Load().List(kind, req.View)
	if v == nil {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "unknown upstream %q", req.View))
		return
	}
	page, err := v.Page(p.Cursor, s.cfg.PageSize)
	if err != nil {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "invalid cursor"))
		return
	}
	if err := bus.RespondReply(s.nc, m.Reply, &proto.Reply{Result: page}); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

func (s *Service) toolsCall(m *nats.Msg, req *proto.Request) {
	v := s.view(req)
	var e *catalog.Entry
	if v != nil {
		e, _ = v.Lookup(req.Name)
	}
	if e == nil {
		s.fail(m, s.unknownTool(req))
		return
	}
	if len(e.Params) > 0 && req.Protocol >= protocol2026 {
		if err := paramhdr.Validate(e.Params, http.Header(m.Header), arguments(req.Params)); err != nil {
			s.fail(m, &proto.Error{Code: paramhdr.CodeHeaderMismatch, Msg: err.Error()})
			return
		}
	}
	worker, perr := s.place(req, e.Upstream)
	if perr != nil {
		s.fail(m, perr)
		return
	}
	req.Upstream, req.Name = e.Upstream, e.Orig
	s.send(m, req, worker)
}

// send forwards req to worker, answering the edge if that fails.
func (s *Service) send(m *nats.Msg, req *proto.Request, worker string) {
	if err := s.forward(m, req, worker); err != nil {
		s.log.Warn("forward failed", proto.LogWorker, worker, proto.LogErr, err)
		s.fail(m, proto.Errorf(proto.CodeInternal, "router could not forward the call"))
	}
}

// to places req on upstream with name as the upstream's own name (or ""
// to leave the params as sent) and forwards it.
func (s *Service) to(m *nats.Msg, req *proto.Request, upstream, name string) {
	worker, perr := s.place(req, upstream)
	if perr != nil {
		s.fail(m, perr)
		return
	}
	req.Upstream, req.Name = upstream, name
	s.send(m, req, worker)
}

// unknownTool explains a name the view does not list: if it belongs to a
// catalog upstream that is not up (so its tools are not known now), the
// error names that upstream; otherwise the tool is unknown (-32602).
func (s *Service) unknownTool(req *proto.Request) *proto.Error {
	snap := s.snap.Load()
	u := req.View
	if u == "" {
		u = snap.UpstreamOf(req.Name)
	}
	if u != "" && snap.Upstreams[u] && !s.presence.View().Up(u) {
		if _, perr := s.place(req, u); perr != nil {
			return perr
		}
	}
	return proto.Errorf(proto.CodeInvalidParams, "unknown tool %q", req.Name)
}

// forward sends the placement note, then the call, both to be answered on
// the edge's reply subject. Their order is kept: both leave this connection.
func (s *Service) forward(m *nats.Msg, req *proto.Request, worker string) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	if len(data) > int(s.nc.MaxPayload()) {
		s.fail(m, proto.Errorf(proto.CodePayloadTooLarge, "call of %d bytes exceeds the bus limit of %d", len(data), s.nc.MaxPayload()))
		return nil
	}
	note := &nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{worker}}}
	if err := s.nc.PublishMsg(note); err != nil {
		return err
	}
	subj, err := proto.AppendWorkerSubject(make([]byte, 0, 64), worker, proto.Op(req.Method))
	if err != nil {
		return err
	}
	fwd := &nats.Msg{
		Subject: string(subj),
		Reply:   s.fwdPrefix + worker + "." + m.Reply,
		Header:  nats.Header{proto.HdrReplyTo: []string{m.Reply}},
		Data:    data,
	}
	if hop.Traced(m.Header) {
		hop.Copy(fwd.Header, m.Header)
		hop.Set(fwd.Header, hop.RouterOut)
	}
	return s.nc.PublishMsg(fwd)
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
	e := proto.Errorf(proto.CodeNotDelivered, "worker %s went away before the call started", worker)
	if err := bus.RespondError(s.nc, reply, e); err != nil {
		s.log.Warn("reply failed", proto.LogWorker, worker, proto.LogErr, err)
	}
}

// protocol2026 is the first protocol version with SEP-2243 parameter
// headers, which the edge passes on in the route message's headers.
const protocol2026 = "2026-07-28"

// arguments returns the raw "arguments" member of tools/call params.
func arguments(params []byte) []byte {
	var args []byte
	jsonscan.Members(params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "arguments") {
			args = v
		}
	})
	return args
}
