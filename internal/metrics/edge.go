package metrics

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Edge is the edge's metrics. Create it with [NewEdge]; its methods are
// safe for concurrent use.
type Edge struct {
	// Requests is switchyard_edge_request_duration_seconds{method,outcome}:
	// every MCP request the edge answers, fast path and SDK path alike,
	// from the edge's first look at it to its response being written.
	Requests *MethodOutcome
	// InFlight is switchyard_edge_requests_in_flight.
	InFlight prometheus.Gauge

	bus      *prometheus.HistogramVec
	busCells []atomic.Pointer[cell] // by method index

	routeCache *prometheus.CounterVec
	routeHit   prometheus.Counter
	routeMiss  prometheus.Counter

	authRefusals *prometheus.CounterVec
	limited      *prometheus.CounterVec
	limitedMu    sync.Mutex
	limitedBy    map[string]prometheus.Counter // guarded by limitedMu

	tenants      *prometheus.CounterVec // nil unless TenantLabels > 0
	maxTenants   int
	tenantsMu    sync.Mutex
	tenantsCache map[tenantKey]prometheus.Counter // guarded by tenantsMu
}

type tenantKey struct {
	tenant  string
	outcome int
}

// EdgeOptions are the edge's metric options.
type EdgeOptions struct {
	// TenantLabels, when positive, turns on
	// switchyard_edge_tenant_requests_total{tenant,outcome} while the
	// tenancy state holds at most this many tenants (above it the series
	// go to tenant "_other", so a tenant count that grows cannot grow the
	// series without bound). 0: off (the default).
	TenantLabels int
}

// NewEdge registers the edge's metrics in reg.
func NewEdge(reg prometheus.Registerer, o EdgeOptions) (*Edge, error) {
	req := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "edge", Name: "request_duration_seconds",
		Help:    "Time the edge took to answer an MCP request, by method and outcome (ok or the JSON-RPC error class).",
		Buckets: DurationBuckets,
	}, []string{"method", "outcome"})
	e := &Edge{
		Requests: NewMethodOutcome(req),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "edge", Name: "requests_in_flight",
			Help: "MCP requests the edge is answering now.",
		}),
		authRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "edge", Name: "auth_refusals_total",
			Help: "Requests refused before reaching an MCP endpoint, by HTTP status and reason class.",
		}, []string{"status", "reason"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "limit_rejections_total",
			Help: "Requests refused for a tenant or principal limit (-32069), or by the edge's own caps (edge_sessions: 503; edge_connections: a connection refused), by the limit exceeded.",
		}, []string{"limit"}),
		limitedBy:  map[string]prometheus.Counter{},
		maxTenants: o.TenantLabels,
	}
	e.bus = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "edge", Name: "bus_seconds",
		Help:    "Time a call answered by a worker spent between edge and worker, by method: from the edge publishing it to the reply arriving, less the worker's own time on it. The router's hop plus the bus transits.",
		Buckets: BusBuckets,
	}, []string{"method"})
	e.busCells = make([]atomic.Pointer[cell], len(Methods))
	// The limits' series exist from the start, at 0: a rate over them is
	// 0, not absent, before the first refusal.
	for _, l := range limitNames {
		e.limitedBy[l] = e.limited.WithLabelValues(l)
	}
	e.routeCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "edge", Name: "route_cache_total",
		Help: "tools/call attempts by how they were sent: hit (straight to a worker on a router's route grant) or miss (through a router).",
	}, []string{"result"})
	e.routeHit, e.routeMiss = e.routeCache.WithLabelValues("hit"), e.routeCache.WithLabelValues("miss")
	cs := []prometheus.Collector{req, e.InFlight, e.bus, e.routeCache, e.authRefusals, e.limited}
	if o.TenantLabels > 0 {
		e.tenants = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "edge", Name: "tenant_requests_total",
			Help: "MCP requests by tenant and outcome (only while the tenant count is within metrics.tenant_labels; else tenant=\"_other\").",
		}, []string{"tenant", "outcome"})
		e.tenantsCache = map[tenantKey]prometheus.Counter{}
		cs = append(cs, e.tenants)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// RouteCache counts one tools/call attempt of an edge whose route cache is
// on (switchyard_edge_route_cache_total): hit when it went straight to a
// worker on a route grant, miss when it went through a router.
func (e *Edge) RouteCache(hit bool) {
	if hit {
		e.routeHit.Inc()
		return
	}
	e.routeMiss.Inc()
}

// Request records one answered request: method, the JSON-RPC error code it
// was answered with (0: a result) and the time since start.
func (e *Edge) Request(method string, code int64, start time.Time) {
	e.Requests.Observe(method, code, time.Since(start))
}

// Bus records the time a call answered by a worker spent between edge and
// worker (switchyard_edge_bus_seconds): from publishing it to its reply
// arriving, less the worker's own time (proto.Reply.ServiceNs). Negative
// durations (clock steps) are recorded as 0.
func (e *Edge) Bus(method string, d time.Duration) {
	d = max(d, 0)
	i := methodIndex[method]
	c := &e.busCells[i]
	p := c.Load()
	if p == nil {
		p = &cell{o: e.bus.WithLabelValues(Methods[i])}
		c.Store(p)
	}
	p.o.Observe(d.Seconds())
}

// Tenant counts one request of tenant when tenant labels are on; tenants
// is the number of tenants the edge knows now.
func (e *Edge) Tenant(tenant string, tenants int, code int64) {
	if e.tenants == nil {
		return
	}
	if tenants > e.maxTenants {
		tenant = "_other"
	}
	k := tenantKey{tenant, outcomeIndex(code)}
	e.tenantsMu.Lock()
	c := e.tenantsCache[k]
	if c == nil {
		c = e.tenants.WithLabelValues(tenant, outcomes[k.outcome].label)
		e.tenantsCache[k] = c
	}
	e.tenantsMu.Unlock()
	c.Inc()
}

// AuthRefusal counts a request refused with HTTP status for reason (a
// class: missing_credentials, invalid_request, invalid_token, forbidden,
// insufficient_scope, issuer_unavailable).
func (e *Edge) AuthRefusal(status int, reason string) {
	e.authRefusals.WithLabelValues(strconv.Itoa(status), reason).Inc()
}

// limitNames are the limit label's values: internal/limit's names, and
// the edge's own caps (edge_sessions, edge_connections).
var limitNames = []string{"tenant_rate", "principal_rate", "in_flight", "sessions", "edge_sessions", "edge_connections"}

// Limited counts a request refused for limit (one of limitNames; any other
// is "other"): a connection over the edge's cap counts as a request.
func (e *Edge) Limited(limit string) {
	if !slices.Contains(limitNames, limit) {
		limit = "other"
	}
	e.limitedMu.Lock()
	c := e.limitedBy[limit]
	if c == nil {
		c = e.limited.WithLabelValues(limit)
		e.limitedBy[limit] = c
	}
	e.limitedMu.Unlock()
	c.Inc()
}
