package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/proto"
)

// MicroService is the name of every edge's NATS micro service (its
// metadata "id" is the edge's id).
const MicroService = proto.ServiceEdge

// record ends one request's metrics: its duration by method and outcome
// (code 0: a result), the in-flight gauge, and the tenant's count when
// tenant labels are on.
func (s *Service) record(tenant, method string, code int64, start time.Time) {
	s.met.InFlight.Dec()
	s.met.Request(method, code, start)
	if s.tenantLabels {
		s.met.Tenant(tenant, s.tenancy.Current().Len(), code)
	}
}

// logAnswered logs one answered request: at debug, every request (when
// debug is on); at warn, a request the gateway itself failed (an internal
// error, an envelope it could not decode), which an operator must see.
// hdr, when not nil, is the HTTP request's header, whose traceparent
// gives the trace id (pass nil when ctx carries a recording span: the log
// handler adds its trace id). Arguments and results are never logged.
func (s *Service) logAnswered(ctx context.Context, tenant, method string, id []byte, code int64, start time.Time, hdr http.Header) {
	level := slog.LevelDebug
	if code == jsonrpc.CodeInternalError || code == int64(proto.CodeBadEnvelope) {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String(proto.LogTenant, tenant), slog.String(proto.LogMethod, method),
		slog.Int64(proto.LogCode, code), slog.Duration(proto.LogDuration, time.Since(start))}
	if len(id) > 0 {
		attrs = append(attrs, slog.String(proto.LogRequestID, string(id)))
	}
	if tid := headerTraceID(hdr); tid != "" {
		attrs = append(attrs, slog.String(proto.LogTraceID, tid))
	}
	s.log.LogAttrs(ctx, level, "request answered", attrs...)
}

// metered is the SDK path's outermost receiving middleware: it measures
// every request the SDK serves (initialize, ping, and what the forwarding
// middleware answers from the bus). Notifications are not requests and go
// uncounted.
func (s *Service) metered(v *view) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			start := time.Now()
			s.met.InFlight.Inc()
			var note *callNote
			if s.audit != nil {
				note = &callNote{}
				ctx = withNote(ctx, note)
			}
			res, err := next(ctx, method, req)
			code := errCode(ctx, err)
			s.record(v.tenant, method, code, start)
			var hdr http.Header
			if ex := req.GetExtra(); ex != nil {
				hdr = ex.Header
			}
			s.logAnswered(ctx, v.tenant, method, nil, code, start, hdr)
			if note != nil {
				s.auditSafely(v, method, req, res, code, start, note)
			}
			if ex := req.GetExtra(); ex != nil && ex.Header != nil {
				s.markAudited(ex.Header) // recorded: watchSDK need not
			}
			return res, err
		}
	}
}

// errCode is the JSON-RPC code a handler's error is answered with (0 for
// none): the SDK sends a *jsonrpc.Error's code, nothing to a client that
// went away (counted as cancelled), and internal error otherwise.
func errCode(ctx context.Context, err error) int64 {
	if err == nil {
		return 0
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	if ctx.Err() != nil {
		return codeRequestCancelled
	}
	return jsonrpc.CodeInternalError
}

// noteLimited counts a limit refusal by the limit it names.
func (s *Service) noteLimited(perr *proto.Error) {
	if r, ok := limit.Refused(perr); ok {
		s.met.Limited(r.Limit)
	} else {
		s.met.Limited("")
	}
}

// authReason is the reason class of an authentication refusal, for
// switchyard_edge_auth_refusals_total: bounded, and never the
// description (which may echo what the client sent).
func authReason(f *authFailure) string {
	switch {
	case f.status == http.StatusBadRequest:
		return "invalid_request"
	case f.status == http.StatusForbidden:
		return "forbidden"
	case f.status == http.StatusServiceUnavailable:
		return "issuer_unavailable"
	case f.code == "invalid_token":
		return "invalid_token"
	}
	return "missing_credentials"
}

// sessionsDesc describes switchyard_edge_sessions_open.
var sessionsDesc = prometheus.NewDesc("switchyard_edge_sessions_open",
	"Stateful client sessions the edge holds, by era: the negotiated protocol version of streamable HTTP sessions, or legacy_sse (2026-07-28 clients have no sessions).",
	[]string{"era"}, nil)

// sessionCollector reads the session table at scrape time, so opening and
// closing sessions costs nothing more.
type sessionCollector struct{ t *sessionTable }

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	by := map[string]int{}
	c.t.mu.RLock()
	for _, cs := range c.t.m {
		era := cs.protocol
		if cs.ss != nil && cs.ss.ID() == "" {
			era = "legacy_sse"
		}
		by[era]++
	}
	c.t.mu.RUnlock()
	for era, n := range by {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), era)
	}
}

// listenDesc describes switchyard_edge_listen_subscriptions.
var listenDesc = prometheus.NewDesc("switchyard_edge_listen_subscriptions",
	"Resource subscriptions held by 2026-07-28 subscriptions/listen streams (a stream listening to N URIs counts N); the 2026 era's counterpart of sessions.",
	nil, nil)

// listenCollector counts the listen streams' subscriptions at scrape time.
type listenCollector struct{ l *listens }

func (c listenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- listenDesc }

func (c listenCollector) Collect(ch chan<- prometheus.Metric) {
	n := 0
	c.l.mu.Lock()
	for _, ls := range c.l.byURI {
		n += ls.refs
	}
	c.l.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(listenDesc, prometheus.GaugeValue, float64(n))
}

// Checks reports the edge's readiness check by check (internal/admin): the
// NATS connection, the catalog and tenancy state loaded, the limits fleet,
// the HTTP listener. A stale tenancy snapshot or fleet view is a warning:
// the last good one keeps serving.
func (s *Service) Checks() []admin.Check {
	cs := []admin.Check{
		admin.OK("nats", s.nc.IsConnected(), "not connected"),
		admin.OK("listener", s.Addr() != "", "not listening"),
		admin.OK("catalog", s.ready.Load(), "upstream catalog not loaded"),
		admin.OK("sessions", s.store.Load() != nil, "session store (KV "+proto.BucketSessions+") not open"),
	}
	if s.watcher != nil {
		cs = append(cs, admin.OK("store_seeded", s.seed.Seeded(), "tenancy-svc has not seeded the NATS store (a store lost and being rebuilt)"))
		c := admin.OK("tenancy", s.watcher.Ready(), "tenancy snapshot not loaded")
		if stale, since, reason := s.watcher.Stale(); stale && c.Status == admin.StatusOK {
			c = admin.Check{Name: "tenancy", Status: admin.StatusWarn, Detail: "stale since " + since.UTC().Format(time.RFC3339) + ": " + reason}
		}
		cs = append(cs, c)
	}
	c := admin.OK("limits_fleet", s.fleet.Ready(), "fleet view not loaded")
	if stale, since, reason := s.fleet.Stale(); stale && c.Status == admin.StatusOK {
		c = admin.Check{Name: "limits_fleet", Status: admin.StatusWarn, Detail: "stale since " + since.UTC().Format(time.RFC3339) + ": " + reason}
	}
	return append(cs, c)
}

// startMicro registers the edge's micro service ($SRV PING/INFO/STATS).
func (s *Service) startMicro() (micro.Service, error) {
	return admin.AddService(s.nc, admin.ServiceConfig{
		Name: MicroService, ID: s.cfg.ID, Version: metrics.Version(),
		Description: "Switchyard edge: MCP over HTTP for clients",
		Metadata:    map[string]string{"listen": s.Addr()},
	})
}
