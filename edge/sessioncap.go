package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Opening a stateful session (a 2025-era initialize without a session id,
// or a legacy SSE GET) is admitted like a call and capped:
//
//   - it takes a token of the tenant's and the principal's rate limit, and
//     counts in flight until it is answered;
//   - the edge holds at most Config.MaxSessions sessions: one more is
//     answered 503 with Retry-After (another edge may have room);
//   - a tenant holds at most the lower of Config.MaxTenantSessions and its
//     share of its own limits.max_sessions on this edge
//     (limit.SessionShare): one more is answered 429 with Retry-After and
//     the JSON-RPC error -32069 {"limit":"sessions"}.
//
// Sessions being opened count against the caps from their admission, so
// that concurrent initializes cannot overshoot them.

// sessionRetryAfter is the retry hint of a session refused by a cap: a
// session ends when its client closes it or at the idle timeout, so the
// hint is a guess.
const sessionRetryAfter = time.Second

// admitSession admits the opening of a session of v's tenant by the caller
// of r, or answers r with the refusal (id is the initialize's JSON-RPC id,
// nil for a legacy SSE GET), records it (metrics, audit) and returns ok
// false. Call release once the opening request is answered.
func (s *Service) admitSession(w http.ResponseWriter, r *http.Request, v *view, id json.RawMessage) (release func(), ok bool) {
	start := time.Now()
	method := "initialize"
	if id == nil {
		method = "" // a legacy SSE GET: no JSON-RPC request
	}
	preq := proto.Request{Tenant: v.tenant}
	tenantMax := s.cfg.MaxTenantSessions
	if ident := identityOf(r.Context()); ident != nil {
		preq.Principal = ident.principal
	}
	if t, _, known := s.tenancy.Current().Tenant(v.tenant); known {
		if share := limit.SessionShare(t.Limits, s.fleet.View(), v.tenant); share >= 0 && (tenantMax < 0 || share < tenantMax) {
			tenantMax = share
		}
	}
	unreserve, token, which := s.sessions.reserve(v.tenant, s.cfg.MaxSessions, tenantMax)
	switch which {
	case capEdge:
		s.met.Limited("edge_sessions")
		w.Header().Set("Retry-After", "1")
		writeRPCError(w, http.StatusServiceUnavailable, id, int(proto.CodeUnavailable),
			"the edge holds its maximum of "+strconv.Itoa(s.cfg.MaxSessions)+" sessions; retry later, or on another edge")
		s.refused(r, v, method, int64(proto.CodeUnavailable), start)
		return nil, false
	case capTenant:
		perr := limit.SessionsRefused(sessionRetryAfter)
		s.noteLimited(perr)
		setRetryAfter(w, perr)
		writeRPCErrorData(w, http.StatusTooManyRequests, id, int(perr.Code), perr.Msg, perr.Data)
		s.refused(r, v, method, int64(perr.Code), start)
		return nil, false
	}
	done, perr := s.admit(&preq)
	if perr != nil {
		unreserve()
		setRetryAfter(w, perr)
		writeRPCErrorData(w, http.StatusTooManyRequests, id, int(perr.Code), perr.Msg, perr.Data)
		s.refused(r, v, method, int64(perr.Code), start)
		return nil, false
	}
	if id != nil {
		r.Header.Set(hdrSessionSlot, token) // the session takes the place (onInitialize)
	}
	return func() { done(); unreserve() }, true
}
