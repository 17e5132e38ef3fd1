package edge

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// protocol2026 is the first protocol version served statelessly.
const protocol2026 = "2026-07-28"

// view is one endpoint: an SDK server plus its two HTTP handlers.
type view struct {
	tenant    string // every client of the view belongs to it
	name      string // "" for the federated view, else the upstream
	key       string // tenant/name: the view's key in Service.views and in sessions
	server    *mcp.Server
	stateful  http.Handler
	stateless http.Handler
	sse       http.Handler // legacy HTTP+SSE transport (protocol 2024-11-05)
	// The same handlers for requests with credentials: the SDK binds the
	// sessions they create to the identity's user (bindSessions).
	statefulBound, statelessBound, sseBound http.Handler

	// send is the SDK's sending handler, below any middleware: it sends a
	// request or notification to the session of the request it is given.
	send mcp.MethodHandler

	mu      sync.Mutex
	markers map[string]string // guarded by mu: list kind -> its registered marker
	rev     int               // guarded by mu

	// newIDs is held (read) by every request that may make the SDK create
	// a session, and (write) by an adoption while adoptID names the
	// session id it recreates: GetSessionID then returns adoptID, and no
	// other session can be created meanwhile (adopt.go).
	newIDs  sync.RWMutex
	adoptID atomic.Pointer[string]
}

// newView builds the SDK server of a view. Every forwarded method is
// answered by the receiving middleware from the bus; the SDK's own
// registries hold only one marker tool, prompt and resource, swapped on
// every change, because the SDK has no public call to send list_changed and
// sends it when its registries change.
func (s *Service) newView(tenant, name string) *view {
	v := &view{tenant: tenant, name: name, key: viewKey(tenant, name), markers: map[string]string{}}
	v.server = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Logger: s.sdkLog,
		GetSessionID: func() string {
			if id := v.adoptID.Load(); id != nil {
				return *id
			}
			return s.cfg.ID + "-" + bus.RandomToken(15)
		},
		InitializedHandler: s.onInitialized,
		Capabilities:       viewCapabilities(),
		// Only 2026-era subscriptions/listen streams reach these: the
		// middleware answers a 2025 session's resources/subscribe itself.
		SubscribeHandler:   s.subscribeHandler(v),
		UnsubscribeHandler: s.unsubscribeHandler(v),
	})
	v.server.AddReceivingMiddleware(s.middleware(v))
	v.server.AddReceivingMiddleware(s.metered(v)) // added last: outermost
	v.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		v.send = next // called once, here
		return next
	})
	for _, kind := range []string{proto.KindTools, proto.KindPrompts, proto.KindResources} {
		v.listChanged(kind)
	}
	get := func(*http.Request) *mcp.Server { return v.server }
	// No SDK SessionTimeout: the fast path serves calls the SDK never sees,
	// so the edge's session table keeps the idle timer.
	v.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: s.sdkLog, JSONResponse: s.cfg.JSONResponse, EventStore: sessionEvents{s.events, &s.sessions},
		MaxRequestBodyBytes: s.cfg.MaxRequestBodyBytes,
	})
	v.sse = mcp.NewSSEHandler(get, &mcp.SSEOptions{MaxRequestBodyBytes: s.cfg.MaxRequestBodyBytes})
	v.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: s.sdkLog, Stateless: true, JSONResponse: s.cfg.JSONResponse,
		MaxRequestBodyBytes: s.cfg.MaxRequestBodyBytes, PropagateRequestCancellation: true,
	})
	v.statefulBound, v.statelessBound, v.sseBound = bindSessions(v.stateful), bindSessions(v.stateless), bindSessions(v.sse)
	return v
}

// viewKey is the key of a tenant's view of name.
func viewKey(tenant, name string) string { return tenant + "/" + name }

// viewCapabilities are what every view advertises: the gateway serves
// every list, subscriptions, completion, logging and the tasks extension
// (tasks.go), and answers for an upstream without one of them with that
// upstream's own error.
func viewCapabilities() *mcp.ServerCapabilities {
	return &mcp.ServerCapabilities{
		Tools:       &mcp.ToolCapabilities{ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Completions: &mcp.CompletionCapabilities{},
		Logging:     &mcp.LoggingCapabilities{},
		Extensions:  map[string]any{tasksExtension: map[string]any{}},
	}
}

// listChanged swaps the marker of a list kind, which makes the SDK send
// notifications/{tools,prompts,resources}/list_changed to every session of
// the view (and to 2026-era subscriptions/listen streams). Resource
// templates share the resources notification.
func (v *view) listChanged(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if kind == proto.KindResourceTemplates {
		kind = proto.KindResources
	}
	old := v.markers[kind]
	v.rev++
	marker := "switchyard-rev-" + strconv.Itoa(v.rev)
	v.markers[kind] = marker
	switch kind {
	case proto.KindTools:
		v.server.AddTool(&mcp.Tool{Name: marker, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, nil // never reached: tools/call is answered by the middleware
			})
		if old != "" {
			v.server.RemoveTools(old)
		}
	case proto.KindPrompts:
		v.server.AddPrompt(&mcp.Prompt{Name: marker},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return nil, nil // never reached: prompts/get is answered by the middleware
			})
		if old != "" {
			v.server.RemovePrompts(old)
		}
	case proto.KindResources:
		v.server.AddResource(&mcp.Resource{Name: marker, URI: "switchyard:" + marker},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, nil // never reached: resources/read is answered by the middleware
			})
		if old != "" {
			v.server.RemoveResources("switchyard:" + old)
		}
	}
}

// sender returns the view's sending handler.
func (v *view) sender() mcp.MethodHandler { return v.send }

// ServeHTTP hands r to the SDK: the stateless handler for 2026-07-28, the
// stateful one otherwise, bound to the caller when it has credentials.
func (v *view) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bound := false
	if id := identityOf(r.Context()); id != nil && id.user != "" {
		bound = true
	}
	switch {
	case r.Header.Get("Mcp-Protocol-Version") >= protocol2026 && bound:
		v.statelessBound.ServeHTTP(w, r)
	case r.Header.Get("Mcp-Protocol-Version") >= protocol2026:
		v.stateless.ServeHTTP(w, r)
	case bound:
		v.statefulBound.ServeHTTP(w, r)
	default:
		v.stateful.ServeHTTP(w, r)
	}
}

// serveSSE hands r to the SDK's legacy HTTP+SSE handler.
func (v *view) serveSSE(w http.ResponseWriter, r *http.Request) {
	if id := identityOf(r.Context()); id != nil && id.user != "" {
		v.sseBound.ServeHTTP(w, r)
		return
	}
	v.sse.ServeHTTP(w, r)
}

// handler routes /mcp and /mcp/<upstream> (streamable HTTP) and /sse and
// /sse/<upstream> (legacy HTTP+SSE) to the caller's tenant's views, after
// authenticating the request; it also serves the protected resource
// metadata and the health probes.
func (s *Service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { s.endpoint(w, r, "", false) })
	mux.HandleFunc("/mcp/{upstream}", func(w http.ResponseWriter, r *http.Request) {
		s.endpoint(w, r, r.PathValue("upstream"), false)
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) { s.endpoint(w, r, "", true) })
	mux.HandleFunc("/sse/{upstream}", func(w http.ResponseWriter, r *http.Request) {
		s.endpoint(w, r, r.PathValue("upstream"), true)
	})
	mux.HandleFunc(wellKnownPRM, s.serveResourceMetadata)
	mux.HandleFunc(wellKnownPRM+"/", s.serveResourceMetadata)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", s.serveReady)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ServeMux answers a path that is not clean (//mcp, /a/../mcp)
		// with a redirect to the clean path from the origin; behind a
		// proxy that serves the gateway under a prefix and strips it,
		// that would send the client out of the gateway. The redirect
		// goes under the public prefix instead (internal/publicurl).
		if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
			loc := s.public.Origin(r).Prefix + cleanPath(p)
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// cleanPath is the canonical form ServeMux redirects an escaped path p
// to: rooted, without . and .. elements or repeated slashes, keeping a
// trailing slash (net/http cleanPath). A clean p is returned as is,
// without allocating.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}

// endpoint serves one request to an MCP endpoint: the Origin check,
// authentication, then the caller's tenant's view of upstream ("" for the
// federated view). An upstream the tenant does not see is answered
// exactly as one the catalog does not have.
func (s *Service) endpoint(w http.ResponseWriter, r *http.Request, upstream string, sse bool) {
	r.Header.Del(hdrSessionSlot) // the edge's own (sessioncap.go, adopt.go), never a client's
	r.Header.Del(hdrAdopt)
	if !s.originOK(r) {
		httpError(w, r, "Forbidden: invalid Origin header", http.StatusForbidden)
		return
	}
	if s.cors(w, r) {
		return // a preflight, answered
	}
	id, fail := s.authenticate(r, s.tenancy.Current())
	if fail != nil {
		s.writeAuthFailure(w, r, fail)
		return
	}
	v := s.viewFor(id, upstream)
	if v == nil {
		httpError(w, r, "Not Found: unknown upstream "+strconv.Quote(upstream), http.StatusNotFound)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
	if sse {
		s.serveSSEBound(w, r, v, id)
		return
	}
	s.serve(w, r, v)
}

// viewFor returns the view of name for id's tenant, creating it on first
// use; nil for an upstream the catalog does not know or the tenant's
// policy does not let it see.
func (s *Service) viewFor(id *identity, name string) *view {
	if name != "" && (id.policy == nil || !id.policy.Upstream(name)) {
		return nil
	}
	return s.tenantView(id.tenant, name)
}

// tenantView returns tenant's view of name, creating it on first use; nil
// for an upstream the catalog does not know.
func (s *Service) tenantView(tenant, name string) *view {
	key := viewKey(tenant, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.views[key]; v != nil {
		return v
	}
	if _, known := s.upstreams[name]; name != "" && (!known || strings.Contains(name, "/")) {
		return nil
	}
	v := s.newView(tenant, name)
	s.views[key] = v
	return v
}

// serve answers one request of view v: precheck, then the fast path, then
// the SDK. Every POST of a tracked session holds its idle timer.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, v *view) {
	sid := r.Header.Get("Mcp-Session-Id")
	adopted := false
	if sid != "" && r.Header.Get("Mcp-Protocol-Version") < protocol2026 && s.sessions.get(sid) == nil {
		// Another edge's session: served here from now on (adopt.go).
		out := s.adopt(r, v, sid)
		if out != adoptOK && out != adoptNone {
			adoptRefusal(w, out)
			return
		}
		adopted = out == adoptOK
	}
	if r.Method == http.MethodGet && sid != "" {
		if cs := s.sessions.get(sid); cs != nil {
			cs.streams.Add(1) // an open stream keeps the session in memory (evict.go)
			defer cs.streams.Add(-1)
		}
	}
	if !s.sessionMatches(r, v) {
		// Another view's or another caller's session reads as no session
		// at all, so its existence does not leak.
		httpError(w, r, "session not found", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodDelete && sid != "" {
		// Ended for all before the client hears so: a request it sends
		// next, to any edge, finds no session (adopt.go).
		if cs := s.sessions.get(sid); cs != nil {
			s.endForAll(cs)
		}
	}
	m, ok := s.precheck(w, r, v)
	if !ok || !s.scopesOK(w, r, v, m) {
		return
	}
	if adopted && m != nil && m.Method == "notifications/initialized" && m.ID == nil {
		// The adoption replayed it into the SDK session already (which
		// would log the client's own as a duplicate).
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if r.Method == http.MethodPost {
		sid := r.Header.Get("Mcp-Session-Id")
		if cs := s.sessions.get(sid); cs != nil {
			defer cs.startPOST()()
			s.touch(cs)
		} else if sid == "" && m != nil && m.Method == "initialize" && r.Header.Get("Mcp-Protocol-Version") < protocol2026 {
			release, ok := s.admitSession(w, r, v, m.ID)
			if !ok {
				return
			}
			defer release()
		}
	}
	if s.serveCancel(w, r, v, m) || s.answerRelayed(w, r, m) || s.serveTasks(w, r, v, m) || s.serveFast(w, r, v, m) {
		return
	}
	if m != nil && m.Method != "" && validID(m.ID) {
		if cs := s.sessions.get(r.Header.Get("Mcp-Session-Id")); cs != nil {
			id := idKey(m.ID)
			if !cs.trackSDK(id) {
				writeRPCError(w, http.StatusBadRequest, m.ID, -32600, "duplicate in-flight request ID "+string(m.ID))
				s.refused(r, v, m.Method, -32600, time.Now())
				return
			}
			defer cs.untrackSDK(id)
			cw := &sdkCancelWriter{ResponseWriter: w, cs: cs, id: id}
			defer cw.finish()
			w = cw
		}
	}
	w, done := s.aliasForSDK(w, r, m)
	defer done()
	w, audited := s.watchSDK(w, r, v, m)
	defer audited()
	if r.Method == http.MethodPost && sid == "" && r.Header.Get("Mcp-Protocol-Version") < protocol2026 {
		// The SDK's stateful handler may create a session: not while an
		// adoption names the next session id (view.newIDs). (A 2026-era
		// request, which may hold its stream open for hours, never does.)
		v.newIDs.RLock()
		defer v.newIDs.RUnlock()
	}
	if sid != "" && r.Header.Get("Mcp-Protocol-Version") < protocol2026 {
		// The requests the SDK sends this session's client name this
		// edge (sdkids.go).
		w = &sdkIDWriter{ResponseWriter: w, edge: s.cfg.ID}
	}
	// Outermost: the audit and the metrics see the rewritten error too.
	ew := &sdkErrorWriter{ResponseWriter: w, post: r.Method == http.MethodPost}
	if m != nil && m.Method != "" && validID(m.ID) {
		ew.id = m.ID
	}
	v.ServeHTTP(ew, r)
	ew.finish()
}

// sessionMatches reports whether the client session r names, if the edge
// tracks it, belongs to view v and to r's caller (the identity's user it
// was created by). Every path below serve relies on it.
func (s *Service) sessionMatches(r *http.Request, v *view) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return true
	}
	cs := s.sessions.get(sid)
	if cs == nil {
		return true // the SDK answers for sessions it does not know
	}
	user := ""
	if id := identityOf(r.Context()); id != nil {
		user = id.user
	}
	return cs.view == v.key && cs.owner == user
}

// onInitialize tracks a stateful session from a successful initialize on,
// so that the fast path can serve it, its idle timer runs, and its end is
// announced to the workers holding upstream sessions for it.
func (s *Service) onInitialize(v *view, req mcp.Request, res mcp.Result) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	ir, ok2 := res.(*mcp.InitializeResult)
	if !ok || !ok2 {
		return
	}
	id := ss.ID()
	if id == "" { // a legacy SSE session: the SDK gives it no id
		id = s.cfg.ID + "-sse-" + bus.RandomToken(15)
	}
	timeout := s.cfg.SessionTimeout
	if timeout < 0 {
		timeout = 0
	}
	legacy := ss.ID() == ""
	if legacy {
		timeout = 0 // it ends with its GET stream
		ir.Capabilities = withoutTasks(ir.Capabilities)
	}
	owner := ""
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		owner = ex.TokenInfo.UserID
	}
	slot, origin := "", ""
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		slot = ex.Header.Get(hdrSessionSlot)
		origin = ex.Header.Get(hdrAdopt) // an adoption's replay (adopt.go)
	}
	cs := s.sessions.add(ss, id, v.key, v.tenant, owner, ir.ProtocolVersion, origin, slot, timeout, s.sessionIdle, s.sessionEnded)
	if !legacy && origin == "" {
		// Adoptable by any edge from the moment the initialize is
		// answered: the record is stored before (adopt.go).
		s.storeNew(v, cs, ss)
	}
	if cs != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
			caps := ip.Capabilities
			if legacy && caps.Extensions[tasksExtension] != nil {
				c := *caps
				c.Extensions = maps.Clone(c.Extensions)
				delete(c.Extensions, tasksExtension)
				caps = &c
			}
			cs.caps = capsJSON(caps) // set before the session's first call
		}
		if !legacy {
			// Open to the fast path now, as the SDK serves a session's
			// requests once its initialize is handled: the client's
			// notifications/initialized may go to another edge (which
			// adopts the session) and never reach this one.
			cs.ready.Store(true)
		}
	}
}

// withoutTasks is c without the tasks extension, for a legacy HTTP+SSE
// session: the edge serves tasks/* only on streamable HTTP (a legacy
// session's responses travel on its GET stream, which the SDK owns), so
// such a session neither sees the extension nor declares it upstream (a
// task-supporting tool then runs synchronously for it).
func withoutTasks(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	if c == nil || c.Extensions[tasksExtension] == nil {
		return c
	}
	cp := *c
	cp.Extensions = maps.Clone(c.Extensions)
	delete(cp.Extensions, tasksExtension)
	if len(cp.Extensions) == 0 {
		cp.Extensions = nil
	}
	return &cp
}

// onInitialized opens a tracked session to the fast path.
func (s *Service) onInitialized(_ context.Context, req *mcp.InitializedRequest) {
	if cs := s.sessions.of(req.Session); cs != nil {
		cs.ready.Store(true)
	}
}

func (s *Service) publishSessionClosed(id string) { s.publishClosed(s.cfg.ID, id) }

// publishClosed tells the workers (and the other edges) that session id,
// whose requests carried edge (its origin), ended.
func (s *Service) publishClosed(edge, id string) {
	subj, err := proto.EvtSessionClosedSubject(s.cfg.ID)
	if err == nil {
		var data []byte
		data, err = proto.Marshal(&proto.SessionClosed{Edge: edge, Session: id})
		if err == nil {
			err = s.nc.Publish(subj, data)
		}
	}
	if err != nil {
		s.log.Warn("session_closed not published", proto.LogSession, id, proto.LogErr, err)
	}
}

// capsJSON encodes client capabilities as the client sent them: the SDK's
// ClientCapabilities always encodes "roots" (go-sdk #607), so it is dropped
// unless the client declared it (RootsV2).
func capsJSON(c *mcp.ClientCapabilities) []byte {
	b, err := json.Marshal(c)
	if err != nil || c.RootsV2 != nil {
		return b
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	delete(m, "roots")
	out, _ := json.Marshal(m) // raw messages that decoded always encode
	return out
}

// originOK is the transport's rule for the Origin header (MCP
// transports, "Security Warning": servers MUST validate it, against DNS
// rebinding and pages of other sites): a request without one (not from a
// browser) is served; one with an Origin only if edge.allowed_origins has
// it, or, when none are configured, if it is a loopback origin on a
// loopback listener (as such a listener answers only loopback Host names),
// or auth.public_url's origin. Never by the Host header, which a rebound
// name controls.
func (s *Service) originOK(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if s.cfg.AllowedOrigins != nil {
		return s.cfg.AllowedOrigins.Allowed(origin)
	}
	if p := s.public.Public(); p != nil && sameOrigin(origin, p.Scheme+"://"+p.Host) {
		return true
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil || !isLoopback(la.String()) {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && isLoopback(u.Hostname())
}

// sameOrigin reports whether origins a and b are the same (RFC 6454):
// scheme and host alike but for case, and the same port, a missing one
// being the scheme's default.
func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" || ub.Host == "" {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

// The CORS headers of the MCP endpoints (Fetch standard, "CORS
// protocol"): what a browser client may send, and which response headers
// its script may read.
const (
	corsMethods = "GET, POST, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExpose  = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After"
	corsMaxAge  = "600"
)

// cors adds the CORS headers for a request from an allowed Origin
// (originOK), and answers a preflight (OPTIONS) itself, 204, reporting
// true; a preflight may also ask for SEP-2243 Mcp-Param-* headers. A
// request without an Origin gets no CORS headers (an OPTIONS without one
// is answered 204 with Allow).
func (s *Service) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	h := w.Header()
	if origin != "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExpose)
	}
	if r.Method != http.MethodOptions {
		return false
	}
	if origin == "" || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Allow", corsMethods)
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	allow := corsHeaders
	for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		if name = strings.TrimSpace(name); len(name) > len(paramHeaderPrefix) && strings.EqualFold(name[:len(paramHeaderPrefix)], paramHeaderPrefix) {
			allow += ", " + name
		}
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// paramHeaderPrefix starts the SEP-2243 headers that mirror tool
// arguments.
const paramHeaderPrefix = "Mcp-Param-"
