package edge

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// fastOut is the response of one fast-path call. Only the call's goroutine
// writes it.
type fastOut struct {
	w       http.ResponseWriter
	started bool     // the SSE stream is open: headers sent
	relayed []string // relay ids of requests sent to the client
}

// event writes one JSON-RPC message as an SSE event, opening the stream
// first if needed, and flushes it.
func (o *fastOut) event(msg []byte) {
	if !o.started {
		h := o.w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		o.w.WriteHeader(http.StatusOK)
		o.started = true
	}
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = appendOneLine(b, msg)
	b = append(b, "\n\n"...)
	_, _ = o.w.Write(b)
	if f, ok := o.w.(http.Flusher); ok {
		f.Flush()
	}
}

// forget drops the relay ids of the call's unanswered requests.
func (o *fastOut) forget(cs *clientSession) {
	if cs == nil {
		return
	}
	for _, id := range o.relayed {
		cs.takeRelay(id)
	}
}

// fastRelay returns how a stateful fast-path call delivers upstream
// messages. With SSE responses they become events of the call's own
// stream, requests under a relay id whose answer serve intercepts. With
// JSON responses the session gets them through the SDK on its GET stream.
// A 2026-era call wraps it in a bridge (requests suspend the call).
func (s *Service) fastRelay(ctx context.Context, v *view, fc *fastCall, out *fastOut, asks *sync.WaitGroup) func(*nats.Msg) bool {
	if s.cfg.JSONResponse && fc.session != nil {
		return s.sdkRelay(ctx, v, fc.session.ss, asks)
	}
	return func(m *nats.Msg) bool {
		u, ok := parseUpMsg(m)
		if !ok {
			s.log.Warn("bad upstream message", proto.LogSubject, m.Subject)
			return false
		}
		if u.id == nil {
			if !s.cfg.JSONResponse { // a JSON response has no room for it
				out.event(u.raw)
			}
			return false
		}
		if u.reply == "" {
			return false
		}
		if fc.session == nil {
			s.refuse(u, "a 2026-07-28 client takes no server-to-client requests")
			return false
		}
		rid := relayID()
		fc.session.relay(idKey([]byte(rid)), u.reply)
		out.relayed = append(out.relayed, idKey([]byte(rid)))
		out.event(requestJSON(rid, u.method, u.params))
		return false
	}
}

// requestJSON builds a JSON-RPC request with the given raw id and params.
func requestJSON(id, method string, params []byte) []byte {
	b := make([]byte, 0, len(params)+len(method)+len(id)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// answerRelayed takes a client's JSON-RPC response to a request the fast
// path relayed (by its relay id), sends it to the worker that waits for it
// and answers 202; false for any other message.
func (s *Service) answerRelayed(w http.ResponseWriter, r *http.Request, m *probeMsg) bool {
	if m == nil || m.Method != "" || len(m.ID) == 0 {
		return false
	}
	cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
	if cs == nil {
		return false
	}
	reply, ok := cs.takeRelay(idKey(m.ID))
	if !ok {
		return false
	}
	body, _ := io.ReadAll(r.Body) // precheck read it into memory
	if err := s.nc.Publish(reply, body); err != nil {
		s.log.Warn("answer not sent", proto.LogErr, err)
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}
