package worker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-mcp/switchyard/internal/admin"
)

// TestWorkerMetrics: calls are recorded by upstream, method and outcome;
// the pool gauges and readiness checks show the upstream up with its
// processes; the micro service answers with the worker's id.
func TestWorkerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := startWorker(t, Config{Metrics: reg, MaxInFlight: 8}, stdioSpec("up", 2))
	e.waitUp("up")
	for range 3 {
		if r := e.call(toolCall("up", "pid", `{}`)); r.Error != nil {
			t.Fatal(r.Error)
		}
	}
	const want = `
# HELP switchyard_upstream_up 1 while the worker's connection to the upstream is up, else 0.
# TYPE switchyard_upstream_up gauge
switchyard_upstream_up{upstream="up"} 1
# HELP switchyard_upstream_sessions Upstream sessions the worker holds, by kind: shared (the pool: stdio processes or the HTTP pool session) or dedicated (one per 2025-era client session).
# TYPE switchyard_upstream_sessions gauge
switchyard_upstream_sessions{kind="dedicated",upstream="up"} 0
switchyard_upstream_sessions{kind="shared",upstream="up"} 2
# HELP switchyard_worker_calls_capacity The worker's max_in_flight.
# TYPE switchyard_worker_calls_capacity gauge
switchyard_worker_calls_capacity 8
`
	// The reply leaves before the handler's goroutine returns its token:
	// in flight drops to 0 right after.
	eventually(t, 5*time.Second, "calls recorded", func() bool {
		return testutil.CollectAndCount(reg, "switchyard_upstream_request_duration_seconds") == 1 &&
			testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP switchyard_worker_calls_in_flight Calls the worker runs now (its queue: beyond worker max_in_flight a call is answered overloaded).
# TYPE switchyard_worker_calls_in_flight gauge
switchyard_worker_calls_in_flight 0
`), "switchyard_worker_calls_in_flight") == nil
	})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"switchyard_upstream_up", "switchyard_upstream_sessions", "switchyard_worker_calls_capacity"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_upstream_request_duration_seconds" {
			continue
		}
		m := mf.GetMetric()[0]
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		if got := strings.Join(ls, ","); got != "method=tools/call,outcome=ok,upstream=up" || m.GetHistogram().GetSampleCount() != 3 {
			t.Errorf("upstream request series %s count %d, want method=tools/call,outcome=ok,upstream=up count 3", got, m.GetHistogram().GetSampleCount())
		}
	}
	checks := map[string]admin.Status{}
	for _, c := range e.svc.Checks() {
		checks[c.Name] = c.Status
	}
	for _, n := range []string{"nats", "subscriptions", "catalog", "running", "upstream/up", "upstreams"} {
		if checks[n] != admin.StatusOK {
			t.Errorf("check %s = %q, want ok (all: %v)", n, checks[n], checks)
		}
	}
	msg, err := e.nc.Request("$SRV.PING."+MicroService, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var id struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(msg.Data, &id); err != nil || id.Metadata["id"] != "w1" {
		t.Errorf("PING %s: want metadata id w1", msg.Data)
	}
}
