package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsOutcome(t *testing.T) {
	cases := []struct {
		code int64
		want string
	}{
		{0, "ok"}, {-32602, "invalid_params"}, {-32601, "method_not_found"}, {-32069, "limited"},
		{-32064, "worker_lost"}, {-32800, "cancelled"}, {-32020, "header_mismatch"}, {-31999, "upstream_error"}, {42, "upstream_error"},
	}
	for _, tc := range cases {
		if got := Outcome(tc.code); got != tc.want {
			t.Errorf("Outcome(%d) = %q, want %q", tc.code, got, tc.want)
		}
	}
	if got := MethodLabel("tools/call"); got != "tools/call" {
		t.Errorf("MethodLabel(tools/call) = %q", got)
	}
	if got := MethodLabel("x/made-up"); got != "other" {
		t.Errorf("MethodLabel(x/made-up) = %q, want other", got)
	}
}

func TestMetricsMethodOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := NewEdge(reg, EdgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.Request("tools/call", 0, start)
	e.Request("tools/call", 0, start)
	e.Request("tools/call", -32602, start)
	e.Request("x/made-up", -32601, start)
	n, err := testutil.GatherAndCount(reg, "switchyard_edge_request_duration_seconds")
	if err != nil || n != 3 {
		t.Fatalf("series = %d (%v), want 3: tools/call ok and invalid_params, other method_not_found", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if h := m.GetHistogram(); h != nil {
				got[strings.Join(ls, ",")] = h.GetSampleCount()
			}
		}
	}
	for k, v := range map[string]uint64{
		"method=tools/call,outcome=ok":             2,
		"method=tools/call,outcome=invalid_params": 1,
		"method=other,outcome=method_not_found":    1,
	} {
		if got[k] != v {
			t.Errorf("%s: count %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if a := testing.AllocsPerRun(100, func() { e.Request("tools/call", 0, start) }); a != 0 {
		t.Errorf("Request allocates %v times per call, want 0", a)
	}
}

func TestMetricsTenantLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	off, err := NewEdge(reg, EdgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	off.Tenant("acme", 1, 0)
	if n, _ := testutil.GatherAndCount(reg, "switchyard_edge_tenant_requests_total"); n != 0 {
		t.Fatalf("tenant series with tenant labels off: %d", n)
	}
	reg = prometheus.NewRegistry()
	on, err := NewEdge(reg, EdgeOptions{TenantLabels: 2})
	if err != nil {
		t.Fatal(err)
	}
	on.Tenant("acme", 2, 0)
	on.Tenant("acme", 2, -32069)
	on.Tenant("globex", 3, 0) // over the bound: _other
	const want = `
# HELP switchyard_edge_tenant_requests_total MCP requests by tenant and outcome (only while the tenant count is within metrics.tenant_labels; else tenant="_other").
# TYPE switchyard_edge_tenant_requests_total counter
switchyard_edge_tenant_requests_total{outcome="limited",tenant="acme"} 1
switchyard_edge_tenant_requests_total{outcome="ok",tenant="_other"} 1
switchyard_edge_tenant_requests_total{outcome="ok",tenant="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchyard_edge_tenant_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestMetricsWorkerForget(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := NewWorker(reg)
	if err != nil {
		t.Fatal(err)
	}
	w.Upstream("a", "tools/call", 0, time.Now())
	w.Upstream("b", "tools/call", -32061, time.Now())
	if n, _ := testutil.GatherAndCount(reg, "switchyard_upstream_request_duration_seconds"); n != 2 {
		t.Fatalf("series = %d, want 2", n)
	}
	w.Forget("a")
	if n, _ := testutil.GatherAndCount(reg, "switchyard_upstream_request_duration_seconds"); n != 1 {
		t.Fatalf("series after Forget = %d, want 1", n)
	}
	w.Upstream("a", "tools/call", 0, time.Now()) // comes back
	if n, _ := testutil.GatherAndCount(reg, "switchyard_upstream_request_duration_seconds"); n != 2 {
		t.Fatalf("series = %d, want 2", n)
	}
}

func TestMetricsRegistry(t *testing.T) {
	reg := NewRegistry()
	if n, err := testutil.GatherAndCount(reg, "switchyard_build_info", "go_goroutines"); err != nil || n != 2 {
		t.Fatalf("build info and go collector: %d series (%v)", n, err)
	}
	if _, err := NewRouter(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRouter(reg); err == nil {
		t.Fatal("a second router in one registry registered")
	}
	if v := Version(); v == "" {
		t.Fatal("empty version")
	}
}

// BenchmarkMetricsRequest is the hot-path cost of recording one request
// (edge, router and worker record the same way).
func BenchmarkMetricsRequest(b *testing.B) {
	e, err := NewEdge(prometheus.NewRegistry(), EdgeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.InFlight.Inc()
			e.InFlight.Dec()
			e.Request("tools/call", 0, start)
		}
	})
}
