package edge

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// A request the SDK sends a 2025-era client on one of the session's
// streams (an upstream's elicitation or sampling during a call the SDK
// path serves, or outside any call on the GET stream) carries the id the
// SDK session on this edge gave it, which only that SDK session knows.
// Behind a round-robin balancer the client's answer may reach another
// edge; and two edges' copies of one session number their requests alike.
// So the edge renames such a request's id on its way out to
// "sy-sdk-<edge>-<the SDK's id>" (sdkIDWriter), and an answer carrying
// such an id is given back its SDK id at that edge, after the edge that
// received it has forwarded it there (answerRelayed, onForwardedAnswer).
// The fast path's own relayed requests carry relay ids (relay.go) and are
// not touched.

// sdkIDPrefix starts the id the edge gives a request the SDK sends.
const sdkIDPrefix = "sy-sdk-"

// sdkIDWriter renames the ids of the requests the SDK writes on a
// 2025-era session's SSE streams (the SDK writes each event with one
// Write).
type sdkIDWriter struct {
	http.ResponseWriter
	edge string
}

func (w *sdkIDWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(`"method"`)) || !bytes.Contains(p, []byte("data: ")) {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write(renameSDKRequestIDs(p, w.edge)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush passes flushes on: the SDK flushes every event.
func (w *sdkIDWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sdkIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// renameSDKRequestIDs returns the SSE event p with the integer id of each
// request on its data lines renamed to sy-sdk-<edge>-<id>, and so the
// requestId of a notifications/cancelled the SDK sends for one of them.
func renameSDKRequestIDs(p []byte, edge string) []byte {
	lines := bytes.SplitAfter(p, []byte("\n"))
	changed := false
	for i, line := range lines {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		body := bytes.TrimRight(data, "\r\n")
		var id, params []byte
		method := ""
		jsonscan.Members(body, func(k, v []byte) {
			switch {
			case jsonscan.KeyIs(k, "method"):
				method = jsonscan.Unquote(v)
			case jsonscan.KeyIs(k, "id"):
				id = v
			case jsonscan.KeyIs(k, "params"):
				params = v
			}
		})
		if method == "notifications/cancelled" {
			// The SDK cancels one of its requests: by the id the client
			// knows it by.
			jsonscan.Members(params, func(k, v []byte) {
				if jsonscan.KeyIs(k, "requestId") {
					id = v
				}
			})
		}
		if method == "" || len(id) == 0 {
			continue
		}
		if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
			continue // the SDK numbers its requests
		}
		renamed := replaceValue(body, id, `"`+sdkIDPrefix+edge+"-"+string(id)+`"`)
		lines[i] = append(append([]byte("data: "), renamed...), data[len(body):]...)
		changed = true
	}
	if !changed {
		return p
	}
	return bytes.Join(lines, nil)
}

// sdkRequestID splits the idKey of an answer to a renamed request into
// the edge that renamed it and the SDK's id (raw JSON).
func sdkRequestID(key string) (edge, id string, ok bool) {
	rest, ok := strings.CutPrefix(key, "s"+sdkIDPrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", "", false
	}
	if _, err := strconv.ParseInt(rest[i+1:], 10, 64); err != nil || !proto.ValidToken(rest[:i]) {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// answerSDK hands the client's answer body, whose id is the renamed id
// raw, to the SDK session of cs on this edge under the SDK's own id: as a
// POST of the session, which the SDK takes (202) and matches to its
// request.
func (s *Service) answerSDK(cs *clientSession, body, raw []byte, sdkID string) {
	s.injectSDK(cs, replaceValue(body, raw, sdkID))
}

// injectSDK hands body, a message of client session cs that another edge
// received (and authenticated as the session owner's), to this edge's SDK
// session, as a POST of the session would.
func (s *Service) injectSDK(cs *clientSession, body []byte) {
	s.mu.Lock()
	v := s.views[cs.view]
	s.mu.Unlock()
	if v == nil {
		return
	}
	r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "/mcp", bytes.NewReader(body))
	if err != nil {
		return
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Session-Id", cs.id)
	r.Header.Set("Mcp-Protocol-Version", cs.protocol)
	if cs.owner != "" {
		// The bound handler's bearer check (bindSessions) reads the
		// identity, not this token: the edge that received the answer
		// authenticated its caller as the session's owner.
		r.Header.Set("Authorization", "Bearer forwarded")
	}
	r = r.WithContext(context.WithValue(r.Context(), identityKey{}, &identity{tenant: cs.tenant, user: cs.owner}))
	rec := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	v.ServeHTTP(rec, r)
	if rec.status != http.StatusAccepted {
		s.log.Debug("forwarded message not taken", proto.LogSession, cs.id, "status", rec.status)
	}
}

// onForwardedSDKAnswer is onForwardedAnswer for an answer to a renamed
// SDK request: key is its idKey.
func (s *Service) onForwardedSDKAnswer(cs *clientSession, m *nats.Msg, key string) {
	edge, sdkID, ok := sdkRequestID(key)
	if !ok || edge != s.cfg.ID {
		return
	}
	_, single, ok := parseBody(m.Data)
	if !ok || single == nil || len(single.ID) == 0 || idKey(single.ID) != key {
		return
	}
	s.answerSDK(cs, m.Data, single.ID, sdkID)
}
