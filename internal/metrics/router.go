package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Router is the router's metrics. Create it with [NewRouter]; its methods
// are safe for concurrent use.
type Router struct {
	// Handling is switchyard_router_handling_seconds{method,outcome}: the
	// router's own time per request (decode, policy, placement, publish),
	// which is its hop in the gateway's share. A request it routed to a
	// worker is outcome "ok".
	Handling *MethodOutcome
	// Denied is switchyard_router_policy_denials_total{kind}.
	denied *prometheus.CounterVec
	// deniedKind holds the pre-bound children of denied.
	deniedKind map[string]prometheus.Counter
	// ListCache is switchyard_router_list_cache_total{result}: hit or miss.
	listHit, listMiss prometheus.Counter
}

// NewRouter registers the router's metrics in reg.
func NewRouter(reg prometheus.Registerer) (*Router, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "router", Name: "handling_seconds",
		Help:    "Time the router spent on a request (its hop), by method and outcome; outcome ok means routed or answered.",
		Buckets: DurationBuckets,
	}, []string{"method", "outcome"})
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "router", Name: "policy_denials_total",
		Help: "Requests a tenant's policy refused at the router, by kind (tools, prompts, resources, upstreams).",
	}, []string{"kind"})
	cache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "router", Name: "list_cache_total",
		Help: "Lookups of a tenant's filtered list in the router's cache, by result (hit or miss).",
	}, []string{"result"})
	r := &Router{Handling: NewMethodOutcome(h), denied: denied, deniedKind: map[string]prometheus.Counter{},
		listHit: cache.WithLabelValues("hit"), listMiss: cache.WithLabelValues("miss")}
	for _, k := range []string{"tools", "prompts", "resources", "upstreams"} {
		r.deniedKind[k] = denied.WithLabelValues(k)
	}
	for _, c := range []prometheus.Collector{h, denied, cache} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Routed records one request the router handled: method, the code it
// answered with (0: routed or answered with a result) and the time since
// start.
func (r *Router) Routed(method string, code int64, start time.Time) {
	r.Handling.Observe(method, code, time.Since(start))
}

// Denied counts a request refused by policy; kind is tools, prompts,
// resources or upstreams.
func (r *Router) Denied(kind string) {
	if c := r.deniedKind[kind]; c != nil {
		c.Inc()
	}
}

// ListCache counts a lookup in the tenants' list cache.
func (r *Router) ListCache(hit bool) {
	if hit {
		r.listHit.Inc()
	} else {
		r.listMiss.Inc()
	}
}

// RouterPendingDesc describes switchyard_router_intake_pending_messages.
var RouterPendingDesc = prometheus.NewDesc(Namespace+"_router_intake_pending_messages",
	"Calls delivered to the router's intake subscriptions and not yet handled (its mailbox).", nil, nil)
