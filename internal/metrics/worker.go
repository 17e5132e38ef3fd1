package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Worker is an upstream worker's metrics. Create it with [NewWorker]; its
// methods are safe for concurrent use. Gauges of the upstream pool
// (sessions, state, restarts) are read at scrape time from a
// [prometheus.Collector] the worker registers itself ([UpstreamDescs]).
type Worker struct {
	upstream *prometheus.HistogramVec
	byName   sync.Map // upstream name -> *MethodOutcome
}

// NewWorker registers the worker's call metrics in reg.
func NewWorker(reg prometheus.Registerer) (*Worker, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "upstream_request_duration_seconds",
		Help:    "Time a worker spent on a request to an upstream (from admitting it to having its answer), by upstream, method and outcome.",
		Buckets: DurationBuckets,
	}, []string{"upstream", "method", "outcome"})
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	return &Worker{upstream: h}, nil
}

// Upstream records one request to upstream: method, the code it was
// answered with (0: a result) and the time since start.
func (w *Worker) Upstream(upstream, method string, code int64, start time.Time) {
	w.For(upstream).Observe(method, code, time.Since(start))
}

// For returns the (method, outcome) histogram of upstream, bound once.
func (w *Worker) For(upstream string) *MethodOutcome {
	if h, ok := w.byName.Load(upstream); ok {
		return h.(*MethodOutcome)
	}
	h := NewMethodOutcome(w.upstream.MustCurryWith(prometheus.Labels{"upstream": upstream}))
	v, _ := w.byName.LoadOrStore(upstream, h)
	return v.(*MethodOutcome)
}

// Forget drops upstream's series (it left the catalog), so a catalog that
// changes over time does not keep every name it ever had.
func (w *Worker) Forget(upstream string) {
	w.byName.Delete(upstream)
	w.upstream.DeletePartialMatch(prometheus.Labels{"upstream": upstream})
}

// The descriptors of the upstream pool gauges a worker's collector emits.
var (
	UpstreamUpDesc = prometheus.NewDesc(Namespace+"_upstream_up",
		"1 while the worker's connection to the upstream is up, else 0.", []string{"upstream"}, nil)
	UpstreamSessionsDesc = prometheus.NewDesc(Namespace+"_upstream_sessions",
		"Upstream sessions the worker holds, by kind: shared (the pool: stdio processes or the HTTP pool session) or dedicated (one per 2025-era client session).",
		[]string{"upstream", "kind"}, nil)
	UpstreamRestartsDesc = prometheus.NewDesc(Namespace+"_upstream_restarts_total",
		"Times the worker reconnected to the upstream after losing it (process exit, failed pings).", []string{"upstream"}, nil)
	UpstreamStdioSkippedDesc = prometheus.NewDesc(Namespace+"_upstream_stdio_lines_skipped_total",
		"Lines a stdio upstream's processes wrote on stdout that were not messages and were skipped, by reason: not_json (a banner, a log line), text_after_message, not_jsonrpc (JSON that is not JSON-RPC), too_large (over max_message_bytes: a response among them fails its call).",
		[]string{"upstream", "reason"}, nil)
	WorkerInFlightDesc = prometheus.NewDesc(Namespace+"_worker_calls_in_flight",
		"Calls the worker runs now (its queue: beyond worker max_in_flight a call is answered overloaded).", nil, nil)
	WorkerCapacityDesc = prometheus.NewDesc(Namespace+"_worker_calls_capacity",
		"The worker's max_in_flight.", nil, nil)
	WorkerPendingDesc = prometheus.NewDesc(Namespace+"_worker_intake_pending_messages",
		"Messages received by the worker's intake subscriptions and not yet handled (its mailbox).", nil, nil)
)
