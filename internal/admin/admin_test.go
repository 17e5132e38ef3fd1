package admin

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

type readyRole struct{ ready atomic.Bool }

func (r *readyRole) Ready() bool { return r.ready.Load() }

type checkRole struct{ checks []Check }

func (c *checkRole) Ready() bool     { return true }
func (c *checkRole) Checks() []Check { return c.checks }

func TestAdminAggregate(t *testing.T) {
	up := &readyRole{}
	up.ready.Store(true)
	down := &readyRole{}
	warn := &checkRole{checks: []Check{{Name: "nats", Status: StatusOK}, {Name: "tenancy", Status: StatusWarn, Detail: "stale"}}}
	fail := &checkRole{checks: []Check{{Name: "nats", Status: StatusOK}, {Name: "catalog", Status: StatusFail, Detail: "not loaded"}}}
	cases := []struct {
		name  string
		roles map[string]Readier
		ready bool
		text  string
	}{
		{"no roles", nil, false, "not ready\n"},
		{"one ready", map[string]Readier{"edge": up}, true, "ready\nedge ready ok\n"},
		{"one not ready", map[string]Readier{"edge": down}, false, "not ready\nedge ready fail: not ready\n"},
		{"warn is ready", map[string]Readier{"router": warn, "edge": up}, true,
			"ready\nedge ready ok\nrouter nats ok\nrouter tenancy warn: stale\n"},
		{"one failing check fails all roles", map[string]Readier{"router": warn, "upstream-worker": fail}, false,
			"not ready\nrouter nats ok\nrouter tenancy warn: stale\nupstream-worker nats ok\nupstream-worker catalog fail: not loaded\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Aggregate(tc.roles)
			if rep.Ready != tc.ready {
				t.Errorf("ready = %v, want %v", rep.Ready, tc.ready)
			}
			if d := cmp.Diff(tc.text, rep.Text()); d != "" {
				t.Errorf("text (-want +got):\n%s", d)
			}
		})
	}
}

func get(t *testing.T, h http.Handler, path, accept string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestAdminEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_test_total", Help: "test"})
	c.Add(3)
	reg.MustRegister(c)
	s := New(Config{Addr: "127.0.0.1:9090", Gatherer: reg}, nil)
	edge := &readyRole{}
	s.AddRole("edge", edge)
	s.AddRole("router", &checkRole{checks: []Check{{Name: "nats", Status: StatusOK}}})
	h := s.Handler()

	if code, body := get(t, h, "/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz", ""); code != 503 || !strings.Contains(body, "edge ready fail") {
		t.Errorf("/readyz before ready = %d %q", code, body)
	}
	if code, _ := get(t, h, "/readyz/router", ""); code != 200 {
		t.Errorf("/readyz/router = %d, want 200 (only the router's checks)", code)
	}
	if code, _ := get(t, h, "/readyz/nope", ""); code != 404 {
		t.Errorf("/readyz/nope = %d, want 404", code)
	}
	edge.ready.Store(true)
	code, body := get(t, h, "/readyz", "application/json")
	if code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	var rep Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	want := Report{Ready: true, Roles: []RoleReport{
		{Role: "edge", Ready: true, Checks: []Check{{Name: "ready", Status: StatusOK}}},
		{Role: "router", Ready: true, Checks: []Check{{Name: "nats", Status: StatusOK}}},
	}}
	if d := cmp.Diff(want, rep); d != "" {
		t.Errorf("/readyz JSON (-want +got):\n%s", d)
	}
	if code, body := get(t, h, "/metrics", ""); code != 200 || !strings.Contains(body, "switchyard_test_total 3") {
		t.Errorf("/metrics = %d %q", code, body)
	}
	s.Mount("GET /extra", RuleOpen, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("mounted")) }))
	if code, body := get(t, h, "/extra", ""); code != 200 || body != "mounted" {
		t.Errorf("/extra = %d %q", code, body)
	}
}

func TestAdminRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok\n" || s.Addr() != ln.Addr().String() {
		t.Errorf("healthz %q, addr %q", b, s.Addr())
	}
	if code, _ := get(t, s.Handler(), "/metrics", ""); code != 404 {
		t.Errorf("/metrics without a gatherer = %d, want 404", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
