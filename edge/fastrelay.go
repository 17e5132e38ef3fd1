package edge

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// fastOut is the response of one fast-path call. Only the call's goroutine
// writes it.
type fastOut struct {
	mu      sync.Mutex // guards w: the priming flush runs on a timer
	w       http.ResponseWriter
	started bool     // the SSE stream is open: headers sent
	relayed []string // relay ids of requests sent to the client
	res     *resumable
	prime   *time.Timer // flushes the priming event if the call is slow
	closed  bool        // the handler is done with w: the timer must not touch it
	retried bool        // the stream announced its retry delay
}

// resumable makes a 2025-era SSE response resumable (SEP-1699) the way
// the SDK's own streams are: every event is kept in the SDK's event store
// under the session and a stream id of the edge's, and carries an id
// "<stream>_<index>", so a client whose stream broke resumes it with a GET
// and Last-Event-ID, which the SDK's handler serves from the store.
type resumable struct {
	store   mcp.EventStore
	session string
	stream  string
	idx     int  // index of the last event written
	primed  bool // the priming event went out: events carry ids
}

// retryMs is the reconnection delay the edge's SSE streams announce.
const retryMs = "1000"

// primeDelay is how long a call may run before its stream is primed
// (SEP-1699). A call answered sooner goes out in one write, sparing the
// client a wake-up per call and a reconnection attempt for a stream with
// nothing left to resume; a longer call, the kind a broken connection
// really costs, is primed and resumable. The price: a stream that breaks
// in a call's first 100 ms cannot be resumed.
const primeDelay = 100 * time.Millisecond

// arm starts a resumable stream's priming timer: if the call runs past
// primeDelay with nothing written yet, the stream opens then, primed (see
// primeLocked). The headers wait until something is written, so a call
// answered sooner goes out whole, with its length (see last).
func (o *fastOut) arm() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.prime = time.AfterFunc(primeDelay, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.closed {
			o.openLocked()
			o.primeLocked()
			o.flush()
		}
	})
}

// openLocked starts the SSE stream: the headers, flushed at once unless
// the stream is resumable (its writers flush after priming it).
func (o *fastOut) openLocked() {
	if o.started {
		return
	}
	h := o.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	o.w.WriteHeader(http.StatusOK)
	o.started = true
	if o.res == nil {
		o.flush()
	}
}

// primeLocked makes the stream resumable from here on, once: the priming
// event (an id, empty data, the retry delay) is stored and written. A call
// answered before it is needed (quicker than primeDelay, with no message
// before its response) ends without ids: a complete stream has nothing to
// resume, and the client is spared a reconnection attempt for nothing.
func (o *fastOut) primeLocked() {
	r := o.res
	if r == nil || r.primed {
		return
	}
	r.primed = true
	ctx := context.Background()
	if r.store.Open(ctx, r.session, r.stream) != nil || r.store.Append(ctx, r.session, r.stream, nil) != nil {
		o.res = nil // not resumable after all: no ids
		return
	}
	_, _ = io.WriteString(o.w, "id: "+r.stream+"_0\nretry: "+retryMs+"\ndata: \n\n")
	o.retried = true
}

// noAnswer ends the response of a call the client cancelled with no
// JSON-RPC response in it (MCP: none is sent after notifications/cancelled):
// the SSE stream ends as it is, or, if it had not started, is one with no
// event (a request's answer is JSON or SSE, never a bare 202).
func (o *fastOut) noAnswer() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.openLocked()
}

// close stops the priming timer before the handler returns; w is not
// touched after it.
func (o *fastOut) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.prime != nil {
		o.prime.Stop()
	}
}

// event writes one JSON-RPC message as an SSE event, opening the stream
// first if needed, and flushes it. last says it is the call's response.
func (o *fastOut) event(msg []byte) { o.write(msg, false) }

func (o *fastOut) write(msg []byte, last bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.openLocked()
	if !last {
		o.primeLocked() // a message before the response: resumable from here
	}
	b := make([]byte, 0, len(msg)+64)
	b = append(b, "event: message\n"...)
	if o.res != nil && !o.retried { // a resumable-kind stream announces its retry delay (SEP-1699)
		b = append(b, "retry: "+retryMs+"\n"...)
		o.retried = true
	}
	if r := o.res; r != nil && r.primed {
		one := appendOneLine(nil, msg)
		if r.store.Append(context.Background(), r.session, r.stream, one) == nil {
			r.idx++
			b = append(b, "id: "...)
			b = append(b, r.stream...)
			b = append(b, '_')
			b = strconv.AppendInt(b, int64(r.idx), 10)
			b = append(b, '\n')
		}
		msg = one
	}
	b = append(b, "data: "...)
	b = appendOneLine(b, msg)
	b = append(b, "\n\n"...)
	_, _ = o.w.Write(b)
	o.flush()
}

// last writes the response of a stream that was not primed (the common,
// quick case) as it is, without copying the result, flushes it, and
// reports true; it reports false for a primed stream, whose events are
// stored. A stream not yet opened is sent whole, with a Content-Length.
func (o *fastOut) last(head, result []byte, tail string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.res != nil && o.res.primed {
		return false
	}
	const ev, retry = "event: message\n", "retry: " + retryMs + "\n"
	announce := !o.retried
	if !o.started {
		// The whole response is known: it goes out with its length, in
		// one write, with no chunked framing and no priming timer.
		n := len(head) + len(result) + len(tail)
		if announce {
			n += len(retry)
		}
		h := o.w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		h.Set("Content-Length", strconv.Itoa(n))
		o.w.WriteHeader(http.StatusOK)
		o.started = true
	}
	if announce {
		_, _ = io.WriteString(o.w, ev+retry)
		head = head[len(ev):]
		o.retried = true
	}
	if _, err := o.w.Write(head); err == nil && len(result) > 0 {
		_, _ = o.w.Write(result)
	}
	_, _ = io.WriteString(o.w, tail)
	o.flush()
	return true
}

func (o *fastOut) flush() {
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
	if !s.cfg.JSONResponse && fc.session != nil && fc.protocol >= "2025-11-25" {
		out.res = &resumable{store: s.events, session: fc.session.id, stream: "sy" + bus.RandomToken(16)}
		out.arm()
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
		rid := s.relayID()
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
	key := idKey(m.ID)
	if edge, sdkID, ok := sdkRequestID(key); ok {
		if edge != s.cfg.ID {
			return s.forwardAnswer(w, r, edge, cs.id, key)
		}
		// This edge's SDK session asked: it gets its own id back.
		setBody(r, replaceValue(readBody(r), m.ID, sdkID))
		return false
	}
	reply, ok := cs.takeRelay(key)
	if !ok {
		// Relayed by another edge (the client's POST came here): it goes
		// there, and the edge holding the request sends it on.
		if e := relayEdge(key); e != "" && e != s.cfg.ID {
			return s.forwardAnswer(w, r, e, cs.id, key)
		}
		return false
	}
	body, _ := io.ReadAll(r.Body) // precheck read it into memory
	if err := s.nc.Publish(reply, body); err != nil {
		s.log.Warn("answer not sent", proto.LogErr, err)
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// forwardAnswer sends the client's answer in r's body, to the request of
// relay id key that edge relayed for session sid, to that edge.
func (s *Service) forwardAnswer(w http.ResponseWriter, r *http.Request, edge, sid, key string) bool {
	subj, err := proto.EdgeAnswerSubject(edge)
	if err != nil {
		return false
	}
	body, _ := io.ReadAll(r.Body) // precheck read it into memory
	msg := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{proto.HdrSession: []string{sid}, proto.HdrRelay: []string{key}}}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("answer not forwarded", proto.LogErr, err)
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// onForwardedAnswer takes an answer another edge received for a request
// this edge relayed (forwardAnswer) and sends it to the worker waiting
// for it.
func (s *Service) onForwardedAnswer(m *nats.Msg) {
	cs := s.sessions.get(m.Header.Get(proto.HdrSession))
	if cs == nil {
		return
	}
	key := m.Header.Get(proto.HdrRelay)
	if strings.HasPrefix(key, "s"+sdkIDPrefix) {
		s.onForwardedSDKAnswer(cs, m, key)
		return
	}
	reply, ok := cs.takeRelay(key)
	if !ok {
		return
	}
	if err := s.nc.Publish(reply, m.Data); err != nil {
		s.log.Warn("answer not sent", proto.LogErr, err)
	}
}
