package router

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// codeResourceNotFound is the error for a resource no upstream serves:
// Invalid Params, as SEP-2164 standardized it (and the go-sdk answers),
// with the URI in data.
const codeResourceNotFound = proto.CodeInvalidParams

// passthrough returns the upstream of a passthrough view, and false (after
// answering the edge) when the view names no catalog upstream or one the
// tenant does not see: the same answer for both.
func (s *Service) passthrough(m *nats.Msg, sc *scope, req *proto.Request) (string, bool) {
	if !sc.cat.Upstreams[req.View] || !sc.pol.Upstream(req.View) {
		if sc.cat.Upstreams[req.View] {
			sc.denied = policyUpstreams
		}
		s.failIn(m, sc, errUnknownUpstream(req.View))
		return "", false
	}
	return req.View, true
}

// promptsGet routes prompts/get by the prompt's name (req.Name, from the
// edge): in the federated view the name is mapped back to the upstream's;
// in a passthrough view it is the upstream's own and the params go as
// sent. A name the view does not list, or one the tenant's policy denies,
// is -32602 "unknown prompt", as the specification asks for an invalid
// prompt name: the router answers it in both views, so that a denied
// prompt and a nonexistent one get the same answer.
func (s *Service) promptsGet(m *nats.Msg, sc *scope, req *proto.Request) {
	if req.View != "" {
		if _, ok := s.passthrough(m, sc, req); !ok {
			return
		}
	}
	v := sc.cat.List(proto.KindPrompts, req.View)
	e, ok := v.Lookup(req.Name)
	if ok && !sc.pol.Allowed(policy.KindPrompts, e.Upstream, e.Subject) {
		sc.denied, ok = policyPrompts, false
	}
	if !ok {
		s.failIn(m, sc, proto.Errorf(proto.CodeInvalidParams, "unknown prompt %q", req.Name))
		return
	}
	name := e.Orig
	if req.View != "" {
		name = "" // the upstream's own name already
	}
	s.to(m, sc, req, e.Upstream, name)
}

// resourceCall routes resources/read, subscribe and unsubscribe by the URI
// (req.Name, from the edge); URIs are never renamed. A URI the tenant's
// policy denies gets the answer of a URI no upstream has.
func (s *Service) resourceCall(m *nats.Msg, sc *scope, req *proto.Request) {
	if req.View != "" {
		u, ok := s.passthrough(m, sc, req)
		if !ok {
			return
		}
		if !sc.cat.PassthroughResource(u, req.Name, sc.pol) {
			s.failIn(m, sc, resourceNotFound(req.Name))
			return
		}
		s.to(m, sc, req, u, "")
		return
	}
	u, ok := sc.cat.ResourceUpstream(req.Name, sc.pol)
	if !ok {
		if u != "" {
			sc.denied = policyResources // an upstream has it; the policy refuses it
		}
		s.failIn(m, sc, resourceNotFound(req.Name))
		return
	}
	s.to(m, sc, req, u, "")
}

// resourceNotFound is the answer for a URI no upstream serves (or the
// tenant may not use).
func resourceNotFound(uri string) *proto.Error {
	return &proto.Error{Code: codeResourceNotFound, Msg: "Resource not found", Data: resourceData(uri)}
}

func resourceData(uri string) []byte {
	b, _ := json.Marshal(map[string]string{"uri": uri})
	return b
}

// taskCall routes tasks/get, tasks/update and tasks/cancel (SEP-2663) to
// the upstream named in the gateway task id (req.Name, from the edge; see
// internal/taskid), which a worker of that upstream then verifies. An id
// naming no upstream of the view, or one the tenant does not see, is
// -32602, as an unknown taskId is.
func (s *Service) taskCall(m *nats.Msg, sc *scope, req *proto.Request) {
	u, ok := taskid.Upstream(req.Name)
	if !ok || !sc.cat.Upstreams[u] || !sc.pol.Upstream(u) || (req.View != "" && req.View != u) {
		s.failIn(m, sc, proto.Errorf(proto.CodeInvalidParams, "%s: unknown taskId %q", req.Method, req.Name))
		return
	}
	s.to(m, sc, req, u, "")
}

// complete routes completion/complete by its reference: a prompt by name
// (renamed like prompts/get), a resource template by its URI template (or
// a resource by its URI) to the upstream that lists it
// (catalog.Snapshot.CompletionUpstream). A reference to an item the
// tenant may not use, or to one no upstream it sees lists, is answered as
// prompts/get and resources/read answer an unknown one, so that the two
// cannot be told apart.
func (s *Service) complete(m *nats.Msg, sc *scope, req *proto.Request) {
	if req.View != "" {
		if _, ok := s.passthrough(m, sc, req); !ok {
			return
		}
	}
	ref, perr := completionRef(req.Params)
	if perr != nil {
		s.failIn(m, sc, perr)
		return
	}
	switch ref.typ {
	case "ref/prompt":
		req.Name = ref.name
		s.promptsGet(m, sc, req)
	case "ref/resource":
		req.Name = ref.uri
		u, ok := sc.cat.CompletionUpstream(req.View, req.Name, sc.pol)
		if !ok {
			s.failIn(m, sc, resourceNotFound(req.Name))
			return
		}
		s.to(m, sc, req, u, "")
	default:
		s.failIn(m, sc, proto.Errorf(proto.CodeInvalidParams, "unknown completion reference type %q", ref.typ))
	}
}

// setLevel forwards logging/setLevel: in a passthrough view to its
// upstream; in the federated view to every upstream the tenant sees that
// is up, answering once all have (an upstream without logging, -32601,
// counts as done).
func (s *Service) setLevel(m *nats.Msg, sc *scope, req *proto.Request) {
	if req.View != "" {
		if u, ok := s.passthrough(m, sc, req); ok {
			s.to(m, sc, req, u, "")
		}
		return
	}
	pres := s.presence.View()
	var ups []fanTarget
	for u := range sc.cat.Upstreams {
		if sc.pol.Upstream(u) && pres.Up(u) {
			ups = append(ups, fanTarget{upstream: u, auth: authFor(sc, m.Header, u)})
		}
	}
	go s.fanOut(m, *req, ups)
}

// fanTarget is one upstream of a fan-out and the Authorization values its
// call carries (nil unless its spec asks for passthrough).
type fanTarget struct {
	upstream string
	auth     []string
}

// fanOut sends req to one worker of each upstream and answers the edge
// with {} when every upstream accepted it, else with the first error.
func (s *Service) fanOut(m *nats.Msg, req proto.Request, ups []fanTarget) {
	deadline := time.Now().Add(30 * time.Second)
	if req.DeadlineUnixMs > 0 {
		deadline = time.UnixMilli(req.DeadlineUnixMs)
	}
	errs := make([]*proto.Error, len(ups))
	var wg sync.WaitGroup
	for i, u := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.ask(req, u, m.Header, time.Until(deadline))
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil && e.Code != proto.CodeMethodNotFound {
			s.fail(m, e)
			return
		}
	}
	if err := bus.RespondReply(s.nc, m.Reply, &proto.Reply{Result: []byte("{}")}); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

// ask sends req to a worker of t's upstream and waits for its reply.
func (s *Service) ask(req proto.Request, t fanTarget, hdr nats.Header, timeout time.Duration) *proto.Error {
	upstream := t.upstream
	worker, perr := s.place(&req, upstream)
	if perr != nil {
		return perr
	}
	req.Upstream, req.Name = upstream, ""
	data, err := proto.Marshal(&req)
	if err != nil {
		return s.internal("request not encoded", upstream, err)
	}
	subj, err := proto.AppendWorkerSubject(nil, worker, proto.Op(req.Method))
	if err != nil {
		return s.internal("worker subject not built", upstream, err)
	}
	var h nats.Header
	if t.auth != nil {
		h = nats.Header{proto.HdrAuthorization: t.auth}
	}
	// Built in a local: a store through out would move out to the heap.
	h = trace.Copy(h, hdr)
	out := &nats.Msg{Subject: string(subj), Data: data, Header: h}
	msg, err := s.nc.RequestMsg(out, timeout)
	switch {
	case errors.Is(err, nats.ErrTimeout):
		return proto.Errorf(proto.CodeTimeout, "upstream %s did not answer in time", upstream)
	case err != nil:
		s.log.Warn("fan-out request failed", proto.LogUpstream, upstream, proto.LogWorker, worker, proto.LogErr, err)
		return proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s is unavailable (its worker did not take the request)", upstream)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(msg.Data, &rep); err != nil {
		s.log.Warn("bad reply envelope", proto.LogUpstream, upstream, proto.LogWorker, worker, proto.LogErr, err)
		return proto.Errorf(proto.CodeBadEnvelope, "upstream %s: the router could not decode the worker's reply", upstream)
	}
	return rep.Error
}

// internal is the error of a request the router could not send for a
// reason of its own: the client gets a correlation id, the log the rest.
func (s *Service) internal(what, upstream string, err error) *proto.Error {
	id := bus.RandomToken(5)
	s.log.Error(what, proto.LogUpstream, upstream, "correlation_id", id, proto.LogErr, err)
	return proto.Errorf(proto.CodeInternal, "internal error (correlation id %s)", id)
}
