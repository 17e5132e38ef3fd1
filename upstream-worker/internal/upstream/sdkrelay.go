package upstream

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// The upstream's messages that only the SDK client reads: those of the
// GET stream of streamable HTTP sessions (and, on the SDK call path that
// tests compare with, of their POST streams). The streamable client
// connection must not be wrapped (the SDK calls its unexported
// sessionUpdated), so instead of a relayConn a receiving middleware on
// each session's client (newClient) takes them before the SDK's own
// handlers. It sees the SDK's typed params, which it encodes again for the
// client (members the SDK does not know are lost), and answers with the
// client's result bytes as they are. Taking them in middleware rather
// than through the ClientOptions handlers means the SDK's own checks do
// not run: its elicitation/create handler validates the requested schema
// more strictly than the spec (it rejects a multi-select enum shape the
// spec and the TypeScript client accept), and roots/list has no handler at
// all. The routing is routeConn's.
//
// A GET-stream message is not necessarily unrelated to the call in
// flight: a streamable upstream with JSON responses sends its calls'
// messages there, so the one call in flight on the session gets them.

// rawAnswer is a client's result handed back to the SDK as it is.
type rawAnswer struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawAnswer) MarshalJSON() ([]byte, error) { return r.raw, nil }

// receiving is the receiving middleware of session s's client.
func (u *Upstream) receiving(s *session) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			isReq := relayedRequest(method)
			if s.routed || !isReq && method != notifyProgress && method != notifyUpdated && !relayedNote(method) {
				return next(ctx, method, req)
			}
			m := &upMsg{method: method}
			if p := req.GetParams(); p != nil {
				params, err := json.Marshal(p)
				if err != nil {
					return next(ctx, method, req)
				}
				if string(params) != "null" {
					m.params = params
				}
			}
			switch method {
			case notifyProgress:
				if st, p := u.progressTarget(m.params); st != nil {
					m.params = p
					st.relay.Notify(m.encode())
				}
				return next(ctx, method, req)
			case notifyUpdated:
				u.fanOut(s, updatedURI(m.params), m.encode())
				return next(ctx, method, req) // the SDK's read cache
			}
			st, rl := u.target(s)
			if rl == nil {
				if st != nil || !isReq { // a call without a relay; a notification for nobody
					if st == nil {
						u.log.Debug("upstream notification for no single call dropped", proto.LogMethod, method)
					}
					return next(ctx, method, req)
				}
				u.log.Debug("upstream request for no single call refused", proto.LogMethod, method)
				return nil, errNoClient
			}
			if !isReq {
				rl.Notify(m.encode())
				return nil, nil
			}
			m.id = strconv.AppendQuote([]byte(nil), "sy-ask-"+strconv.FormatUint(u.progSeq.Add(1), 10))
			actx, cancel := u.askContext(st)
			defer cancel()
			defer context.AfterFunc(ctx, cancel)() // the upstream cancelled its request
			var res []byte
			var werr *jsonrpc.Error
			u.ask(actx, rl, m, func(r []byte, e *jsonrpc.Error) { res, werr = r, e })
			if werr != nil {
				return nil, werr
			}
			return &rawAnswer{raw: res}, nil
		}
	}
}
