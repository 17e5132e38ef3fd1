package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// callKey identifies a call for cancellation: the edge's id of it.
type callKey struct {
	edge string
	id   uint64
}

type callEntry struct{ cancel context.CancelFunc }

// subscribe sets up the worker's own subscriptions: pinned calls, presence
// queries and session_closed events. Pool subjects are subscribed per
// upstream by the manager.
func (s *Service) subscribe() error {
	for _, sub := range []struct {
		subj, queue string
		cb          nats.MsgHandler
	}{
		// A queue group, so that if two processes were ever started with one
		// id a call still runs once.
		{s.wkSubj, "worker." + s.cfg.ID, func(m *nats.Msg) { s.onMsg(m, "") }},
		{s.grSubj, "worker." + s.cfg.ID, s.onGranted},
		{proto.SubjEvtPresence, "", func(*nats.Msg) { s.kickHeartbeat() }},
		{proto.SubjEvtSessionClosedAll, "", s.onSessionClosed},
	} {
		// Guarded (bus.Guard): a message a JetStream consumer delivers to
		// a subscription keeps its stored subject and is dropped.
		ns, err := s.nc.QueueSubscribe(sub.subj, sub.queue, bus.Guard(sub.subj, sub.cb))
		if err != nil {
			return err
		}
		switch sub.subj {
		case s.wkSubj:
			s.wkSub.Store(ns)
		case s.grSubj:
			s.grSub.Store(ns)
		}
		s.subs = append(s.subs, ns)
	}
	return nil
}

// checkUniqueID refuses to start when a live worker already answers on this
// worker's subject: two processes with one id would share its calls and
// confuse session placement. Any answer (a worker answers an unknown op
// with an error) means the id is taken; no responders means it is free.
func (s *Service) checkUniqueID() error {
	subj, err := proto.AppendWorkerSubject(nil, s.cfg.ID, "probe")
	if err != nil {
		return err
	}
	_, err = s.nc.Request(string(subj), nil, 500*time.Millisecond)
	switch {
	case err == nil:
		return fmt.Errorf("worker: id %q is already in use by a live worker; give each worker its own --id", s.cfg.ID)
	case errors.Is(err, nats.ErrNoResponders):
		return nil
	default:
		s.log.Warn("worker id check inconclusive", proto.LogErr, err)
		return nil
	}
}

// subscribePool subscribes the pool subject of one upstream, in its queue
// group.
func (s *Service) subscribePool(name string) (*nats.Subscription, error) {
	subj, err := proto.PoolSubjectAll(name)
	if err != nil {
		return nil, err
	}
	return s.nc.QueueSubscribe(subj, proto.PoolQueue(name), bus.Guard(subj, func(m *nats.Msg) { s.onMsg(m, name) }))
}

func (s *Service) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.subs = nil
}

// stopIntake drains every subscription (pending messages are still
// handled), waits for the drains until deadline, then closes admission:
// a message handled after that is answered proto.CodeUnavailable.
func (s *Service) stopIntake(deadline time.Time) {
	s.live.Store(false)
	subs := slices.Concat(s.subs, s.mgr.poolSubs())
	var closed []<-chan nats.SubStatus
	for _, sub := range subs {
		closed = append(closed, sub.StatusChanged(nats.SubscriptionClosed))
		_ = sub.Drain()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
wait:
	for _, c := range closed {
		select {
		case <-c:
		case <-t.C:
			break wait
		}
	}
	s.unsubscribe()
	s.intakeMu.Lock()
	s.intakeOpen = false
	s.intakeMu.Unlock()
}

// onMsg is the NATS callback of the worker and pool subjects: it decodes,
// admits and hands the work to a goroutine, never blocking. pool is the
// upstream of a pool subject ("" for the worker subject).
func (s *Service) onMsg(m *nats.Msg, pool string) {
	switch op := proto.LastToken(m.Subject); op {
	case proto.OpCancel:
		s.onCancel(m)
	case proto.OpInFlight:
		s.onInFlight(m)
	case proto.OpToolsList:
		// Routers answer tools/list from the catalog.
		s.unknownOp(m, op)
	default:
		// tools_call, catalog, and every other forwarded method's op: the
		// envelope's Method says which (onRequest checks it).
		s.onRequest(m, op, pool)
	}
}

func (s *Service) unknownOp(m *nats.Msg, op string) {
	s.respond(m, &proto.Reply{Error: proto.Errorf(proto.CodeMethodNotFound, "method of op %q not served by workers", op)})
}

// forwardedOp reports whether op is the op of req's forwarded method (any
// forwarded method but tools/list and tools/call, which has its own case).
func forwardedOp(op string, req *proto.Request) bool {
	fop, ok := proto.Forwarded(req.Method)
	return ok && fop == op && op != proto.OpToolsList && op != proto.OpToolsCall
}

func (s *Service) onRequest(m *nats.Msg, op, pool string) {
	var req proto.Request
	if err := proto.Unmarshal(m.Data, &req); err != nil {
		// (Of an unknown op too: ops are recognised by the envelope's
		// Method.)
		s.badEnvelope(m, err)
		return
	}
	s.serve(m, op, pool, &req)
}

// onGranted is the NATS callback of the grant subject: a tools/call an
// edge sends on a route grant. It runs the call only when the request's
// token (proto.Request.Grant) is a router's MAC of its tenant, upstream
// and tool that has not expired; otherwise it answers
// proto.CodeNotDelivered (the call ran nowhere: an honest edge drops the
// grant and places the call through a router). Edges may publish here
// and not on the worker subject, so no edge credential reaches a tool no
// router granted.
func (s *Service) onGranted(m *nats.Msg) {
	op := proto.LastToken(m.Subject)
	if op != proto.OpToolsCall {
		s.unknownOp(m, op)
		return
	}
	var req proto.Request
	if err := proto.Unmarshal(m.Data, &req); err != nil {
		s.badEnvelope(m, err)
		return
	}
	if err := s.grantKey.Load().Verify(req.Grant, req.Tenant, req.Upstream, req.Name, time.Now()); err != nil {
		if !errors.Is(err, grant.ErrExpired) {
			s.log.Warn("route grant refused", proto.LogTenant, req.Tenant, proto.LogUpstream, req.Upstream, proto.LogErr, err)
		}
		s.respond(m, &proto.Reply{Error: proto.Errorf(proto.CodeNotDelivered, "route grant refused (%v): place the call through a router", err)})
		return
	}
	s.serve(m, op, "", &req)
}

// serve runs a decoded request of op (pool: the upstream of a pool
// subject, "" for the worker and grant subjects).
func (s *Service) serve(m *nats.Msg, op, pool string, r *proto.Request) {
	req := *r
	if op != proto.OpToolsCall && op != proto.OpCatalog && !forwardedOp(op, &req) {
		s.unknownOp(m, op)
		return
	}
	name := pool // a pool subject names the upstream
	if name == "" {
		name = req.Upstream
	}
	u := s.mgr.get(name)
	if u == nil {
		s.respond(m, &proto.Reply{Error: proto.Errorf(proto.CodeUpstreamUnavailable,
			"upstream %s unavailable: not served by the worker the call reached", name)})
		return
	}
	ctx, cancel := context.WithDeadline(s.callBase, s.deadline(&req, u))
	if hop.Traced(m.Header) {
		m = traced(m)
		ctx = hop.With(ctx, hop.NewTrace(m.Header))
	}
	key := callKey{req.Edge, req.ID}
	if to := replyTo(m); to != "" && op != proto.OpCatalog {
		// The upstream's notifications and requests for the client go to
		// the edge on the call's reply subject, before the reply.
		ctx = upstream.WithRelay(ctx, s.callRelay(to))
	}
	if op != proto.OpCatalog && u.Passthrough() {
		// The client's Authorization, which the router forwards only to
		// passthrough upstreams; on any other upstream it is ignored, so a
		// router's mistake cannot send it where it was not meant to go.
		// (It is never logged.)
		ctx = upstream.WithAuthorization(ctx, m.Header.Get(proto.HdrAuthorization))
	}
	var work func(ctx context.Context) *proto.Reply
	switch op {
	case proto.OpToolsCall:
		work = func(ctx context.Context) *proto.Reply {
			res, perr := u.Call(ctx, &req)
			return &proto.Reply{Result: res, Error: perr}
		}
	case proto.OpCatalog:
		work = func(ctx context.Context) *proto.Reply { return &proto.Reply{Error: u.RefreshCatalog(ctx)} }
		key = callKey{} // not cancellable
	default:
		work = func(ctx context.Context) *proto.Reply {
			res, perr := u.Request(ctx, &req)
			return &proto.Reply{Result: res, Error: perr}
		}
	}
	// Guarded: WrapUpstream's off path returns at once, but inlined its
	// closure's captures would still be moved to the heap on every call.
	if op != proto.OpCatalog && s.cfg.Tracer.Enabled() {
		work = s.cfg.Tracer.WrapUpstream(m.Header, trace.Call{
			Method: req.Method, Name: req.Name, Tenant: req.Tenant, Upstream: name, Worker: s.cfg.ID,
		}, work)
	}
	method := req.Method
	if op == proto.OpCatalog {
		method = "" // the worker's own catalog refresh: not a client request
	}
	s.dispatch(m, key, ctx, cancel, u.Name(), method, work)
}

// deadline is the earliest of the request's deadline and now plus the
// upstream's (or the worker's) call timeout.
func (s *Service) deadline(req *proto.Request, u *upstream.Upstream) time.Time {
	d := time.Now().Add(u.CallTimeout(s.cfg.CallTimeout))
	if req.DeadlineUnixMs > 0 {
		if rd := time.UnixMilli(req.DeadlineUnixMs); rd.Before(d) {
			d = rd
		}
	}
	return d
}

// dispatch admits the work (or answers Overloaded / Unavailable at once)
// and runs it on a goroutine of s.runner, cancellable under key. Its time,
// from admission to the answer, is recorded for upstream and method ("":
// not recorded) and sent in the reply: every reply dispatch sends, a refusal
// and a catalog refresh's included, carries Upstream up and ServiceNs
// (see [proto.Reply]), so the edge learns who served a call and for how
// long whatever the outcome.
func (s *Service) dispatch(m *nats.Msg, key callKey, ctx context.Context, cancel context.CancelFunc, up, method string, work func(context.Context) *proto.Reply) {
	start := time.Now()
	if perr := s.admit(); perr != nil {
		cancel()
		if method != "" {
			s.met.Upstream(up, method, int64(perr.Code), start)
		}
		s.respond(m, &proto.Reply{Error: perr, Upstream: up, ServiceNs: time.Since(start).Nanoseconds()})
		return
	}
	e := s.track(key, cancel)
	s.runner.run(func() {
		defer s.inflight.Done()
		defer func() { <-s.sem }()
		defer s.untrack(key, e)
		defer cancel()
		r := work(ctx)
		if r.Error != nil && s.callBase.Err() != nil {
			r.Error = errShutDown
		}
		// The span the histogram below observes (it reads the clock again
		// a few nanoseconds later).
		r.Upstream, r.ServiceNs = up, time.Since(start).Nanoseconds()
		if method != "" {
			var code int64
			if r.Error != nil {
				code = int64(r.Error.Code)
			}
			s.met.Upstream(up, method, code, start)
		}
		s.respond(m, r)
		if key.id != 0 {
			if to := replyTo(m); to != "" {
				s.kept.put(key, to, r, time.Now())
			}
		}
	})
}

// The worker's own errors, as clients may see them: no worker id (an
// operator's name for a host, often its hostname), no decoder's text; the
// log has both.
var (
	errShutDown     = &proto.Error{Code: proto.CodeWorkerLost, Msg: "the worker serving the call shut down during it"}
	errShuttingDown = &proto.Error{Code: proto.CodeUnavailable, Msg: "the worker is shutting down"}
	errTooManyCalls = &proto.Error{Code: proto.CodeOverloaded, Msg: "the worker has too many calls in flight"}
	errBadEnvelope  = &proto.Error{Code: proto.CodeBadEnvelope, Msg: "the worker could not decode the request"}
)

// admit takes an in-flight token.
func (s *Service) admit() *proto.Error {
	s.intakeMu.RLock()
	defer s.intakeMu.RUnlock()
	if !s.intakeOpen {
		return errShuttingDown
	}
	select {
	case s.sem <- struct{}{}:
	default:
		return errTooManyCalls
	}
	s.inflight.Add(1)
	return nil
}

// track registers cancel under key (calls without an id are not
// cancellable).
func (s *Service) track(key callKey, cancel context.CancelFunc) *callEntry {
	if key.id == 0 {
		return nil
	}
	e := &callEntry{cancel: cancel}
	s.callsMu.Lock()
	s.calls[key] = e
	s.callsMu.Unlock()
	return e
}

func (s *Service) untrack(key callKey, e *callEntry) {
	if e == nil {
		return
	}
	s.callsMu.Lock()
	if s.calls[key] == e {
		delete(s.calls, key)
	}
	s.callsMu.Unlock()
}

// onCancel cancels the in-flight call (Cancel.Edge, Cancel.ID); the SDK
// then sends notifications/cancelled upstream and the call's handler
// returns at once, even if the upstream ignores the cancellation.
func (s *Service) onCancel(m *nats.Msg) {
	var c proto.Cancel
	if err := proto.Unmarshal(m.Data, &c); err != nil {
		s.badEnvelope(m, err)
		return
	}
	s.callsMu.Lock()
	e := s.calls[callKey{c.Edge, c.ID}]
	s.callsMu.Unlock()
	if e != nil {
		e.cancel()
	}
	s.respond(m, &proto.Reply{})
}

// onInFlight answers which of the asked calls this worker still runs, and
// sends again the kept replies of those it finished lately (keep.go),
// naming them in the answer's Resent. The others never reached it, unless
// the answer says Unsure (a reply left the keep early).
func (s *Service) onInFlight(m *nats.Msg) {
	var q proto.InFlight
	if err := proto.Unmarshal(m.Data, &q); err != nil {
		s.badEnvelope(m, err)
		return
	}
	backlog := s.backlog()
	var running, resent []proto.Cancel
	now := time.Now()
	for _, c := range q.Calls {
		key := callKey{c.Edge, c.ID}
		s.callsMu.Lock()
		run := s.calls[key] != nil
		s.callsMu.Unlock()
		if run {
			running = append(running, c)
			continue
		}
		if to, r, ok := s.kept.get(key, now); ok {
			if err := bus.RespondReply(s.nc, to, r); err == nil {
				resent = append(resent, c)
			}
		}
	}
	if len(resent) > 0 {
		s.log.Info("replies sent again after a bus interruption", "calls", len(resent))
	}
	data, err := proto.Marshal(&proto.InFlight{Calls: running, Resent: resent, Unsure: s.kept.unsure(now), Backlog: backlog, Boot: s.boot})
	if err == nil && m.Reply != "" {
		err = s.nc.Publish(m.Reply, data)
	}
	if err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}

// backlogWait bounds how long an in_flight question waits for the calls
// queued unread in the worker's other subscriptions when it came.
const backlogWait = 300 * time.Millisecond

// backlog reports whether calls queued unread in the worker's grant and
// pool subscriptions when the question came are still unread after
// backlogWait: a call the worker does not know may be among them. (Calls
// on the worker subject came before the question, on the same
// subscription: they are taken already.)
func (s *Service) backlog() bool {
	type mark struct {
		sub  *nats.Subscription
		want int64
	}
	var marks []mark
	for _, sub := range append(s.mgr.poolSubs(), s.grSub.Load()) {
		if sub == nil {
			continue
		}
		// Delivered first: a message delivered between the two reads
		// then lowers the mark, never raises it past what was queued.
		d, err := sub.Delivered()
		if err != nil {
			continue
		}
		n, _, err := sub.Pending()
		if err != nil || n == 0 {
			continue
		}
		marks = append(marks, mark{sub, d + int64(n)})
	}
	if len(marks) == 0 {
		// The last call delivered may still be in its callback, which
		// tracks it before it returns.
		time.Sleep(5 * time.Millisecond)
		return false
	}
	deadline := time.Now().Add(backlogWait)
	for _, m := range marks {
		for {
			d, err := m.sub.Delivered()
			if err != nil || d >= m.want {
				break
			}
			if time.Now().After(deadline) {
				return true
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The last call counted delivered may still be in its callback, which
	// tracks it before it returns.
	time.Sleep(5 * time.Millisecond)
	return false
}

// onSessionClosed closes the upstream sessions dedicated to a client
// session that ended.
func (s *Service) onSessionClosed(m *nats.Msg) {
	var ev proto.SessionClosed
	if err := proto.Unmarshal(m.Data, &ev); err != nil {
		s.log.Warn("bad session_closed event", proto.LogSubject, m.Subject, proto.LogErr, err)
		return
	}
	for _, u := range s.mgr.all() {
		u.SessionClosed(ev.Edge, ev.Session)
	}
}

func (s *Service) badEnvelope(m *nats.Msg, err error) {
	s.log.Warn("bad envelope", proto.LogSubject, m.Subject, proto.LogErr, err)
	s.respond(m, &proto.Reply{Error: errBadEnvelope})
}

// replyTo is where m is answered: the edge's subject that a router puts in
// proto.HdrReplyTo (the message's own reply subject is then the router's,
// for no-responders), else m.Reply.
func replyTo(m *nats.Msg) string {
	if to := m.Header.Get(proto.HdrReplyTo); to != "" {
		return to
	}
	return m.Reply
}

// traced returns a copy of m with its own header, stamped worker_in, into
// which the call adds its upstream stamps; respond returns them.
func traced(m *nats.Msg) *nats.Msg {
	c := &nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: m.Data, Header: nats.Header{}}
	for k, v := range m.Header {
		c.Header[k] = v
	}
	hop.Set(c.Header, hop.WorkerIn)
	return c
}

// respond answers m (if it has a reply subject), chunking big replies.
func (s *Service) respond(m *nats.Msg, r *proto.Reply) {
	to := replyTo(m)
	if to == "" {
		return
	}
	r.Worker = s.cfg.ID
	var hdr nats.Header
	if hop.Traced(m.Header) {
		hdr = nats.Header{}
		hop.Copy(hdr, m.Header)
		hop.Set(hdr, hop.WorkerOut)
	}
	if err := bus.RespondReplyHeader(s.nc, to, r, hdr); err != nil {
		s.log.Warn("reply failed", proto.LogSubject, m.Subject, proto.LogErr, err)
	}
}
