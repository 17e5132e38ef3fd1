package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The raw request path of streamable HTTP sessions.
//
// The SDK's ClientSession opens the session (initialize or server/discover),
// keeps its standalone GET stream, answers pings and lists; a tools/call
// (or another forwarded request) skips it and goes out as one hand-written
// POST on the same HTTP chain, with the headers and per-request _meta the
// SDK's streamable client would send (go-sdk v1.8.0, mcp/streamable.go Write and
// setMCPHeaders, mcp/streamable_headers.go setStandardHeaders, mcp/client.go
// CallTool and injectRequestMeta). The response is read in place: the
// result's bytes are a slice of the buffered message, never decoded or
// re-encoded. Our request ids are strings "sy-<n>", a different JSON-RPC id
// space from the SDK's integer ids on the same session.

// rawConn is the raw call state of one streamable HTTP session. Its fields
// never change after dial, except seq.
type rawConn struct {
	url string
	// u is url parsed once (nil if it does not parse: newPost then
	// returns the parse error per call). Parsing it per call was 3% of
	// the gateway's CPU at 64 connections (url.parseAuthority).
	u       *url.URL
	hc      *http.Client // the session's HTTP chain (lifetime abort), without capture
	sid     []string     // Mcp-Session-Id header value; nil for a sessionless server
	version []string     // Mcp-Protocol-Version header value: the negotiated version
	// meta is set on a 2026-07-28+ session: the SEP-2575 _meta members
	// (protocolVersion, clientInfo, clientCapabilities) the SDK adds to
	// every request, encoded; such a session also sends Mcp-Method and
	// Mcp-Name (and Mcp-Param-*) headers. head is meta without
	// clientCapabilities, for a request that carries its own client's.
	meta, head []byte
	max        int // MaxResultBytes
	// legacyOps is set on a dedicated 2026-07-28 session the upstream
	// gave no session id (dial reopened it there from 2025-11-25): the
	// methods 2026-07-28 removed (logging/setLevel,
	// resources/(un)subscribe) go out as on the 2025-11-25 session it
	// replaces (that protocol version, no SEP-2575 _meta), and the level
	// logging/setLevel set is sent with each later request's _meta
	// (logLevel), where 2026-07-28 takes it.
	legacyOps bool

	seq   atomic.Uint64
	level atomic.Pointer[[]byte] // legacyOps: the logLevel _meta member, encoded
}

var hdrLegacyVersion = []string{legacyProtocol}

func (u *Upstream) newRawConn(cs *mcp.ClientSession, hc *http.Client, head, meta []byte) *rawConn {
	rc := &rawConn{url: u.opts.Spec.URL, hc: hc, max: u.opts.MaxResultBytes, head: head, meta: meta}
	rc.u, _ = url.Parse(rc.url)
	if id := cs.ID(); id != "" {
		rc.sid = []string{id}
	}
	rc.version = []string{cs.InitializeResult().ProtocolVersion}
	return rc
}

// metaHead is the start of what the SDK client adds to the _meta of every
// request on a session that negotiated version v: on 2026-07-28+ the
// SEP-2575 members protocolVersion and clientInfo, encoded (withCaps adds
// clientCapabilities); before, nil.
func (u *Upstream) metaHead(v string) []byte {
	if v < protocol2026 {
		return nil
	}
	m := make([]byte, 0, len(u.info)+64)
	m = append(m, `"`+mcp.MetaKeyProtocolVersion+`":`...)
	m = appendJSONString(m, v)
	m = append(m, `,"`+mcp.MetaKeyClientInfo+`":`...)
	return append(m, u.info...)
}

// withCaps is head followed by the clientCapabilities member caps (raw
// JSON object).
func withCaps(head, caps []byte) []byte {
	m := make([]byte, 0, len(head)+len(caps)+48)
	m = append(m, head...)
	m = append(m, `,"`+mcp.MetaKeyClientCapabilities+`":`...)
	return append(m, caps...)
}

// requestMeta is the session _meta of one request: a request that carries
// its own client's capabilities (p.caps) declares them, on a 2026-07-28+
// session (head non-nil).
func requestMeta(p *rawParams, head, meta []byte) []byte {
	if p.caps == nil || head == nil {
		return meta
	}
	return withCaps(head, p.caps)
}

var (
	hdrJSON   = []string{"application/json"}
	hdrAccept = []string{"application/json, text/event-stream"}
	hdrSSE    = []string{"text/event-stream"}
	hdrCancel = []string{"notifications/cancelled"}
)

// setHeaders sets what the SDK's setMCPHeaders sets: the protocol version
// and the session id. (The SDK also sets Authorization from an OAuth
// handler; the worker configures none.)
func (rc *rawConn) setHeaders(h http.Header) {
	h["Mcp-Protocol-Version"] = rc.version
	if rc.sid != nil {
		h["Mcp-Session-Id"] = rc.sid
	}
}

// newPost builds the POST of one JSON-RPC message on the session, with the
// headers of the SDK's streamable client's Write: content negotiation,
// setHeaders, and on a 2026-07-28+ session Mcp-Method for a request
// (method non-nil).
func (rc *rawConn) newPost(ctx context.Context, body []byte, method []string) (*http.Request, error) {
	req, err := rc.newRequest(ctx, body)
	if err != nil {
		return nil, err
	}
	req.Header["Content-Type"] = hdrJSON
	req.Header["Accept"] = hdrAccept
	rc.setHeaders(req.Header)
	if method != nil && rc.meta != nil {
		req.Header["Mcp-Method"] = method
	}
	return req, nil
}

// newRequest is http.NewRequestWithContext(ctx, POST, rc.url, body)
// with the URL parsed once: the request gets its own copy of rc.u.
func (rc *rawConn) newRequest(ctx context.Context, body []byte) (*http.Request, error) {
	if rc.u == nil {
		return http.NewRequestWithContext(ctx, http.MethodPost, rc.url, bytes.NewReader(body))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	u := *rc.u
	// As NewRequestWithContext sets them: the host without an empty port.
	u.Host = strings.TrimSuffix(u.Host, ":")
	req.URL, req.Host = &u, u.Host
	return req, nil
}

// post sends a message that expects no answer (a notification, or a
// response to the upstream's request) and discards the reply body.
func (rc *rawConn) post(ctx context.Context, body []byte, method []string) error {
	req, err := rc.newPost(ctx, body, method)
	if err != nil {
		return err
	}
	resp, err := rc.do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimitBytes))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// tooLargeError fails a call whose response message exceeds
// MaxResultBytes. The session stays usable.
type tooLargeError struct{ max int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("response message exceeds max_result_bytes (%d bytes)", e.max)
}

// errNoResponse: the response stream ended without the call's response and
// cannot be resumed (the SDK's "request terminated without response").
var errNoResponse = errors.New("request terminated without response")

// Resumption of an interrupted SSE response (2025-11-25, SEP-1699), with
// the SDK's defaults: 5 reconnects without progress, first delay 1s (or the
// server's retry field), growing 1.5× with full jitter, capped at 30s.
const (
	maxResumes      = 5
	resumeDelay     = time.Second
	resumeDelayMax  = 30 * time.Second
	cancelTimeout   = 5 * time.Second // the SDK's notifyCancellationTimeout
	drainTimeout    = 5 * time.Second
	drainLimitBytes = 64 << 10
)

// rawCall sends the request p on rc and returns the raw result. Errors:
// the upstream's *jsonrpc.Error; an error wrapping mcp.ErrSessionMissing
// (404 on a session with an id); *tooLargeError; otherwise a transport
// failure. When ctx ends before the answer, notifications/cancelled goes
// upstream in the background, as the SDK's call does.
func (u *Upstream) rawCall(ctx context.Context, rc *rawConn, p *rawParams, st *callState) (res []byte, err error) {
	method := p.method
	n := rc.seq.Add(1)
	var idBuf [24]byte
	id := append(strconv.AppendUint(append(idBuf[:0], `"sy-`...), n, 10), '"')
	meta := requestMeta(p, rc.head, rc.meta)
	legacy := rc.legacyOps && p.noSessionMeta
	switch lv := rc.level.Load(); {
	case p.level != nil && meta != nil && !legacy: // a 2026-era client's own level
		meta = append(append(append([]byte(nil), meta...), ','), p.level...)
	case lv != nil && meta != nil && !legacy: // the level a 2025-era client set
		meta = append(append(append([]byte(nil), meta...), ','), *lv...)
	}
	body := p.appendRequest(make([]byte, 0, len(p.members)+len(p.meta)+len(meta)+80), id, meta)

	// The POST's context follows ctx only until the call returns: the rest
	// of an SSE response is drained in the background after the answer, and
	// a request whose context is cancelled mid-body loses its connection
	// (the next call would dial a new one). Closing the body ends it.
	// It also ends with the session (bindLife, as abortRT would).
	reqCtx, cancelReq := bindLife(context.WithoutCancel(ctx), rc.hc)
	defer context.AfterFunc(ctx, cancelReq)()
	req, err := rc.newPost(reqCtx, body, p.hdr)
	if err != nil {
		cancelReq()
		return nil, err
	}
	if legacy {
		req.Header["Mcp-Protocol-Version"] = hdrLegacyVersion
		delete(req.Header, "Mcp-Method")
		if method == methodSetLevel {
			defer func() {
				if err == nil {
					rc.setLevel(p)
				}
			}()
		}
	}
	if h := req.Header; rc.meta != nil && p.name != "" {
		h["Mcp-Name"] = []string{p.name}
		if b := u.bindings(p.name); b != nil && method == methodToolsCall {
			for k, v := range paramhdr.Values(b, p.args) {
				h.Set(k, v)
			}
		}
	}
	answered := false
	defer func() {
		if !answered && ctx.Err() != nil {
			u.cancelUpstream(ctx, rc, id)
		}
	}()
	resp, err := rc.do(req)
	if err != nil {
		cancelReq()
		return nil, fmt.Errorf("sending %q: %w", method, err)
	}
	resp.Body = &endBody{ReadCloser: resp.Body, end: cancelReq}
	if err := rc.check(resp, method); err != nil {
		var werr *jsonrpc.Error
		answered = errors.As(err, &werr)
		return nil, err
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		data, err := readAll(resp, rc.max)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var m rpcMsg
		if err := m.decode(data); err != nil {
			return nil, fmt.Errorf("calling %q: failed to decode response: %w", method, err)
		}
		if !m.isResponse() || !sameID(m.ID, id) {
			return nil, fmt.Errorf("calling %q: the JSON response is not the call's response", method)
		}
		answered = true
		return m.outcome(method)
	case "text/event-stream":
		res, answered, err = u.rawStream(ctx, rc, st, method, id, resp)
		return res, err
	default:
		resp.Body.Close()
		return nil, fmt.Errorf("sending %q: unsupported content type %q", method, resp.Header.Get("Content-Type"))
	}
}

// setLevel remembers the level of a logging/setLevel (p) that succeeded
// on a legacyOps session.
func (rc *rawConn) setLevel(p *rawParams) {
	var level []byte
	jsonscan.Members(append(append([]byte{'{'}, p.members...), '}'), func(k, v []byte) {
		if jsonscan.KeyIs(k, "level") && len(v) > 0 && v[0] == '"' {
			level = v
		}
	})
	if level == nil {
		return
	}
	m := append([]byte(`"`+mcp.MetaKeyLogLevel+`":`), level...)
	rc.level.Store(&m)
}

// check classifies a response's status to a request of method like the
// SDK's checkResponse (in its order), and rejects a changed session id. On
// error the body is closed.
func (rc *rawConn) check(resp *http.Response, method string) (err error) {
	defer func() {
		if err != nil {
			resp.Body.Close()
		}
	}()
	code := resp.StatusCode
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return fmt.Errorf("sending %q: %s", method, http.StatusText(code))
	}
	if code < 200 || code >= 300 {
		// An error body that is a JSON-RPC error answers the call.
		if data, err := readAll(resp, rc.max); err == nil {
			var m rpcMsg
			if m.decode(data) == nil && m.isResponse() && m.Error != nil {
				return fmt.Errorf("sending %q: %w: %s", method, m.Error, http.StatusText(code))
			}
		}
		if code == http.StatusNotFound && rc.sid != nil {
			return fmt.Errorf("sending %q (session ID: %v): %w", method, rc.sid[0], mcp.ErrSessionMissing)
		}
		return fmt.Errorf("sending %q: %s", method, http.StatusText(code))
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && rc.sid != nil && sid != rc.sid[0] {
		return fmt.Errorf("mismatching session IDs %q and %q", rc.sid[0], sid)
	}
	return nil
}

// rawStream reads an SSE response until the call's response, resuming an
// interrupted stream the way the SDK does.
func (u *Upstream) rawStream(ctx context.Context, rc *rawConn, st *callState, method string, id []byte, resp *http.Response) ([]byte, bool, error) {
	var prevLast string
	stalled := 0
	for {
		res, answered, last, retry, err := u.readEvents(ctx, rc, st, method, id, resp.Body)
		if answered || err != nil {
			return res, answered, err
		}
		if last == "" {
			return nil, false, fmt.Errorf("calling %q: %w", method, errNoResponse)
		}
		if last != prevLast {
			prevLast, stalled = last, 0
		} else if stalled++; stalled > maxResumes {
			return nil, false, fmt.Errorf("calling %q: exceeded %d retries without progress", method, maxResumes)
		}
		if resp, err = rc.resume(ctx, method, last, retry); err != nil {
			return nil, false, err
		}
	}
}

// resume reconnects an interrupted response stream with a GET carrying
// Last-Event-ID, after the server's retry delay or the SDK's backoff.
func (rc *rawConn) resume(ctx context.Context, method, last string, retry time.Duration) (*http.Response, error) {
	delay := backoff(1)
	if retry > 0 {
		delay = retry
	}
	var lastErr error
	for attempt := 1; attempt <= maxResumes; attempt++ {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.url, nil)
		if err != nil {
			return nil, err
		}
		rc.setHeaders(req.Header)
		req.Header["Last-Event-Id"] = []string{last}
		req.Header["Accept"] = hdrSSE
		resp, err := rc.hc.Do(req)
		if err != nil {
			lastErr = err
			delay = backoff(attempt + 1)
			continue
		}
		if err := rc.check(resp, method); err != nil {
			return nil, err
		}
		return resp, nil
	}
	return nil, fmt.Errorf("calling %q: reconnect failed after %d attempts: %w", method, maxResumes, lastErr)
}

// backoff is the SDK's calculateReconnectDelay for attempt >= 1.
func backoff(attempt int) time.Duration {
	d := time.Duration(float64(resumeDelay) * math.Pow(1.5, float64(attempt-1)))
	d = min(d, resumeDelayMax)
	return d + rand.N(d)
}

// readEvents reads one response stream (the POST's or a resumed one) of
// call st (nil: a call without state). It returns answered with the call's
// outcome, or the stream's last event id and retry delay when it ended
// without the response.
func (u *Upstream) readEvents(ctx context.Context, rc *rawConn, st *callState, method string, id []byte, body io.ReadCloser) (res []byte, answered bool, last string, retry time.Duration, err error) {
	br, _ := u.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(body, sseReadBuffer)
	} else {
		br.Reset(body)
	}
	defer func() {
		br.Reset(nil)
		u.readers.Put(br)
	}()
	sr := sseReader{r: br, max: rc.max}
	for {
		ev, err := sr.next()
		if err != nil {
			body.Close()
			var tl *tooLargeError
			switch {
			case ctx.Err() != nil:
				return nil, false, "", 0, ctx.Err()
			case errors.As(err, &tl):
				return nil, false, "", 0, err
			case errors.Is(err, errMalformedEvent):
				return nil, false, "", 0, fmt.Errorf("calling %q: %w", method, err)
			}
			return nil, false, last, retry, nil // the stream ended or broke
		}
		if ev.id != "" {
			last = ev.id
		}
		if ev.retry != "" {
			if ms, err := strconv.ParseInt(ev.retry, 10, 64); err == nil {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
		if len(ev.data) == 0 || ev.name != "" && ev.name != "message" {
			continue
		}
		var m rpcMsg
		if err := m.decode(ev.data); err != nil {
			body.Close()
			return nil, false, "", 0, fmt.Errorf("calling %q: failed to decode event: %w", method, err)
		}
		switch {
		case m.isResponse():
			if !sameID(m.ID, id) {
				continue // not ours (the SDK drops a response to no pending call)
			}
			u.drain(body)
			res, err := m.outcome(method)
			return res, true, "", 0, err
		default:
			u.inStream(ctx, rc, st, &m)
		}
	}
}

// inStream handles a notification or request of the upstream that arrived
// in the response stream of call st (nil: a call without state): it
// belongs to that call. A progress notification goes to the call whose
// token it carries (ours, swapped for the client's); a list_changed marks
// the list dirty; logging and elicitation/complete go to the call's
// client; resources/updated is session-level wherever it arrives (fanOut). A request for elicitation, sampling or roots is
// asked of the call's client, and its answer POSTed on the session; any
// other request, or one of a call without a relay, is answered as the SDK
// client would (answer).
func (u *Upstream) inStream(ctx context.Context, rc *rawConn, st *callState, m *rpcMsg) {
	var method string
	if json.Unmarshal(m.Method, &method) != nil {
		return
	}
	if isNull(m.ID) {
		u.streamNote(st, method, m.Params)
		return
	}
	if st == nil || st.relay == nil || !relayedRequest(method) {
		u.answer(ctx, rc, m)
		return
	}
	// The event's buffer is reused: keep copies.
	um := &upMsg{method: method, id: bytes.Clone(m.ID), params: bytes.Clone(m.Params)}
	u.goAsk(st, st.relay, um, u.httpReplier(ctx, rc, um.id, method))
}

// streamNote handles a notification from a call's response stream.
func (u *Upstream) streamNote(st *callState, method string, params []byte) {
	switch {
	case method == notifyProgress:
		if t, p := u.progressTarget(params); t != nil {
			t.relay.Notify((&upMsg{method: method, params: p}).encode())
		}
	case method == "notifications/tools/list_changed":
		u.markDirty(bitTools)
	case method == "notifications/prompts/list_changed":
		u.markDirty(bitPrompts)
	case method == "notifications/resources/list_changed":
		u.markDirty(bitResources | bitResourceTemplates)
	case method == notifyUpdated: // session-level, wherever it arrives
		if s := st.session(); s != nil {
			u.fanOut(s, updatedURI(params), (&upMsg{method: method, params: params}).encode())
		}
	case st != nil && st.relay != nil && relayedNote(method):
		st.relay.Notify((&upMsg{method: method, params: params}).encode())
	}
}

// httpReplier POSTs the answer to the upstream's request id on the
// session, bounded like a cancellation; a failure is logged. It goes with
// the credentials of call (its client's Authorization on a passthrough
// upstream), which it may outlive.
func (u *Upstream) httpReplier(call context.Context, rc *rawConn, id []byte, method string) replier {
	life := u.closer.Life()
	if v, ok := authorization(call); ok {
		life = context.WithValue(life, authKey{}, v)
	}
	return func(result []byte, werr *jsonrpc.Error) {
		ctx, cancel := context.WithTimeout(life, cancelTimeout)
		defer cancel()
		if err := rc.post(ctx, responseBody(id, result, werr), nil); err != nil {
			u.log.Debug("answer to upstream request failed", proto.LogMethod, method, proto.LogErr, err)
		}
	}
}

// answer replies to a server-to-client request from a call's response
// stream that is not relayed the way the SDK client without roots,
// sampling or elicitation handlers does (mcp/client.go
// clientMethodInfos, createMessage, elicit, listRoots; jsonrpc2
// processResult), so the upstream never waits for an answer. The reply is
// POSTed on the session; a failure is ignored (the SDK only logs it).
func (u *Upstream) answer(ctx context.Context, rc *rawConn, m *rpcMsg) {
	var method string
	if json.Unmarshal(m.Method, &method) != nil {
		return
	}
	hasParams := m.Params != nil
	var result string
	var werr *jsonrpc.Error
	switch method {
	case "ping":
		result = `{}`
	case "roots/list":
		result = `{"roots":[]}`
	case "sampling/createMessage":
		if !hasParams {
			werr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: missing required "params"`}
		} else {
			werr = &jsonrpc.Error{Code: -31001, Message: "client does not support CreateMessage"}
		}
	case "elicitation/create":
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "client does not support elicitation"}
	case "notifications/cancelled", "notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed", "notifications/resources/updated", "notifications/message",
		"notifications/progress", "notifications/elicitation/complete", "notifications/subscriptions/acknowledged":
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("invalid request: unexpected id for %q", method)}
	default:
		werr = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
	}
	body := append([]byte(`{"jsonrpc":"2.0","id":`), m.ID...)
	if werr != nil {
		e, _ := json.Marshal(werr)
		body = append(append(append(body, `,"error":`...), e...), '}')
	} else {
		body = append(append(append(body, `,"result":`...), result...), '}')
	}
	if err := rc.post(ctx, body, nil); err != nil {
		u.log.Debug("answer to upstream request failed", proto.LogMethod, method, proto.LogErr, err)
	}
}

// cancelUpstream tells the upstream, in the background, that the call id
// was abandoned (best effort, bounded like the SDK's).
func (u *Upstream) cancelUpstream(ctx context.Context, rc *rawConn, id []byte) {
	reason := ctx.Err().Error()
	body := make([]byte, 0, 128)
	body = append(body, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":`...)
	body = appendJSONString(body, reason)
	body = append(append(append(body, `,"requestId":`...), id...), "}}"...)
	nctx := context.WithoutCancel(ctx)
	u.closer.Go(func() {
		nctx, stop := context.WithTimeout(nctx, cancelTimeout)
		defer stop()
		_ = rc.post(nctx, body, hdrCancel)
	})
}

// drain finishes a response stream after the call's response, in the
// background so the caller does not wait for the end of the stream (the
// SDK drains it on its reader goroutine too). Reading to the end lets the
// connection be reused; a stream that goes on is cut.
func (u *Upstream) drain(body io.ReadCloser) {
	u.closer.Go(func() {
		t := time.AfterFunc(drainTimeout, func() { body.Close() })
		_, _ = io.CopyN(io.Discard, body, drainLimitBytes)
		t.Stop()
		body.Close()
	})
}

// readAll reads a whole response body of at most max bytes, sized by its
// Content-Length when it has one, and reads to EOF so that the connection
// is reused.
func readAll(resp *http.Response, max int) ([]byte, error) {
	if resp.ContentLength > int64(max) {
		return nil, &tooLargeError{max}
	}
	n := 4 << 10
	if resp.ContentLength >= 0 {
		n = int(resp.ContentLength) + 1
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		k, err := resp.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if len(b) > max {
			return nil, &tooLargeError{max}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// mediaType is the lowercase media type of a Content-Type value.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	for i := 0; i < len(ct); i++ {
		if 'A' <= ct[i] && ct[i] <= 'Z' {
			return strings.ToLower(ct)
		}
	}
	return ct
}

// rpcMsg is one JSON-RPC message from the upstream; its raw members are
// slices of the message (nil when absent), so the result is neither copied
// nor re-encoded. A message with a "method" member is a request (a
// notification without an id).
type rpcMsg struct {
	Version, ID, Method, Params, Result []byte
	Error                               *jsonrpc.Error
}

func (m *rpcMsg) decode(data []byte) error {
	if !json.Valid(data) {
		return errors.New("invalid JSON")
	}
	var werr []byte
	isObject := jsonscan.Members(data, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "jsonrpc"):
			m.Version = v
		case jsonscan.KeyIs(k, "id"):
			m.ID = v
		case jsonscan.KeyIs(k, "method"):
			m.Method = v
		case jsonscan.KeyIs(k, "params"):
			m.Params = v
		case jsonscan.KeyIs(k, "result"):
			m.Result = v
		case jsonscan.KeyIs(k, "error"):
			werr = v
		}
	})
	if !isObject {
		return errors.New("not a JSON object")
	}
	if string(m.Version) != `"2.0"` {
		return fmt.Errorf("invalid message version tag %s; expected %q", m.Version, "2.0")
	}
	if !isNull(werr) {
		m.Error = new(jsonrpc.Error)
		if err := json.Unmarshal(werr, m.Error); err != nil {
			return fmt.Errorf("error member: %w", err)
		}
	}
	return nil
}

func (m *rpcMsg) isResponse() bool { return m.Method == nil }

// outcome is a response's result bytes, or its error.
func (m *rpcMsg) outcome(method string) ([]byte, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, fmt.Errorf("calling %q: response has neither result nor error", method)
	}
	return m.Result, nil
}

// sseReadBuffer is the read size of one SSE response body.
const sseReadBuffer = 8 << 10

var errMalformedEvent = errors.New("malformed SSE event")

// sseReader reads server-sent events as the SDK's scanEvents does: fields
// event, id, retry and data (joined with "\n", each value trimmed); lines
// starting with ':' are comments; a line without ':' is malformed; an
// event of more than max bytes fails with *tooLargeError.
type sseReader struct {
	r    *bufio.Reader
	max  int
	data []byte // the current event's data
	long []byte // a line longer than the read buffer
}

type sseEvent struct {
	name, id, retry string
	data            []byte // valid until the next call of next
}

func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	s.data = s.data[:0]
	hasData := false
	size := 0
	for {
		line, err := s.readLine(s.max - size)
		if err != nil && err != io.EOF {
			return ev, err
		}
		size += len(line)
		eof := err == io.EOF
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if hasData {
				ev.data = s.data
			}
			if ev.name != "" || ev.id != "" || len(ev.data) > 0 || ev.retry != "" {
				return ev, nil
			}
			if eof {
				return ev, io.EOF
			}
			size = 0
			continue
		}
		field, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return ev, fmt.Errorf("%w: %q", errMalformedEvent, trunc(line))
		}
		switch string(field) {
		case "event":
			ev.name = string(bytes.TrimSpace(value))
		case "id":
			ev.id = string(bytes.TrimSpace(value))
		case "retry":
			ev.retry = string(bytes.TrimSpace(value))
		case "data":
			value = bytes.TrimSpace(value)
			switch {
			case hasData:
				s.data = append(append(s.data, '\n'), value...)
			case len(s.long) > 0 && len(value) > sseReadBuffer:
				// A long first data line (a big result): keep it where it
				// was assembled instead of copying it again.
				s.data, s.long = value, s.data[:0]
			default:
				s.data = append(s.data, value...)
			}
			hasData = true
		}
		if eof {
			if hasData {
				ev.data = s.data
			}
			if ev.name != "" || ev.id != "" || len(ev.data) > 0 || ev.retry != "" {
				return ev, nil
			}
			return ev, io.EOF
		}
	}
}

// readLine returns the next line with its ending, at most budget bytes.
func (s *sseReader) readLine(budget int) ([]byte, error) {
	frag, err := s.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		if len(frag) > budget {
			return nil, &tooLargeError{s.max}
		}
		return frag, err
	}
	s.long = append(s.long[:0], frag...)
	for err == bufio.ErrBufferFull {
		if len(s.long) > budget {
			return nil, &tooLargeError{s.max}
		}
		frag, err = s.r.ReadSlice('\n')
		s.long = append(s.long, frag...)
	}
	if len(s.long) > budget {
		return nil, &tooLargeError{s.max}
	}
	return s.long, err
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// appendJSONString appends s as a JSON string. s is valid UTF-8 (it was
// decoded from JSON or is a Go literal); only what JSON requires is
// escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(append(dst, s[start:]...), '"')
}

// sameID reports whether a response's raw id is our string id, however the
// upstream escaped it.
func sameID(got, ours []byte) bool {
	return bytes.Equal(got, ours) || len(got) > 0 && got[0] == '"' && jsonscan.Unquote(got) == jsonscan.Unquote(ours)
}
