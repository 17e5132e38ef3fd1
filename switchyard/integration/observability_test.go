package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// scrape fetches and parses a Prometheus text exposition.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, errors.New(resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// series returns the metric of family name whose labels include want, or
// nil.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// histCount is the sample count of a histogram series (0 when absent).
func histCount(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) uint64 {
	m := series(mfs, name, labels)
	if m == nil || m.GetHistogram() == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

func readyz(addr string) (int, string, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestIntegrationObservabilityMultiProcess runs every role as its own
// process, each with its own admin listener, makes calls of both eras
// (fast path) and an unknown tool, and finds the calls in every role's
// /metrics with their counts and labels: the edge's request duration, the
// router's handling time and the worker's upstream request duration; the
// micro services of every role answer $SRV.PING.
func TestIntegrationObservabilityMultiProcess(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	fxURL, _ := startFixtureHTTP(t)
	natsAddr, edgeAddr := freeAddr(t), freeAddr(t)
	natsURL := "nats://" + natsAddr
	cfgPath := t.TempDir() + "/switchyard.yaml"
	if err := writeFile(cfgPath, fmt.Sprintf(`
listen: %s
nats: %s
worker:
  heartbeat_interval: 200ms
# Every call through the router, so that its counts are exact.
edge:
  route_cache_ttl: 0s
upstreams:
  - name: fixture
    url: %s
`, edgeAddr, natsURL, fxURL)); err != nil {
		t.Fatal(err)
	}
	startProc(t, "nats", sy, "nats", "--addr", natsAddr, "--store", t.TempDir())
	waitTCP(t, natsAddr)
	common := []string{"--config", cfgPath, "--log-format", "text"}
	admins := map[string]string{}
	for _, role := range []string{"tenancy-svc", "router", "upstream-worker", "edge"} {
		admins[role] = freeAddr(t)
		argv := append([]string{sy, role, "--admin", admins[role]}, common...)
		if role == "upstream-worker" {
			argv = append(argv, "--id", "worker-obs")
		}
		startProc(t, role, argv...)
	}
	// Every role's /readyz turns 200 once it serves (the worker's once the
	// fixture is up); /healthz answers throughout.
	for role, addr := range admins {
		eventually(t, 30*time.Second, func() error {
			code, body, err := readyz(addr)
			if err != nil {
				return err
			}
			if code != 200 {
				return fmt.Errorf("%s /readyz %d: %s", role, code, body)
			}
			return nil
		})
		code, body, err := readyz(addr)
		if err != nil || !strings.Contains(body, role+" nats ok") {
			t.Errorf("%s /readyz %d %q %v: no nats check", role, code, body, err)
		}
	}
	if _, body, _ := readyz(admins["upstream-worker"]); !strings.Contains(body, "upstream-worker upstream/fixture ok") {
		t.Errorf("worker /readyz lists no upstream state: %q", body)
	}
	// The edge's own /readyz on its MCP listener still answers.
	if code, _, err := readyz(edgeAddr); err != nil || code != 200 {
		t.Fatalf("edge MCP listener /readyz: %d %v", code, err)
	}

	url := "http://" + edgeAddr + "/mcp"
	s25 := connect(t, url, v2025, nil)
	eventually(t, 30*time.Second, func() error {
		names, _, err := listAll(t.Context(), s25)
		if err != nil {
			return err
		}
		return hasAll(names, "fixture__echo")
	})
	s26 := connect(t, url, v2026, nil)
	const n25, n26 = 7, 4
	for i := range n25 + n26 {
		cs := s25
		if i >= n25 {
			cs = s26
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %v", i, err, res)
		}
	}
	_, err := s25.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__nope"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("unknown tool: %v", err)
	}

	// Each role records after its part of the call: poll until the
	// counts are in, then check them exactly.
	type want struct {
		role, metric string
		labels       map[string]string
		count        uint64
	}
	wants := []want{
		{"edge", "switchyard_edge_request_duration_seconds", map[string]string{"method": "tools/call", "outcome": "ok"}, n25 + n26},
		{"edge", "switchyard_edge_request_duration_seconds", map[string]string{"method": "tools/call", "outcome": "invalid_params"}, 1},
		{"router", "switchyard_router_handling_seconds", map[string]string{"method": "tools/call", "outcome": "ok"}, n25 + n26},
		{"router", "switchyard_router_handling_seconds", map[string]string{"method": "tools/call", "outcome": "invalid_params"}, 1},
		{"upstream-worker", "switchyard_upstream_request_duration_seconds", map[string]string{"upstream": "fixture", "method": "tools/call", "outcome": "ok"}, n25 + n26},
		// The bus time of every call a worker answered (the unknown tool
		// never reached one).
		{"edge", "switchyard_edge_bus_seconds", map[string]string{"method": "tools/call"}, n25 + n26},
	}
	for _, w := range wants {
		eventually(t, 10*time.Second, func() error {
			mfs, err := scrape("http://" + admins[w.role] + "/metrics")
			if err != nil {
				return err
			}
			if got := histCount(mfs, w.metric, w.labels); got != w.count {
				return fmt.Errorf("%s %s%v: count %d, want %d", w.role, w.metric, w.labels, got, w.count)
			}
			return nil
		})
	}
	// The worker saw no client error: the unknown tool stopped at the router.
	wmfs, err := scrape("http://" + admins["upstream-worker"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := series(wmfs, "switchyard_upstream_request_duration_seconds", map[string]string{"outcome": "invalid_params"}); m != nil {
		t.Errorf("worker recorded an invalid_params call: %v", m)
	}
	for _, g := range []struct {
		name   string
		labels map[string]string
	}{
		{"switchyard_upstream_up", map[string]string{"upstream": "fixture"}},
		{"switchyard_upstream_sessions", map[string]string{"upstream": "fixture", "kind": "dedicated"}},
		{"switchyard_upstream_restarts_total", map[string]string{"upstream": "fixture"}},
		{"switchyard_worker_calls_in_flight", nil},
		{"switchyard_worker_intake_pending_messages", nil},
	} {
		if series(wmfs, g.name, g.labels) == nil {
			t.Errorf("worker /metrics has no %s%v", g.name, g.labels)
		}
	}
	if m := series(wmfs, "switchyard_upstream_up", map[string]string{"upstream": "fixture"}); m != nil && m.GetGauge().GetValue() != 1 {
		t.Errorf("switchyard_upstream_up{fixture} = %v, want 1", m.GetGauge().GetValue())
	}
	// The 2025-era session holds a dedicated upstream session and is open
	// at the edge.
	emfs, err := scrape("http://" + admins["edge"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := series(emfs, "switchyard_edge_sessions_open", map[string]string{"era": v2025}); m == nil || m.GetGauge().GetValue() < 1 {
		t.Errorf("switchyard_edge_sessions_open{era=%q} = %v, want >= 1", v2025, m)
	}
	for _, name := range []string{"switchyard_edge_listen_subscriptions", "switchyard_audit_events_published_total"} {
		if series(emfs, name, nil) == nil {
			t.Errorf("edge /metrics has no %s", name)
		}
	}
	rmfs, err := scrape("http://" + admins["router"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if series(rmfs, "switchyard_router_intake_pending_messages", nil) == nil {
		t.Error("router /metrics has no switchyard_router_intake_pending_messages")
	}
	// Every role has build info and its NATS connection's metrics, and no
	// label anywhere carries a session id.
	for role, addr := range admins {
		mfs, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if series(mfs, "switchyard_build_info", nil) == nil {
			t.Errorf("%s: no switchyard_build_info", role)
		}
		if series(mfs, "switchyard_nats_reconnects_total", map[string]string{"role": role}) == nil {
			t.Errorf("%s: no switchyard_nats_reconnects_total{role=%q}", role, role)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if sid := s25.ID(); sid != "" && strings.Contains(l.GetValue(), sid) {
						t.Errorf("%s: %s has the session id in label %s", role, mf.GetName(), l.GetName())
					}
				}
			}
		}
	}

	// $SRV.PING: every role answers as its micro service.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	services := []string{"switchyard-edge", "switchyard-router", "switchyard-tenancy", "switchyard-worker"}
	eventually(t, 10*time.Second, func() error {
		inbox := nc.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
			return err
		}
		var names []string
		ids := map[string]string{}
		for {
			m, err := sub.NextMsg(500 * time.Millisecond)
			if err != nil {
				break
			}
			var p struct {
				Name     string            `json:"name"`
				Metadata map[string]string `json:"metadata"`
			}
			if json.Unmarshal(m.Data, &p) == nil {
				names = append(names, p.Name)
				ids[p.Name] = p.Metadata["id"]
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, services) {
			return fmt.Errorf("$SRV.PING answered by %v, want %v", names, services)
		}
		if ids["switchyard-worker"] != "worker-obs" {
			return fmt.Errorf("worker micro id %q, want worker-obs", ids["switchyard-worker"])
		}
		return nil
	})
}

// TestIntegrationObservabilityEmbedded runs `switchyard dev --admin`: one
// admin listener serves every role's readiness and one registry with
// every role's metrics, where the calls a router granted the edge do not
// count at the router.
func TestIntegrationObservabilityEmbedded(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	fxURL, _ := startFixtureHTTP(t)
	edgeAddr, adminAddr := freeAddr(t), freeAddr(t)
	cfgPath := t.TempDir() + "/switchyard.yaml"
	// Route grants last the whole test (the longest TTL, a minute): the router sees the first call
	// (and one more per grant revoked while the catalog settles).
	if err := writeFile(cfgPath, fmt.Sprintf("listen: %s\nadmin: %s\nedge:\n  route_cache_ttl: 1m\nupstreams:\n  - name: fixture\n    url: %s\n", edgeAddr, adminAddr, fxURL)); err != nil {
		t.Fatal(err)
	}
	startProc(t, "dev", sy, "dev", "--config", cfgPath)
	eventually(t, 30*time.Second, func() error {
		code, body, err := readyz(adminAddr)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	_, body, _ := readyz(adminAddr)
	for _, role := range []string{"edge", "router", "tenancy-svc", "upstream-worker"} {
		if !strings.Contains(body, "\n"+role+" nats ok\n") {
			t.Errorf("aggregated /readyz has no %s checks: %q", role, body)
		}
	}
	cs := connect(t, "http://"+edgeAddr+"/mcp", v2025, nil)
	eventually(t, 30*time.Second, func() error {
		names, _, err := listAll(t.Context(), cs)
		if err != nil {
			return err
		}
		return hasAll(names, "fixture__echo")
	})
	const n = 10
	for range n {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		mfs, err := scrape("http://" + adminAddr + "/metrics")
		if err != nil {
			return err
		}
		ok := map[string]string{"method": "tools/call", "outcome": "ok"}
		for _, name := range []string{"switchyard_edge_request_duration_seconds", "switchyard_upstream_request_duration_seconds"} {
			if got := histCount(mfs, name, ok); got != n {
				return fmt.Errorf("%s{tools/call,ok}: %d, want %d", name, got, n)
			}
		}
		// The edge sends a tool's calls straight to the worker once a
		// router granted the route.
		if got := histCount(mfs, "switchyard_router_handling_seconds", ok); got < 1 || got > n/2 {
			return fmt.Errorf("switchyard_router_handling_seconds{tools/call,ok}: %d of %d calls routed, want 1 to %d", got, n, n/2)
		}
		for _, role := range []string{"edge", "router", "tenancy-svc", "upstream-worker"} {
			if series(mfs, "switchyard_nats_connected", map[string]string{"role": role}) == nil {
				return fmt.Errorf("no switchyard_nats_connected{role=%q}", role)
			}
		}
		return nil
	})
}
