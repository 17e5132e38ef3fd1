package edge

import (
	"bytes"
	"net/http"
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
	cs.cancel(key)
	w.WriteHeader(http.StatusAccepted)
	return true
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
