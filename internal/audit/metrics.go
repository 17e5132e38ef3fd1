package audit

import "github.com/prometheus/client_golang/prometheus"

// Metric descriptions of a Publisher's [Stats], read at scrape time.
var (
	publishedDesc = prometheus.NewDesc("switchyard_audit_events_published_total",
		"Audit events the audit stream acknowledged.", nil, nil)
	droppedDesc = prometheus.NewDesc("switchyard_audit_events_dropped_total",
		"Audit events dropped, by reason: buffer_full (the stream slow or unreachable), publish_error (no ack, no stream), closed (recorded after shutdown or not flushed in time).",
		[]string{"reason"}, nil)
	trimmedDesc = prometheus.NewDesc("switchyard_audit_payloads_trimmed_total",
		"Audit events kept without their arguments and result, by reason: buffer_full (they would have taken the buffer past its byte budget), too_large (the event would have exceeded the stream's maximum message size).",
		[]string{"reason"}, nil)
	bufferedDesc = prometheus.NewDesc("switchyard_audit_buffered",
		"Audit events waiting in the edge's buffer to be published.", nil, nil)
	bufferedBytesDesc = prometheus.NewDesc("switchyard_audit_buffered_bytes",
		"Bytes of arguments and results held by the audit events waiting in the edge's buffer.", nil, nil)
	pendingDesc = prometheus.NewDesc("switchyard_audit_pending_acks",
		"Audit event publishes awaiting the stream's ack.", nil, nil)
)

// Collector returns a prometheus.Collector of src's Stats: the counters
// switchyard_audit_events_published_total and
// switchyard_audit_events_dropped_total{reason} and
// switchyard_audit_payloads_trimmed_total{reason}, and the gauges
// switchyard_audit_buffered, switchyard_audit_buffered_bytes and
// switchyard_audit_pending_acks. It reads
// Stats at scrape time only, so recording costs nothing more.
func Collector(src StatsSource) prometheus.Collector { return statsCollector{src} }

type statsCollector struct{ src StatsSource }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- publishedDesc
	ch <- droppedDesc
	ch <- trimmedDesc
	ch <- bufferedDesc
	ch <- bufferedBytesDesc
	ch <- pendingDesc
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.CounterValue, float64(s.Published))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.DroppedFull), "buffer_full")
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.DroppedPublish), "publish_error")
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.DroppedClosed), "closed")
	ch <- prometheus.MustNewConstMetric(trimmedDesc, prometheus.CounterValue, float64(s.TrimmedFull), "buffer_full")
	ch <- prometheus.MustNewConstMetric(trimmedDesc, prometheus.CounterValue, float64(s.TrimmedTooLarge), "too_large")
	ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(s.Buffered))
	ch <- prometheus.MustNewConstMetric(bufferedBytesDesc, prometheus.GaugeValue, float64(s.BufferedBytes))
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.Pending))
}
