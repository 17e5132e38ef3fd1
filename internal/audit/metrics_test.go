package audit

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fixedStats Stats

func (f fixedStats) Stats() Stats { return Stats(f) }

// TestAuditCollector: the collector exposes each counter under its name
// and reason, and passes the registry's lint.
func TestAuditCollector(t *testing.T) {
	c := Collector(fixedStats{Published: 7, DroppedFull: 3, DroppedPublish: 2, DroppedClosed: 1,
		TrimmedFull: 6, TrimmedTooLarge: 8, Buffered: 5, BufferedBytes: 9000, Pending: 4})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP switchyard_audit_events_dropped_total Audit events dropped, by reason: buffer_full (the stream slow or unreachable), publish_error (no ack, no stream), closed (recorded after shutdown or not flushed in time).
# TYPE switchyard_audit_events_dropped_total counter
switchyard_audit_events_dropped_total{reason="buffer_full"} 3
switchyard_audit_events_dropped_total{reason="closed"} 1
switchyard_audit_events_dropped_total{reason="publish_error"} 2
# HELP switchyard_audit_events_published_total Audit events the audit stream acknowledged.
# TYPE switchyard_audit_events_published_total counter
switchyard_audit_events_published_total 7
# HELP switchyard_audit_payloads_trimmed_total Audit events kept without their arguments and result, by reason: buffer_full (they would have taken the buffer past its byte budget), too_large (the event would have exceeded the stream's maximum message size).
# TYPE switchyard_audit_payloads_trimmed_total counter
switchyard_audit_payloads_trimmed_total{reason="buffer_full"} 6
switchyard_audit_payloads_trimmed_total{reason="too_large"} 8
# HELP switchyard_audit_buffered Audit events waiting in the edge's buffer to be published.
# TYPE switchyard_audit_buffered gauge
switchyard_audit_buffered 5
# HELP switchyard_audit_buffered_bytes Bytes of arguments and results held by the audit events waiting in the edge's buffer.
# TYPE switchyard_audit_buffered_bytes gauge
switchyard_audit_buffered_bytes 9000
# HELP switchyard_audit_pending_acks Audit event publishes awaiting the stream's ack.
# TYPE switchyard_audit_pending_acks gauge
switchyard_audit_pending_acks 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
}
