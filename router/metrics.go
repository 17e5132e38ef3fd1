package router

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/metrics"
)

// intakeCollector reads the router's mailbox (the pending messages of its
// intake subscriptions) at scrape time.
type intakeCollector struct{ s *Service }

func (c intakeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- metrics.RouterPendingDesc }

func (c intakeCollector) Collect(ch chan<- prometheus.Metric) {
	pending := 0
	if subs := c.s.intake.Load(); subs != nil {
		for _, sub := range *subs {
			if n, _, err := sub.Pending(); err == nil {
				pending += n
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(metrics.RouterPendingDesc, prometheus.GaugeValue, float64(pending))
}
