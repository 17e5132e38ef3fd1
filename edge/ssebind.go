package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Legacy HTTP+SSE sessions (protocol 2024-11-05) are named by the
// sessionid query parameter of their POST endpoint, which the SDK's SSE
// handler announces in the stream's first event (the GET's path, under
// the public prefix: see serveSSEBound) and checks against no caller.
// The edge binds each such session to the view and identity user of the
// GET that opened it, as sessionMatches does for streamable HTTP: a POST
// by anyone else reads as an unknown session.

// sseOwner is what a legacy session is bound to.
func sseOwner(v *view, id *identity) string { return v.key + "\x00" + id.user }

// serveSSEBound serves a legacy SSE request of id on v: a GET opens a
// session bound to the caller; a POST must come from its owner.
func (s *Service) serveSSEBound(w http.ResponseWriter, r *http.Request, v *view, id *identity) {
	if r.Method != http.MethodGet {
		if r.Method == http.MethodPost {
			// A message's refusals are JSON-RPC errors, the SDK's too.
			ew := &sdkErrorWriter{ResponseWriter: w, post: true}
			defer ew.finish()
			w = ew
		}
		if r.Method == http.MethodPost && !s.sseScopesOK(w, r, v) {
			return // checked here, where the caller authenticated, even for a POST another edge serves
		}
		if sid := r.URL.Query().Get("sessionid"); sid != "" {
			owner, ok := s.sseOwners.Load(sid)
			if !ok && r.Method == http.MethodPost && s.forwardSSEPost(w, r, v, id, sid) {
				return // another edge holds the stream and answered
			}
			if !ok || owner != sseOwner(v, id) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			if r.Method == http.MethodPost && !s.sseBodyOK(w, r, v) {
				return
			}
		}
		v.serveSSE(w, r)
		return
	}
	if !s.scopesOK(w, r, v, nil) {
		return
	}
	// A legacy session is its GET stream: opening one is admitted like
	// an initialize (sessioncap.go), and counted once it initializes.
	release, ok := s.admitSession(w, r, v, nil)
	if !ok {
		return
	}
	release()
	c := &sseCapture{ResponseWriter: w, owner: sseOwner(v, id), s: s, v: v}
	defer func() {
		if c.sub != nil {
			// Gone from the server before the stream ends: a POST sent
			// after that gets no responders (404) at once.
			_ = c.sub.Unsubscribe()
			_ = s.nc.FlushTimeout(time.Second)
		}
		if c.sid != "" {
			s.sseOwners.Delete(c.sid)
		}
	}()
	// The SDK derives the context of every request of the session from
	// this GET's: the middleware knows a legacy session by it.
	r = r.WithContext(context.WithValue(r.Context(), legacySSEKey{}, true))
	// The SDK's endpoint event is this request's path with the session
	// id: a path from the origin, as clients expect (they refuse an
	// endpoint of another origin). Behind a prefix (auth.public_url's
	// path, or a trusted proxy's X-Forwarded-Prefix) it starts with it.
	if p := s.public.Origin(r).Prefix; p != "" {
		u := *r.URL
		u.Path, u.RawPath = p+u.Path, ""
		if r.URL.RawPath != "" {
			u.RawPath = p + r.URL.RawPath
		}
		r.URL = &u
	}
	v.serveSSE(c, r)
}

// sseScopesOK checks the scopes the caller's policy requires of each
// message of a legacy SSE POST (scopesOK), when it has scope rules: the
// body is read (bounded) and restored.
func (s *Service) sseScopesOK(w http.ResponseWriter, r *http.Request, v *view) bool {
	if id := identityOf(r.Context()); id == nil || !id.policy.HasScopeRules() || r.Body == nil {
		return true
	}
	body, ok := s.readSSEBody(w, r, v, time.Now())
	if !ok {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	msgs, _, ok := parseBody(body)
	if !ok || len(msgs) == 0 {
		return s.scopesOK(w, r, v, nil) // the SDK answers the body
	}
	for _, m := range msgs {
		if m != nil && !s.scopesOK(w, r, v, m) {
			return false
		}
	}
	return true
}

// sseBodyOK reads a legacy SSE POST's body (bounded as the SDK bounds it)
// and refuses a message that gives a member the gateway decides on twice
// (package fields), as precheck refuses it on streamable HTTP: HTTP 400
// with the JSON-RPC -32600 error as the body. The transport has no other
// way to answer a message the SDK session never receives (its responses
// travel on the session's GET stream, which the SDK writes), and the SDK
// answers bodies it cannot take the same way, with a 400. Other bodies are
// restored for the SDK, which answers what is wrong with them; it reports
// whether the request may go on.
func (s *Service) sseBodyOK(w http.ResponseWriter, r *http.Request, v *view) bool {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") || r.Body == nil {
		return true // the SDK answers 415
	}
	start := time.Now()
	body, ok := s.readSSEBody(w, r, v, start)
	if !ok {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	msgs, _, ok := parseBody(body)
	if !ok {
		return true // the SDK answers 400
	}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if c := m.clashed(); c != "" {
			s.refuseClash(w, r, v, m, c, start)
			return false
		}
	}
	return true
}

// readSSEBody reads a legacy SSE POST's body, bounded as the SDK bounds
// it; over the bound or unreadable, it answers (413 or 400, as the SDK
// does) and reports false.
func (s *Service) readSSEBody(w http.ResponseWriter, r *http.Request, v *view, start time.Time) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "failed to read body", http.StatusBadRequest)
		}
		s.refused(r, v, "", int64(jsonrpc.CodeInvalidRequest), start)
		return nil, false
	}
	return body, true
}

// legacySSEKey marks the context of a legacy HTTP+SSE session's requests.
type legacySSEKey struct{}

// legacySSE reports whether ctx is a legacy HTTP+SSE session's.
func legacySSE(ctx context.Context) bool {
	v, _ := ctx.Value(legacySSEKey{}).(bool)
	return v
}

// legacyDiscoverError answers a legacy SSE session's server/discover: the
// transport serves only protocol versions before 2026-07-28, so the
// version is unsupported, and the SDK client falls back to initialize
// (where onInitialize takes the tasks extension out).
//
// The SDK's own answer cannot be relied on: its SSE handler writes the
// endpoint event inside Server.Connect, before Connect records the versions
// the transport supports (go-sdk v1.8.0 server.go, supportedVersions), so a
// client that POSTs server/discover at once can reach the discover handler
// while that list is still nil. Discover then offers 2026-07-28 with the
// view's full capabilities (the tasks extension among them) and stores the
// session's InitializeParams: the SDK client takes that as its initialize
// result, never sends initialize, and the session is neither tracked nor
// stripped of the extension. Answering here, without the SDK handler,
// gives the same answer every time and leaves the session uninitialized.
func legacyDiscoverError(req mcp.Request) error {
	data := mcp.UnsupportedProtocolVersionData{}
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < protocol2026 {
			data.Supported = append(data.Supported, v)
		}
	}
	if p := req.GetParams(); p != nil {
		data.Requested, _ = p.GetMeta()[mcp.MetaKeyProtocolVersion].(string)
	}
	b, _ := json.Marshal(data) // strings only: always encodes
	return &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version", Data: b}
}

// sseCapture passes a legacy SSE stream through, taking the session id
// out of its endpoint event (the first event) and recording the session's
// owner before the client can see the id.
type sseCapture struct {
	http.ResponseWriter
	s     *Service
	v     *view
	owner string
	sid   string
	buf   []byte             // the stream until the endpoint event is complete
	sub   *nats.Subscription // the session's POSTs from other edges (SSEPostSubject)
}

func (c *sseCapture) Write(b []byte) (int, error) {
	if c.sid == "" && len(c.buf) < 4096 {
		c.buf = append(c.buf, b...)
		if i := bytes.Index(c.buf, []byte("sessionid=")); i >= 0 {
			rest := c.buf[i+len("sessionid="):]
			if j := bytes.IndexAny(rest, "&\r\n"); j >= 0 {
				if sid, err := url.QueryUnescape(string(rest[:j])); err == nil && sid != "" {
					c.sid = sid
					c.s.sseOwners.Store(sid, c.owner)
					c.sub = c.s.takeSSEPosts(c.v, sid, c.owner)
				}
				c.buf = nil
			}
		}
	}
	if bytes.Contains(b, []byte(`"message":"`+sdkErrorPrefix)) {
		// A params decoding error of the SDK's on the session's stream:
		// see sdkErrorWriter.
		if _, err := c.ResponseWriter.Write(scrubSDKErrors(b)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Flush passes flushes on: the SDK flushes every event.
func (c *sseCapture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *sseCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// A legacy session's POSTs may reach any edge (a round-robin balancer);
// its GET stream, and so the SDK session, stays on the edge that opened
// it. That edge takes the session's POSTs from the others on
// switchyard.v1.sse.<sessionid>.post while the stream is open.

// sseForwardWait bounds how long an edge waits for the holding edge to
// take a forwarded POST: the SDK answers one as soon as the session has
// queued its message.
const sseForwardWait = 5 * time.Second

// forwardSSEPost sends a POST for legacy session sid, which this edge
// does not hold, to the edge that does, and writes its answer; it reports
// false (nothing written) when no edge holds it.
func (s *Service) forwardSSEPost(w http.ResponseWriter, r *http.Request, v *view, id *identity, sid string) bool {
	subj, err := proto.SSEPostSubject(sid)
	if err != nil {
		return false
	}
	var body []byte
	if r.Body != nil {
		var ok bool
		if body, ok = s.readSSEBody(w, r, v, time.Now()); !ok {
			return true // answered
		}
	}
	m := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{
		proto.HdrSSEOwner: []string{sseOwner(v, id)},
		"Content-Type":    []string{r.Header.Get("Content-Type")},
	}}
	ctx, cancel := context.WithTimeout(r.Context(), sseForwardWait)
	defer cancel()
	rep, err := s.nc.RequestMsgWithContext(ctx, m)
	for try := 0; errors.Is(err, nats.ErrNoResponders) && try < 2; try++ {
		// Nobody took it, so it can go again: the holding edge's
		// subscription may not have reached this NATS node yet (a client
		// POSTs at once on the endpoint event).
		time.Sleep(100 * time.Millisecond)
		rep, err = s.nc.RequestMsgWithContext(ctx, m)
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return false // no edge holds it: unknown
		}
		httpError(w, r, "the edge holding the session did not answer", http.StatusServiceUnavailable)
		return true
	}
	code, err := strconv.Atoi(rep.Header.Get(proto.HdrHTTPStatus))
	if err != nil || code < 100 || code > 599 {
		code = http.StatusBadGateway
	}
	if ct := rep.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(code)
	_, _ = w.Write(rep.Data)
	return true
}

// takeSSEPosts subscribes to the POSTs other edges receive for legacy
// session sid of v, opened by owner (sseOwner); nil when it cannot (the
// session then takes POSTs at this edge only).
func (s *Service) takeSSEPosts(v *view, sid, owner string) *nats.Subscription {
	subj, err := proto.SSEPostSubject(sid)
	if err != nil {
		return nil
	}
	user := owner[strings.IndexByte(owner, 0)+1:]
	sub, err := s.nc.Subscribe(subj, func(m *nats.Msg) {
		buf := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
		rec := &sdkErrorWriter{ResponseWriter: buf, post: true} // refusals as JSON-RPC errors
		if o, ok := s.sseOwners.Load(sid); !ok || o != owner || m.Header.Get(proto.HdrSSEOwner) != owner {
			// Another view's or caller's POST: as unknown as at the
			// edge that received it.
			http.Error(rec, "session not found", http.StatusNotFound)
		} else if r, err := http.NewRequest(http.MethodPost, "/sse?sessionid="+url.QueryEscape(sid), bytes.NewReader(m.Data)); err != nil {
			http.Error(rec, "bad forwarded request", http.StatusBadRequest)
		} else {
			r.Header.Set("Content-Type", m.Header.Get("Content-Type"))
			// serveSSE picks the handler holding the session by the
			// caller's user, as for the GET. The sending edge
			// authenticated the caller: the bound handler's bearer check
			// (bindSessions) reads the identity, not this token.
			if user != "" {
				r.Header.Set("Authorization", "Bearer forwarded")
			}
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, &identity{tenant: v.tenant, user: user}))
			if s.sseBodyOK(rec, r, v) {
				v.serveSSE(rec, r)
			}
		}
		rec.finish()
		out := &nats.Msg{Subject: m.Reply, Data: buf.body.Bytes(), Header: nats.Header{proto.HdrHTTPStatus: []string{strconv.Itoa(buf.status)}}}
		if ct := buf.header.Get("Content-Type"); ct != "" {
			out.Header.Set("Content-Type", ct)
		}
		if err := s.nc.PublishMsg(out); err != nil {
			s.log.Warn("forwarded SSE POST not answered", proto.LogErr, err)
		}
	})
	if err != nil {
		s.log.Warn("legacy SSE session takes POSTs here only", proto.LogErr, err)
		return nil
	}
	// At the server before the client learns the endpoint (this runs as
	// the SDK writes it).
	_ = s.nc.FlushTimeout(time.Second)
	return sub
}

// bufferedResponse is an http.ResponseWriter that keeps what it is given.
type bufferedResponse struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if !b.wrote {
		b.status, b.wrote = code, true
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}
