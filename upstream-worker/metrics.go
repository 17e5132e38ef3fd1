package worker

import (
	"github.com/switchyard-mcp/switchyard/proto"

	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// MicroService is the name of every worker's NATS micro service (its
// metadata "id" is the worker's id).
const MicroService = proto.ServiceWorker

// poolCollector reads the worker's upstream pool and queue at scrape time
// (metrics.UpstreamUpDesc and the others), so the hot path pays nothing
// for them.
type poolCollector struct{ s *Service }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{metrics.UpstreamUpDesc, metrics.UpstreamSessionsDesc, metrics.UpstreamRestartsDesc, metrics.UpstreamStdioSkippedDesc,
		metrics.WorkerInFlightDesc, metrics.WorkerCapacityDesc, metrics.WorkerPendingDesc} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(metrics.WorkerInFlightDesc, prometheus.GaugeValue, float64(len(s.sem)))
	ch <- prometheus.MustNewConstMetric(metrics.WorkerCapacityDesc, prometheus.GaugeValue, float64(cap(s.sem)))
	mgr := s.mgrSet.Load()
	if mgr == nil {
		return
	}
	pending := 0
	if sub := s.wkSub.Load(); sub != nil {
		if n, _, err := sub.Pending(); err == nil {
			pending += n
		}
	}
	for _, sub := range mgr.poolSubs() {
		if n, _, err := sub.Pending(); err == nil {
			pending += n
		}
	}
	ch <- prometheus.MustNewConstMetric(metrics.WorkerPendingDesc, prometheus.GaugeValue, float64(pending))
	for name, u := range mgr.all() {
		up := 0.0
		if u.State().Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(metrics.UpstreamUpDesc, prometheus.GaugeValue, up, name)
		ch <- prometheus.MustNewConstMetric(metrics.UpstreamSessionsDesc, prometheus.GaugeValue, float64(u.Shared()), name, "shared")
		ch <- prometheus.MustNewConstMetric(metrics.UpstreamSessionsDesc, prometheus.GaugeValue, float64(u.Dedicated()), name, "dedicated")
		ch <- prometheus.MustNewConstMetric(metrics.UpstreamRestartsDesc, prometheus.CounterValue, float64(u.Restarts()), name)
		if u.Spec().Transport == proto.TransportStdio {
			for _, r := range upstream.SkipReasons {
				ch <- prometheus.MustNewConstMetric(metrics.UpstreamStdioSkippedDesc, prometheus.CounterValue, float64(u.Skipped(r)), name, r)
			}
		}
	}
}

// Checks reports the worker's readiness check by check (internal/admin):
// the NATS connection, its intake subscriptions, the catalog loaded, not
// shutting down, and its upstreams: each one down is a warning (calls to
// it fail over to other workers, the others still serve), all of them
// down a failure. Ready does not wait for upstreams (they may take long
// to connect, and heartbeats tell routers which are up); /readyz does.
func (s *Service) Checks() []admin.Check {
	cs := []admin.Check{
		admin.OK("nats", s.nc.IsConnected(), "not connected"),
		admin.OK("subscriptions", s.live.Load(), "intake not subscribed"),
		admin.OK("catalog", s.synced.Load(), "upstream catalog not loaded"),
		admin.OK("running", !s.stopping.Load(), "shutting down"),
	}
	mgr := s.mgrSet.Load()
	if mgr == nil {
		return cs
	}
	all := mgr.all()
	up := 0
	for _, name := range slices.Sorted(maps.Keys(all)) {
		st := all[name].State()
		if st.Up {
			up++
			cs = append(cs, admin.Check{Name: "upstream/" + name, Status: admin.StatusOK})
		} else {
			cs = append(cs, admin.Check{Name: "upstream/" + name, Status: admin.StatusWarn, Detail: st.Err})
		}
	}
	if len(all) > 0 {
		cs = append(cs, admin.OK("upstreams", up > 0, "no upstream is up"))
	}
	return cs
}
