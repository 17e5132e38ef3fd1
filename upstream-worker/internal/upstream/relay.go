package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Relay carries upstream messages to one client: the messages of one call
// (proto.HdrMessage on the call's reply subject) or of one client session
// (proto.EdgeMsgSubject). Implementations must be safe for concurrent use.
type Relay interface {
	// Notify delivers a JSON-RPC notification (raw JSON) to the client. It
	// must not block for long: it is called on the goroutine that reads the
	// upstream, in the order the upstream sent the messages.
	Notify(msg []byte)
	// Ask delivers a JSON-RPC request (raw JSON; its id means nothing to
	// the client) and returns the client's JSON-RPC response object (raw
	// JSON with "result" or "error"; its id means nothing either). It
	// returns an error when ctx ends first or the client cannot be reached.
	Ask(ctx context.Context, msg []byte) ([]byte, error)
}

type relayKey struct{}

// WithRelay returns ctx carrying the relay of the call that runs with it
// ([Upstream.Call], [Upstream.Request]): the upstream's notifications and
// requests that belong to the call go through r. Without one they are
// dropped, and server-to-client requests are answered as the SDK client
// without handlers answers them.
func WithRelay(ctx context.Context, r Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

func relayFrom(ctx context.Context) Relay {
	r, _ := ctx.Value(relayKey{}).(Relay)
	return r
}

// Methods of upstream messages the worker routes.
const (
	notifyProgress      = "notifications/progress"
	notifyMessage       = "notifications/message"
	notifyUpdated       = "notifications/resources/updated"
	notifyElicitDone    = "notifications/elicitation/complete"
	notifyCancelled     = "notifications/cancelled"
	methodElicit        = "elicitation/create"
	methodCreateMessage = "sampling/createMessage"
	methodListRoots     = "roots/list"
	methodPing          = "ping"
)

// relayedRequest reports whether a server-to-client request of method is
// relayed to the client (the others are answered as the SDK client would).
func relayedRequest(method string) bool {
	return method == methodElicit || method == methodCreateMessage || method == methodListRoots
}

// relayedNote reports whether a notification of method is relayed to the
// client of a call or session (progress and resources/updated have their
// own rules; list_changed is not relayed: it refreshes the catalog, and the
// router tells the clients).
func relayedNote(method string) bool {
	return method == notifyMessage || method == notifyElicitDone
}

// Errors the worker answers an upstream's request with.
var (
	errAskCancelled = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "request cancelled"}
	errNoClient     = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "no client to ask: the request belongs to no single call or client session"}
	errTooManyAsks  = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many requests waiting for clients"}
)

// maxAsks bounds the upstream's requests waiting for clients at once, per
// upstream; beyond it they are refused at once.
const maxAsks = 256

// callState is one call while it runs: its relay (nil: the call's messages
// are dropped) and the progress tokens it sent upstream in place of the
// client's.
type callState struct {
	ctx   context.Context
	relay Relay
	req   *proto.Request
	u     *Upstream

	mu     sync.Mutex
	tokens []string // guarded by mu: our progress tokens, to forget at the end
	sess   *session // guarded by mu: the session the call runs on now
}

// session is the session the call (nil: none) runs on now, or nil.
func (st *callState) session() *session {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sess
}

// beginCall registers a call; end it with end.
func (u *Upstream) beginCall(ctx context.Context, req *proto.Request) *callState {
	return &callState{ctx: ctx, relay: relayFrom(ctx), req: req, u: u}
}

// end forgets the call's progress tokens.
func (st *callState) end() {
	st.mu.Lock()
	toks := st.tokens
	st.tokens = nil
	st.mu.Unlock()
	if len(toks) == 0 {
		return
	}
	u := st.u
	u.progMu.Lock()
	for _, t := range toks {
		delete(u.progress, t)
	}
	u.progMu.Unlock()
}

// progressEntry is what an upstream progress token of ours stands for.
type progressEntry struct {
	st     *callState
	client []byte // the client's token, raw JSON
}

// token returns an upstream-unique progress token (raw JSON string)
// standing for the client's token (raw JSON), remembered until the call
// ends. It names neither the worker nor the client.
func (st *callState) token(client []byte) []byte {
	u := st.u
	n := u.progSeq.Add(1)
	ours := u.progPrefix + strconv.FormatUint(n, 10)
	u.progMu.Lock()
	if u.progress == nil {
		u.progress = map[string]*progressEntry{}
	}
	u.progress[ours] = &progressEntry{st: st, client: bytes.Clone(client)}
	u.progMu.Unlock()
	st.mu.Lock()
	st.tokens = append(st.tokens, ours)
	st.mu.Unlock()
	return appendJSONString(nil, ours)
}

// rewriteMeta returns encoded _meta members with a progressToken replaced
// by one of ours, when the call has a relay (without one, nothing would be
// relayed: the members are returned as they are).
func (st *callState) rewriteMeta(meta []byte) []byte {
	if st == nil || st.relay == nil || len(meta) == 0 || !bytes.Contains(meta, []byte("progressToken")) {
		return meta
	}
	out := make([]byte, 0, len(meta)+24)
	jsonscan.Members(append(append([]byte{'{'}, meta...), '}'), func(k, v []byte) {
		if jsonscan.KeyIs(k, "progressToken") && !isNull(v) {
			v = st.token(v)
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
	})
	return out
}

// progressTarget returns the call and client token behind a progress
// notification's params, or nil when the token is not one of ours. params
// is rewritten with the client's token, byte for byte.
func (u *Upstream) progressTarget(params []byte) (*callState, []byte) {
	if !json.Valid(params) {
		return nil, nil
	}
	var tok []byte
	jsonscan.Members(params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "progressToken") {
			tok = v
		}
	})
	if len(tok) == 0 || tok[0] != '"' {
		return nil, nil
	}
	u.progMu.Lock()
	e := u.progress[jsonscan.Unquote(tok)]
	u.progMu.Unlock()
	if e == nil || e.st.relay == nil {
		return nil, nil
	}
	out := make([]byte, 0, len(params)+len(e.client))
	out = append(out, '{')
	jsonscan.Members(params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "progressToken") {
			v = e.client
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
	})
	return e.st, append(out, '}')
}

// upMsg is a notification or request from the upstream, raw.
type upMsg struct {
	method string
	id     []byte // raw; nil for a notification
	params []byte // raw; nil when absent
}

// encode is the JSON-RPC message for the client.
func (m *upMsg) encode() []byte {
	b := make([]byte, 0, len(m.params)+len(m.method)+len(m.id)+48)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if m.id != nil {
		b = append(append(append(b, `"id":`...), m.id...), ',')
	}
	b = appendJSONString(append(b, `"method":`...), m.method)
	if m.params != nil {
		b = append(append(b, `,"params":`...), m.params...)
	}
	return append(b, '}')
}

// replier answers the upstream's request with a result or an error.
type replier func(result []byte, werr *jsonrpc.Error)

// responseBody is the JSON-RPC response to the upstream's request id.
func responseBody(id, result []byte, werr *jsonrpc.Error) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	if werr != nil {
		e, _ := json.Marshal(werr)
		return append(append(append(b, `,"error":`...), e...), '}')
	}
	return append(append(append(b, `,"result":`...), result...), '}')
}

// parseAnswer reads a client's JSON-RPC response object.
func parseAnswer(resp []byte) ([]byte, *jsonrpc.Error) {
	if !json.Valid(resp) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's answer is not JSON"}
	}
	var result, werr []byte
	jsonscan.Members(resp, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "result"):
			result = v
		case jsonscan.KeyIs(k, "error"):
			werr = v
		}
	})
	if !isNull(werr) {
		e := &jsonrpc.Error{}
		if err := json.Unmarshal(werr, e); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's error is malformed"}
		}
		return nil, e
	}
	if result == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client answered neither a result nor an error"}
	}
	return result, nil
}

// ask asks the client through r for the upstream's request m and answers
// the upstream through reply: the client's result or error; -32603
// "request cancelled" when ctx ends first; -32603 when the client cannot
// be reached.
func (u *Upstream) ask(ctx context.Context, r Relay, m *upMsg, reply replier) {
	resp, err := r.Ask(ctx, m.encode())
	switch {
	case ctx.Err() != nil:
		reply(nil, errAskCancelled)
	case err != nil:
		u.log.Debug("relayed request not answered", proto.LogMethod, m.method, proto.LogErr, err)
		reply(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "client not reached"}) // err, logged, names the gateway's internals
	default:
		reply(parseAnswer(resp))
	}
}

// goAsk runs ask on its own goroutine (at most maxAsks at once), so that
// the reader of the upstream goes on: for call st, or for a client session
// (st nil: bounded by AskTimeout). m must not alias a reused buffer.
func (u *Upstream) goAsk(st *callState, r Relay, m *upMsg, reply replier) {
	select {
	case u.asks <- struct{}{}:
	default:
		u.closer.Go(func() { reply(nil, errTooManyAsks) })
		return
	}
	u.closer.Go(func() {
		defer func() { <-u.asks }()
		ctx, cancel := u.askContext(st)
		defer cancel()
		u.ask(ctx, r, m, reply)
	})
}

// askContext bounds a relayed request: by its call, or for a session-level
// one by AskTimeout and the worker's life.
func (u *Upstream) askContext(st *callState) (context.Context, context.CancelFunc) {
	if st != nil {
		return context.WithCancel(st.ctx)
	}
	return context.WithTimeout(u.closer.Life(), u.opts.AskTimeout)
}

// sessionRelay is the relay of the client session k, or nil.
func (u *Upstream) sessionRelay(k sessKey) Relay {
	if u.opts.Sessions == nil {
		return nil
	}
	return u.opts.Sessions(k.edge, k.session)
}

// target is where a message that arrived outside any call's own response
// stream goes (progress and resources/updated aside): the one call in
// flight on s, if there is exactly one; else the client session s is
// dedicated to; else nobody (st and r nil). A call without a relay is
// returned as st with a nil relay.
func (u *Upstream) target(s *session) (st *callState, r Relay) {
	if st := s.single(); st != nil {
		return st, st.relay
	}
	if s.owner != nil {
		return nil, u.sessionRelay(*s.owner)
	}
	return nil, nil
}

// fanOut delivers a notifications/resources/updated (raw message msg, the
// updated uri) that arrived on s to the client sessions it concerns: the
// one s is dedicated to, or on a shared session every client session that
// subscribed to uri through it.
func (u *Upstream) fanOut(s *session, uri string, msg []byte) {
	if s.owner != nil {
		if r := u.sessionRelay(*s.owner); r != nil {
			r.Notify(msg)
		}
		return
	}
	for _, k := range s.subscribers(uri) {
		if r := u.sessionRelay(k); r != nil {
			r.Notify(msg)
		}
	}
}

// updatedURI is the uri of a resources/updated notification's params.
func updatedURI(params []byte) string {
	var uri string
	if json.Valid(params) {
		jsonscan.Members(params, func(k, v []byte) {
			if jsonscan.KeyIs(k, "uri") && len(v) > 0 && v[0] == '"' {
				uri = jsonscan.Unquote(v)
			}
		})
	}
	return uri
}

// enter registers st as in flight on s; leave undoes it.
func (s *session) enter(st *callState) {
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[*callState]struct{}{}
	}
	s.inflight[st] = struct{}{}
	s.mu.Unlock()
	st.mu.Lock()
	st.sess = s
	st.mu.Unlock()
}

func (s *session) leave(st *callState) {
	s.mu.Lock()
	delete(s.inflight, st)
	s.mu.Unlock()
}

// single returns the call in flight on s if there is exactly one.
func (s *session) single() *callState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inflight) != 1 {
		return nil
	}
	for st := range s.inflight {
		return st
	}
	return nil
}

// subscribed records that client session k subscribed to uri through s.
func (s *session) subscribed(uri string, k sessKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[string]map[sessKey]struct{}{}
	}
	if s.subs[uri] == nil {
		s.subs[uri] = map[sessKey]struct{}{}
	}
	s.subs[uri][k] = struct{}{}
}

// unsubscribed forgets k's subscription to uri and reports whether other
// client sessions are still subscribed to it through s.
func (s *session) unsubscribed(uri string, k sessKey) (others bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.subs[uri]
	delete(set, k)
	if len(set) == 0 {
		delete(s.subs, uri)
		return false
	}
	return true
}

// othersSubscribed reports whether a client session other than k is
// subscribed to uri through s.
func (s *session) othersSubscribed(uri string, k sessKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for o := range s.subs[uri] {
		if o != k {
			return true
		}
	}
	return false
}

// subscribers returns the client sessions subscribed to uri through s.
func (s *session) subscribers(uri string) []sessKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sessKey, 0, len(s.subs[uri]))
	for k := range s.subs[uri] {
		out = append(out, k)
	}
	return out
}

// dropSubscriber forgets every subscription of client session k.
func (s *session) dropSubscriber(k sessKey) (orphans []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uri, set := range s.subs {
		if _, ok := set[k]; !ok {
			continue
		}
		delete(set, k)
		if len(set) == 0 {
			delete(s.subs, uri)
			orphans = append(orphans, uri)
		}
	}
	return orphans
}

// hasSubscribers reports whether any client session is subscribed to uri
// through s.
func (s *session) hasSubscribers(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs[uri]) > 0
}

// relayTransport wraps a transport whose connection is not the streamable
// client's (legacy SSE; stdio on the SDK call path) so that route sees the
// upstream's messages before the SDK does, in order, on the SDK's reader
// goroutine (pipeConn does the same on stdio's raw call path).
type relayTransport struct {
	inner mcp.Transport
	route func(mcp.Connection, *jsonrpc.Request) bool
}

func (t *relayTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &relayConn{Connection: c, route: t.route}, nil
}

type relayConn struct {
	mcp.Connection
	route func(mcp.Connection, *jsonrpc.Request) bool
}

// Read passes every message to the SDK but those route takes.
func (c *relayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if r, ok := msg.(*jsonrpc.Request); ok && c.route(c.Connection, r) {
			continue
		}
		return msg, nil
	}
}

// router is the route of session s's connection (routeConn).
func (u *Upstream) router(s *session) func(mcp.Connection, *jsonrpc.Request) bool {
	return func(c mcp.Connection, r *jsonrpc.Request) bool { return u.routeConn(s, c, r) }
}

// routeConn takes the upstream's messages on session s (a stdio process, a
// legacy SSE session) that the worker relays out of the SDK's message
// stream, raw and in order; the rest (pings, list_changed, cancellations,
// unknown methods) still reach the SDK. c is the connection to write
// answers on.
//
// Such a message names no call, so:
//   - notifications/progress goes to the call whose progress token it
//     carries (ours, swapped back for the client's);
//   - notifications/resources/updated goes to the client session s is
//     dedicated to, or on a shared session to every client session that
//     subscribed to its URI through s (the SDK sees it too);
//   - logging, elicitation/complete and the elicitation, sampling and roots
//     requests go to the call in flight on s if there is exactly one; else
//     to the client session s is dedicated to, as session-level messages;
//     else (a shared session: a stdio process, with several calls in
//     flight or none) they belong to nobody: logged at debug, a request
//     answered -32603.
//
// A message attributed to a call without a relay reaches the SDK, which
// handles it as it did before relaying existed.
func (u *Upstream) routeConn(s *session, c mcp.Connection, r *jsonrpc.Request) bool {
	m := &upMsg{method: r.Method, params: r.Params}
	switch {
	case r.Method == notifyProgress && !r.IsCall():
		st, p := u.progressTarget(r.Params)
		if st == nil {
			return false
		}
		m.params = p
		st.relay.Notify(m.encode())
		return true
	case r.Method == notifyUpdated && !r.IsCall():
		u.fanOut(s, updatedURI(r.Params), m.encode())
		return false
	case r.IsCall() && relayedRequest(r.Method), !r.IsCall() && relayedNote(r.Method):
	default:
		return false
	}
	st, rl := u.target(s)
	if st != nil && rl == nil {
		return false
	}
	if !r.IsCall() {
		if rl == nil {
			u.log.Debug("upstream notification for no single call dropped", proto.LogMethod, r.Method)
		} else {
			rl.Notify(m.encode())
		}
		return true
	}
	reply := u.connReplier(c, r.ID, r.Method)
	if rl == nil {
		u.log.Debug("upstream request for no single call refused", proto.LogMethod, r.Method)
		u.closer.Go(func() { reply(nil, errNoClient) })
		return true
	}
	id, err := json.Marshal(r.ID.Raw())
	if err != nil { // cannot happen: ids are strings or integers
		return false
	}
	m.id = id
	u.goAsk(st, rl, m, reply)
	return true
}

// connReplier writes the answer to the upstream's request id on c,
// bounded like a cancellation; a failure is logged.
func (u *Upstream) connReplier(c mcp.Connection, id jsonrpc.ID, method string) replier {
	return func(result []byte, werr *jsonrpc.Error) {
		resp := &jsonrpc.Response{ID: id, Result: result}
		if werr != nil {
			resp.Result, resp.Error = nil, werr
		}
		ctx, cancel := context.WithTimeout(u.closer.Life(), cancelTimeout)
		defer cancel()
		if err := c.Write(ctx, resp); err != nil {
			u.log.Debug("answer to upstream request failed", proto.LogMethod, method, proto.LogErr, err)
		}
	}
}
