package edge

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Cancellation (MCP basic/utilities/cancellation): a client that sends
// notifications/cancelled for a request in flight gets no response to it,
// whichever path serves it, even if the upstream answers anyway; the
// worker cancels the call upstream (notifications/cancelled to the
// upstream, proto.Cancel on the bus). A cancellation of a request not in
// flight (unknown, already answered, or initialize) is accepted and
// dropped.

// serveCancel handles notifications/cancelled on a stateful session: a call
// the fast path serves is cancelled here (its worker cancels it upstream,
// and the client gets no response); one the SDK serves is noted (its
// response is not sent: sdkCancelWriter) and the notification goes to the
// SDK, which cancels its handler; one for no request in flight (an unknown
// id, an initialize, a call already answered) is accepted and dropped.
// Other cancellations (malformed, or 2026-era) go to the SDK.
func (s *Service) serveCancel(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg) bool {
	if m == nil || m.Method != "notifications/cancelled" || len(m.ID) > 0 || m.JSONRPC != "2.0" {
		return false
	}
	cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
	if cs == nil || cs.view != v.key {
		return false
	}
	id := m.params().RequestID
	if len(id) == 0 || !validID(id) {
		return false
	}
	key := idKey(id)
	if cs.cancelSDK(key) {
		return false
	}
	if !cs.cancel(key) {
		// Not a call of this edge's: it may run at another edge serving
		// the session (a load balancer spread the client's POSTs).
		s.forwardCancel(cs.id, id)
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// forwardCancel sends a client's notifications/cancelled of request id in
// session sid to the other edges (proto.EvtSessionCancelSubject); the one
// running the call cancels it (onSessionCancel). Best effort: a failure
// to publish is logged.
func (s *Service) forwardCancel(sid string, id json.RawMessage) {
	subj, err := proto.EvtSessionCancelSubject(s.cfg.ID)
	if err != nil {
		return
	}
	data, err := proto.Marshal(&proto.SessionCancel{Session: sid, RequestID: id})
	if err == nil {
		err = s.nc.Publish(subj, data)
	}
	if err != nil {
		s.log.Warn("cancellation not forwarded to the other edges", proto.LogSession, sid, proto.LogErr, err)
	}
}

// onSessionCancel takes a client's notifications/cancelled another edge
// received (forwardCancel): a call of the session this edge serves with
// that id is cancelled as if the notification had come here, on the fast
// path (cancelled, no response) or the SDK path (its response dropped,
// the notification handed to the SDK, which cancels its handler).
func (s *Service) onSessionCancel(m *nats.Msg) {
	if proto.LastToken(m.Subject) == s.cfg.ID {
		return // this edge's own
	}
	var ev proto.SessionCancel
	if proto.Unmarshal(m.Data, &ev) != nil || !validID(ev.RequestID) || !json.Valid(ev.RequestID) {
		return
	}
	cs := s.sessions.get(ev.Session)
	if cs == nil {
		return
	}
	key := idKey(ev.RequestID)
	if cs.cancel(key) {
		return
	}
	if cs.cancelSDK(key) {
		id := json.RawMessage(ev.RequestID)
		if alias, ok := cs.aliased.get(string(id)); ok {
			id = json.RawMessage(alias)
		}
		body := append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), id...), "}}"...)
		s.injectSDK(cs, body)
	}
}

// sdkCancelWriter passes what the SDK writes for one request of a
// session through, except its response once the client cancelled the
// request (clientSession.cancelSDK): the SDK answers a cancelled handler
// with an error, which the client is not to receive. The status is held
// until the first write, so that a JSON response dropped before anything
// went out leaves an SSE stream with no event rather than an empty JSON
// body. The SDK writes each message with one Write.
type sdkCancelWriter struct {
	http.ResponseWriter
	cs   *clientSession
	id   string // the request's idKey
	held int    // the status the SDK set, not sent yet
	sent bool   // the status went out
}

func (w *sdkCancelWriter) WriteHeader(status int) {
	if !w.sent && w.held == 0 {
		w.held = status
	}
}

func (w *sdkCancelWriter) sendHeader() {
	if w.sent {
		return
	}
	w.sent = true
	if w.held == 0 {
		w.held = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(w.held)
}

func (w *sdkCancelWriter) Write(p []byte) (int, error) {
	if w.cs.cancelledBySDKClient(w.id) && isResponse(p) {
		if !w.sent {
			h := w.Header()
			h.Del("Content-Length")
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache, no-transform")
			w.held = http.StatusOK
			w.sendHeader()
		}
		return len(p), nil
	}
	w.sendHeader()
	return w.ResponseWriter.Write(p)
}

func (w *sdkCancelWriter) Flush() {
	w.sendHeader()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// finish sends a status the SDK set and wrote nothing after.
func (w *sdkCancelWriter) finish() {
	if w.held != 0 {
		w.sendHeader()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sdkCancelWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isResponse reports whether p, one JSON-RPC message as an SSE event or
// a JSON body, is a response (an id and no method).
func isResponse(p []byte) bool {
	body := bytes.TrimSpace(p)
	if len(body) > 0 && body[0] != '{' {
		var data []byte
		for _, line := range bytes.Split(body, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimSpace(d)...)
			}
		}
		body = data
	}
	if len(body) == 0 {
		return false
	}
	m, ok := parseMessage(body)
	return ok && m.Method == "" && len(m.ID) > 0
}
