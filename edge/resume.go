package edge

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// A 2026-07-28 call suspended for the client's input (bridge.go) is held
// by the edge that suspended it: its bus call, its limit ticket and the
// upstream's pending request live there. The client's follow-up may reach
// any edge (behind a round-robin balancer, usually another one): that
// edge sends it to the holding edge (switchyard.v1.edge.<edge>.resume),
// which resumes the call as for a follow-up of its own and streams the
// call's messages and outcome back to the receiving edge's inbox. If the
// call asks for input again, the holding edge suspends it again and the
// new requestState names it again.

// resumeWait bounds how long an edge waits for a call it sent to the
// holding edge to resume, past the call timeout: the holding edge answers
// by the suspension's deadline (at most one call timeout away).
const resumeWait = 2 * time.Second

// errHolderGone answers a follow-up whose holding edge is not on the bus:
// the call it held is gone with it.
var errHolderGone = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown or expired requestState: the edge that held the call is gone"}

// resumeAt sends rq, a follow-up to a call edge holds, to that edge and
// waits for the call's outcome, handing the call's messages to onMsg on
// the calling goroutine, in order, before the outcome. The result is the
// call's raw result (an input_required result when the call asks for
// input again); errors are *jsonrpc.Error, or ctx's cause. A client that
// goes away meanwhile does not cancel the call at the holding edge, which
// ends it by its own deadline; a holding edge that dies meanwhile leaves
// the wait to its bound (the call timeout and resumeWait).
func (s *Service) resumeAt(ctx context.Context, edge string, rq *proto.Resume, onMsg func(*nats.Msg) bool) ([]byte, error) {
	subj, err := proto.EdgeResumeSubject(edge)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown or expired requestState"}
	}
	rq.Inbox = s.nc.NewInbox()
	// A synchronous subscription: its queue grows as needed (a channel
	// would drop what a slow client leaves unread, the outcome too).
	sub, err := s.nc.SubscribeSync(rq.Inbox + ".*")
	if err != nil {
		return nil, s.toJSONRPC(ctx, proto.Errorf(proto.CodeUnavailable, "resume at edge %s: %v", edge, err), rq.Method)
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, err := proto.Marshal(rq)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "resume: " + err.Error()}
	}
	// The reply subject makes the server answer "no responders" on
	// Inbox.r when the holding edge is gone.
	if err := s.nc.PublishMsg(&nats.Msg{Subject: subj, Reply: rq.Inbox + ".r", Data: body}); err != nil {
		return nil, s.toJSONRPC(ctx, proto.Errorf(proto.CodeUnavailable, "resume at edge %s: %v", edge, err), rq.Method)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout+timeoutGrace+resumeWait)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, errHolderGone
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, s.toJSONRPC(ctx, proto.Errorf(proto.CodeTimeout, "%s %s: no answer from edge %s within %s", rq.Method, rq.Name, edge, s.cfg.CallTimeout), rq.Method)
		}
		if proto.LastToken(m.Subject) == "m" {
			if onMsg != nil {
				onMsg(m)
			}
			continue
		}
		if m.Header.Get("Status") == "503" {
			return nil, errHolderGone
		}
		var rep proto.Reply
		if err := proto.Unmarshal(m.Data, &rep); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "resume: bad reply from edge " + edge}
		}
		if rep.Error != nil {
			return nil, &jsonrpc.Error{Code: int64(rep.Error.Code), Message: rep.Error.Msg, Data: rep.Error.Data}
		}
		return rep.Result, nil
	}
}

// onResume resumes, for the edge that sent it, a call this edge suspended
// (resumeAt): the call's messages go to the sender's Inbox.m, its outcome
// (a proto.Reply) to Inbox.r.
func (s *Service) onResume(m *nats.Msg) {
	var rq proto.Resume
	if err := proto.Unmarshal(m.Data, &rq); err != nil || rq.Inbox == "" {
		s.log.Warn("bad resume", proto.LogErr, err)
		if m.Reply != "" {
			s.publishResume(m.Reply, &proto.Reply{Error: &proto.Error{Code: int32(jsonrpc.CodeInvalidParams), Msg: "bad resume message"}})
		}
		return
	}
	go s.resumeFor(&rq)
}

// resumeFor runs onResume's call; see onResume.
func (s *Service) resumeFor(rq *proto.Resume) {
	// resume bounds the wait by the suspension's deadline.
	ctx := context.Background()
	br := &bridge{caps: rq.Caps, s: s}
	fwd := func(m *nats.Msg) bool {
		if err := s.nc.PublishMsg(&nats.Msg{Subject: rq.Inbox + ".m", Header: m.Header, Data: m.Data}); err != nil {
			s.log.Warn("resumed call message not forwarded", proto.LogErr, err)
		}
		return false
	}
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	retry := &proto.Request{Tenant: rq.Tenant, Method: rq.Method, View: rq.View, Name: rq.Name}
	// The state names this edge: a token is never sent on again.
	raw, _, err := s.resume(ctx, bridgePrefix+s.cfg.ID+"."+rq.Token, rq.Responses, retry, rq.User, rq.Caps, &release, br.wrap(fwd, proto.Op(rq.Method)))
	var sp *suspended
	if errors.As(err, &sp) {
		held := release
		release = nil
		raw, err = s.suspend(sp, br.asked, rq.User, held), nil
	}
	rep := &proto.Reply{Result: raw}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		rep = &proto.Reply{Error: &proto.Error{Code: int32(je.Code), Msg: je.Message, Data: je.Data}}
	}
	s.publishResume(rq.Inbox+".r", rep)
}

// publishResume sends rep to a resuming edge.
func (s *Service) publishResume(subj string, rep *proto.Reply) {
	b, err := proto.Marshal(rep)
	if err == nil {
		err = s.nc.Publish(subj, b)
	}
	if err != nil {
		s.log.Warn("resume outcome not sent", proto.LogErr, err)
	}
}
