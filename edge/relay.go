package edge

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/edge/internal/sessionstore"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Upstream messages (proto.HdrMessage) reach the client in one of two
// ways. On the SDK path, and for sessions whose responses are JSON, they go
// through the SDK session's own sending handler with raw params, so the
// SDK frames them and routes them (to the request's stream when the ctx is
// the request handler's, else to the session's GET stream) and matches the
// client's answers to requests itself. On the fast path with SSE
// responses, the edge writes them into the call's own event stream and
// matches the client's answers by a relay id it gives each request.

// upMsg is one upstream message for the client.
type upMsg struct {
	method string
	id     json.RawMessage // nil for a notification
	params json.RawMessage
	raw    []byte
	reply  string // where the client's answer goes (requests)
}

// parseUpMsg reads a JSON-RPC notification or request; ok is false for
// anything else.
func parseUpMsg(m *nats.Msg) (*upMsg, bool) {
	u := &upMsg{raw: m.Data, reply: m.Reply}
	obj := jsonscan.Members(m.Data, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "method"):
			if len(v) > 0 && v[0] == '"' {
				u.method = jsonscan.Unquote(v)
			}
		case jsonscan.KeyIs(k, "id"):
			u.id = v
		case jsonscan.KeyIs(k, "params"):
			u.params = v
		}
	})
	if !obj || u.method == "" || !json.Valid(m.Data) {
		return nil, false
	}
	if string(u.id) == "null" {
		u.id = nil
	}
	return u, true
}

// rawParams are params the SDK sends as they are. Embedding an SDK params
// type gives it the SDK's unexported Params methods; MarshalJSON wins over
// the embedded type's encoding.
type rawParams struct {
	*mcp.ElicitParams
	raw json.RawMessage
}

func (p *rawParams) MarshalJSON() ([]byte, error) {
	if len(p.raw) == 0 {
		return []byte("{}"), nil
	}
	return p.raw, nil
}

// rawRequest is an outgoing request or notification of ss with raw params.
type rawRequest struct {
	*mcp.ServerRequest[*mcp.ElicitParams]
	params *rawParams
}

func (r *rawRequest) GetParams() mcp.Params { return r.params }

func newRawRequest(ss *mcp.ServerSession, params json.RawMessage) *rawRequest {
	return &rawRequest{
		ServerRequest: &mcp.ServerRequest[*mcp.ElicitParams]{Session: ss, Params: &mcp.ElicitParams{}},
		params:        &rawParams{ElicitParams: &mcp.ElicitParams{}, raw: params},
	}
}

// sdkRelay delivers upstream messages through ss's sending handler in ctx:
// notifications in order on the calling goroutine, requests each on its
// own goroutine (tracked by wg) that publishes the client's answer.
func (s *Service) sdkRelay(ctx context.Context, v *view, ss *mcp.ServerSession, wg *sync.WaitGroup) func(*nats.Msg) bool {
	return func(m *nats.Msg) bool {
		u, ok := parseUpMsg(m)
		if !ok {
			s.log.Warn("bad upstream message", proto.LogSubject, m.Subject)
			return false
		}
		send := v.sender()
		if u.id == nil {
			if _, err := send(ctx, u.method, newRawRequest(ss, u.params)); err != nil {
				s.log.Debug("upstream notification not delivered", proto.LogMethod, u.method, proto.LogErr, err)
			}
			return false
		}
		if u.reply == "" {
			return false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := send(ctx, u.method, newRawRequest(ss, u.params))
			s.answer(u.reply, res, err)
		}()
		return false
	}
}

// answer publishes the client's answer to a relayed request: the result,
// the client's JSON-RPC error, or -32603 when it could not be asked.
func (s *Service) answer(reply string, res mcp.Result, err error) {
	var body []byte
	if err == nil {
		result, merr := json.Marshal(res)
		if merr != nil {
			err = merr
		} else {
			body = append(append([]byte(`{"jsonrpc":"2.0","id":0,"result":`), result...), '}')
		}
	}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			// For the upstream: err names the gateway's internals.
			s.log.Debug("relayed request not answered", proto.LogErr, err)
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "client not reached"}
		}
		e, _ := json.Marshal(je)
		body = append(append([]byte(`{"jsonrpc":"2.0","id":0,"error":`), e...), '}')
	}
	if perr := s.nc.Publish(reply, body); perr != nil {
		s.log.Warn("answer not sent", proto.LogErr, perr)
	}
}

// refuse answers a relayed request the client cannot be asked (a 2026-era
// call has no server-to-client requests).
func (s *Service) refuse(u *upMsg, why string) {
	if u.reply == "" {
		return
	}
	s.answer(u.reply, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why})
}

// relayIDs numbers the requests the fast path relays, edge-wide.
var relayIDs atomic.Uint64

// relayPrefix starts the id of every request the fast path relays.
const relayPrefix = "sy-relay-"

// relayID is the id a relayed request carries to the client (a JSON
// string): the edge's id in it tells any other edge that receives the
// client's answer where to forward it (forwardAnswer).
func (s *Service) relayID() string {
	return `"` + relayPrefix + s.cfg.ID + "-" + strconv.FormatUint(relayIDs.Add(1), 10) + `"`
}

// relayEdge returns the edge that relayed the request of relay id key (an
// idKey), or "" if key is not a relay id.
func relayEdge(key string) string {
	rest, ok := strings.CutPrefix(key, "s"+relayPrefix)
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return ""
	}
	if _, err := strconv.ParseUint(rest[i+1:], 10, 64); err != nil || !proto.ValidToken(rest[:i]) {
		return ""
	}
	return rest[:i]
}

// onSessionMsg delivers a session-level upstream message (subject
// proto.EdgeMsgSubject of the session's origin edge; every edge takes
// every edge's) to its client session's stream, wherever it is:
//
//   - the edge holding a GET stream of the session (or a legacy SSE
//     session, which is its stream) delivers it;
//   - the origin edge, holding the session without a stream, delivers it
//     too (the SDK keeps it for a GET stream that opens or resumes there),
//     and refuses a request of a session that has ended (no record);
//   - every other edge drops it.
//
// A client with GET streams open on two edges gets a message on each; a
// request the first answer settles (the worker takes one answer).
func (s *Service) onSessionMsg(m *nats.Msg) {
	if s.onListenMsg(m) {
		return
	}
	origin := proto.LastToken(strings.TrimSuffix(m.Subject, ".msg")) == s.cfg.ID
	sid := m.Header.Get(proto.HdrSession)
	cs := s.sessions.get(sid)
	if cs == nil {
		if origin {
			if u, ok := parseUpMsg(m); ok && u.id != nil && u.reply != "" {
				go func() { // a store read: not on the subscription's goroutine
					if s.sessionEnded404(sid) {
						s.refuse(u, "client session gone")
					}
				}()
			}
		}
		return
	}
	if !origin && cs.streams.Load() == 0 && (cs.ss == nil || cs.ss.ID() != "") {
		return // no stream here (a legacy SSE session has no SDK id: it is its stream)
	}
	s.mu.Lock()
	v := s.views[cs.view]
	s.mu.Unlock()
	if v == nil {
		return
	}
	logGate(s.sdkRelay(context.Background(), v, cs.ss, &cs.asks), cs.level())(m)
}

// sessionEnded404 reports whether session sid has no record in the
// session store (ended, or never stored): nobody serves it.
func (s *Service) sessionEnded404(sid string) bool {
	st := s.store.Load()
	if st == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, err := st.Get(ctx, sid)
	return errors.Is(err, sessionstore.ErrNotFound)
}
