package router

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
)

// codeResourceNotFound is the error for a resource no upstream serves:
// Invalid Params, as SEP-2164 standardized it (and the go-sdk answers),
// with the URI in data.
const codeResourceNotFound = proto.CodeInvalidParams

// passthrough returns the upstream of a passthrough view, and false (after
// answering the edge) when the view names no catalog upstream.
func (s *Service) passthrough(m *nats.Msg, req *proto.Request) (string, bool) {
	if !s.snap.Load().Upstreams[req.View] {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "unknown upstream %q", req.View))
		return "", false
	}
	return req.View, true
}

// promptsGet routes prompts/get by the prompt's name (req.Name, from the
// edge): in the federated view the name is mapped back to the upstream's.
// An unknown federated name is -32602, as the specification asks for an
// invalid prompt name.
func (s *Service) promptsGet(m *nats.Msg, req *proto.Request) {
	if req.View != "" {
		if u, ok := s.passthrough(m, req); ok {
			s.to(m, req, u, "")
		}
		return
	}
	e, ok := s.snap.Load().List(proto.KindPrompts, "").Lookup(req.Name)
	if !ok {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "unknown prompt %q", req.Name))
		return
	}
	s.to(m, req, e.Upstream, e.Orig)
}

// resourceCall routes resources/read, subscribe and unsubscribe by the URI
// (req.Name, from the edge); URIs are never renamed.
func (s *Service) resourceCall(m *nats.Msg, req *proto.Request) {
	if req.View != "" {
		if u, ok := s.passthrough(m, req); ok {
			s.to(m, req, u, "")
		}
		return
	}
	u, ok := s.snap.Load().ResourceUpstream(req.Name)
	if !ok {
		s.fail(m, &proto.Error{Code: codeResourceNotFound, Msg: "Resource not found", Data: resourceData(req.Name)})
		return
	}
	s.to(m, req, u, "")
}

func resourceData(uri string) []byte {
	b, _ := json.Marshal(map[string]string{"uri": uri})
	return b
}

// taskCall routes tasks/get, tasks/update and tasks/cancel (SEP-2663) to
// the upstream named in the gateway task id (req.Name, from the edge; see
// internal/taskid), which a worker of that upstream then verifies. An id
// naming no upstream of the view is -32602, as an unknown taskId is.
func (s *Service) taskCall(m *nats.Msg, req *proto.Request) {
	u, ok := taskid.Upstream(req.Name)
	if !ok || !s.snap.Load().Upstreams[u] || (req.View != "" && req.View != u) {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "%s: unknown taskId %q", req.Method, req.Name))
		return
	}
	s.to(m, req, u, "")
}

type completeParams struct {
	Ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"ref"`
}

// complete routes completion/complete by its reference: a prompt by name
// (renamed like prompts/get), a resource template by its URI template.
func (s *Service) complete(m *nats.Msg, req *proto.Request) {
	if req.View != "" {
		if u, ok := s.passthrough(m, req); ok {
			s.to(m, req, u, "")
		}
		return
	}
	var p completeParams
	if err := decodeParams(req.Params, &p); err != nil {
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "invalid params: %v", err))
		return
	}
	switch p.Ref.Type {
	case "ref/prompt":
		req.Name = p.Ref.Name
		s.promptsGet(m, req)
	case "ref/resource":
		req.Name = p.Ref.URI
		s.resourceCall(m, req)
	default:
		s.fail(m, proto.Errorf(proto.CodeInvalidParams, "unknown completion reference type %q", p.Ref.Type))
	}
}

// setLevel forwards logging/setLevel: in a passthrough view to its
// upstream; in the federated view to every upstream that is up, answering
// once all have (an upstream without logging, -32601, counts as done).
func (s *Service) setLevel(m *nats.Msg, req *proto.Request) {
	if req.View != "" {
		if u, ok := s.passthrough(m, req); ok {
			s.to(m, req, u, "")
		}
		return
	}
	snap, pres := s.snap.Load(), s.presence.View()
	var ups []string
	for u := range snap.Upstreams {
		if pres.Up(u) {
			ups = append(ups, u)
		}
	}
	go s.fanOut(m, *req, ups)
}

// fanOut sends req to one worker of each upstream and answers the edge
// with {} when every upstream accepted it, else with the first error.
func (s *Service) fanOut(m *nats.Msg, req proto.Request, ups []string) {
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
			errs[i] = s.ask(req, u, time.Until(deadline))
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

// ask sends req to a worker of upstream and waits for its reply.
func (s *Service) ask(req proto.Request, upstream string, timeout time.Duration) *proto.Error {
	worker, perr := s.place(&req, upstream)
	if perr != nil {
		return perr
	}
	req.Upstream, req.Name = upstream, ""
	data, err := proto.Marshal(&req)
	if err != nil {
		return proto.Errorf(proto.CodeInternal, "router: %v", err)
	}
	subj, err := proto.AppendWorkerSubject(nil, worker, proto.Op(req.Method))
	if err != nil {
		return proto.Errorf(proto.CodeInternal, "router: %v", err)
	}
	msg, err := s.nc.Request(string(subj), data, timeout)
	switch {
	case errors.Is(err, nats.ErrTimeout):
		return proto.Errorf(proto.CodeTimeout, "upstream %s did not answer in time", upstream)
	case err != nil:
		return proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s: %v", upstream, err)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(msg.Data, &rep); err != nil {
		return proto.Errorf(proto.CodeBadEnvelope, "upstream %s: undecodable reply: %v", upstream, err)
	}
	return rep.Error
}
