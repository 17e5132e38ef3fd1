package edge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// gather returns the edge's metric families by name.
func gather(t *testing.T, e *Service) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := e.reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// labelled returns the families' series as "name{v1 v2}" -> value (a
// histogram's sample count).
func labelled(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetValue())
		}
		k := strings.Join(ls, " ")
		switch {
		case m.GetHistogram() != nil:
			out[k] = float64(m.GetHistogram().GetSampleCount())
		case m.GetCounter() != nil:
			out[k] = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

// waitFor polls the edge's metrics until check passes: a request is
// recorded after its response is written.
func waitFor(t *testing.T, e *Service, check func(map[string]*dto.MetricFamily) error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := check(gather(t, e))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestEdgeMetricsRequests: requests served on the fast path and through
// the SDK are counted by method and outcome; sessions by era; the edge's
// readiness checks pass once it serves.
func TestEdgeMetricsRequests(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk=%v", sdk), func(t *testing.T) {
			var nc *nats.Conn
			g := newRigWith(t, func(m *nats.Msg) {
				var req proto.Request
				_ = proto.Unmarshal(m.Data, &req)
				if req.Name == "up__bad" {
					reply(nc, m, &proto.Reply{Error: proto.Errorf(proto.CodeUpstreamUnavailable, "down")})
					return
				}
				reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)})
			}, &rigOpts{noFastPath: sdk})
			nc = g.nc
			for _, c := range g.e.Checks() {
				if c.Status != admin.StatusOK {
					t.Errorf("check %s: %s %s", c.Name, c.Status, c.Detail)
				}
			}
			g.initialize()
			for range 3 {
				if _, e := g.call("tools/call", `{"name":"up__x","arguments":{}}`); e != nil {
					t.Fatal(e)
				}
			}
			if _, e := g.call("tools/call", `{"name":"up__bad","arguments":{}}`); e == nil || e.Code != int64(proto.CodeUpstreamUnavailable) {
				t.Fatalf("up__bad: %+v", e)
			}
			waitFor(t, g.e, func(mfs map[string]*dto.MetricFamily) error {
				got := labelled(mfs, "switchyard_edge_request_duration_seconds")
				want := map[string]float64{"initialize ok": 1, "tools/call ok": 3, "tools/call upstream_unavailable": 1}
				for k, v := range want {
					if got[k] != v {
						return fmt.Errorf("request counts %v, want %v", got, want)
					}
				}
				if len(got) != len(want) {
					return fmt.Errorf("request counts %v, want only %v (notifications are not requests)", got, want)
				}
				if in := labelled(mfs, "switchyard_edge_requests_in_flight")[""]; in != 0 {
					return fmt.Errorf("in flight %v", in)
				}
				return nil
			})
			if open := labelled(gather(t, g.e), "switchyard_edge_sessions_open"); open["2025-11-25"] != 1 {
				t.Errorf("sessions open %v, want one 2025-11-25", open)
			}
		})
	}
}

// TestEdgeMetricsRefusals: authentication refusals are counted by status
// and reason class, never by what the client sent.
func TestEdgeMetricsRefusals(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	if code, _, _ := e.do(t, http.MethodPost, "/mcp", "", "", initBody); code != 401 {
		t.Fatalf("no credentials: %d", code)
	}
	if code, _, _ := e.do(t, http.MethodPost, "/mcp", "Bearer sy_nope", "", initBody); code != 401 {
		t.Fatalf("bad key: %d", code)
	}
	if code, _, _ := e.do(t, http.MethodPost, "/mcp", "Basic eDp5", "", initBody); code != 401 {
		t.Fatalf("basic: %d", code)
	}
	if code, _, _ := e.do(t, http.MethodPost, "/mcp", "Bearer a b", "", initBody); code != 400 {
		t.Fatalf("two tokens: %d", code)
	}
	got := labelled(gather(t, e.g.e), "switchyard_edge_auth_refusals_total")
	want := map[string]float64{"missing_credentials 401": 2, "invalid_token 401": 1, "invalid_request 400": 1}
	if len(got) != len(want) {
		t.Fatalf("refusals %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("refusals %v, want %v", got, want)
		}
	}
}

// TestEdgeMetricsLimited: a request refused for a tenant limit is counted
// by the limit and as outcome "limited".
func TestEdgeMetricsLimited(t *testing.T) {
	ts := config.DefaultTenants()
	ts[0].Limits = tenancy.Limits{Rate: 0.001, Burst: 2} // two requests, then none for a long while
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) { reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)}) },
		&rigOpts{tenancy: tenancy.Static{Snap: tenancy.NewSnapshot(ts, nil)}})
	nc = g.nc
	g.initialize()
	limited := 0
	for range 4 {
		if _, e := g.call("tools/call", `{"name":"up__x","arguments":{}}`); e != nil {
			if e.Code != int64(proto.CodeLimited) {
				t.Fatalf("refusal %+v, want -32069", e)
			}
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no call was limited")
	}
	waitFor(t, g.e, func(mfs map[string]*dto.MetricFamily) error {
		if got := labelled(mfs, "switchyard_limit_rejections_total")["tenant_rate"]; got != float64(limited) {
			return fmt.Errorf("limit rejections %v, want %d tenant_rate", labelled(mfs, "switchyard_limit_rejections_total"), limited)
		}
		if got := labelled(mfs, "switchyard_edge_request_duration_seconds")["tools/call limited"]; got != float64(limited) {
			return fmt.Errorf("limited requests %v", labelled(mfs, "switchyard_edge_request_duration_seconds"))
		}
		return nil
	})
}

// TestEdgeMetricsPrecheck: requests the edge refuses before the fast path
// or the SDK sees them (unparsable body, unknown method) are counted, an
// unknown method as "other".
func TestEdgeMetricsPrecheck(t *testing.T) {
	g := newRig(t, nil)
	g.initialize()
	if code, _, _ := g.post(`{"jsonrpc":"2.0","id":1,`); code != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d", code)
	}
	if _, e := g.call("x/made-up", `{}`); e == nil || e.Code != -32601 {
		t.Fatalf("unknown method: %+v", e)
	}
	got := labelled(gather(t, g.e), "switchyard_edge_request_duration_seconds")
	if got["other parse_error"] != 1 || got["other method_not_found"] != 1 {
		t.Errorf("request counts %v, want other parse_error 1 and other method_not_found 1", got)
	}
}

// TestEdgeMetricsListen: switchyard_edge_listen_subscriptions counts the
// URIs 2026-07-28 subscriptions/listen streams hold, and drops to 0 when
// the stream ends.
func TestEdgeMetricsListen(t *testing.T) {
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) { reply(nc, m, &proto.Reply{Result: []byte(`{}`)}) }, &rigOpts{sse: true})
	nc = g.nc
	listen := `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":` +
		`["file:///a","file:///b","file:///c"]},` + meta2026 + `}}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(listen))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	gauge := func(want float64) func(map[string]*dto.MetricFamily) error {
		return func(mfs map[string]*dto.MetricFamily) error {
			if got := labelled(mfs, "switchyard_edge_listen_subscriptions")[""]; got != want {
				return fmt.Errorf("switchyard_edge_listen_subscriptions = %v, want %v", got, want)
			}
			return nil
		}
	}
	waitFor(t, g.e, gauge(3))
	cancel()
	waitFor(t, g.e, gauge(0))
}

// TestEdgeMetricsSDKRefusals: requests the SDK refuses before any handler
// of the edge runs (a header that does not match the body) are counted
// too, audit trail or not.
func TestEdgeMetricsSDKRefusals(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},` + meta2026 + `}}`
	if code, out, _ := g.post(body, hdr2026("tools/call", "up__other")...); !strings.Contains(out, "-32020") {
		t.Fatalf("HTTP %d %s, want a -32020 answer", code, out)
	}
	waitFor(t, g.e, func(mfs map[string]*dto.MetricFamily) error {
		if got := labelled(mfs, "switchyard_edge_request_duration_seconds")["tools/call header_mismatch"]; got != 1 {
			return fmt.Errorf("tools/call header_mismatch: %v, want 1", got)
		}
		return nil
	})
}

// TestEdgeLogAnswered: with debug logging, each answered request is one
// "request answered" record with its request id, code and the client's
// trace id, and nothing of its arguments.
func TestEdgeLogAnswered(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) { reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)}) }, &rigOpts{sse: true, log: log})
	nc = g.nc
	body := `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"up__x","arguments":{"password":"hunter2"},` + meta2026 + `}}`
	g.post(body, append(hdr2026("tools/call", "up__x"), "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")...)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if i := strings.Index(out, `"msg":"request answered"`); i >= 0 {
			line := out[strings.LastIndex(out[:i], "\n")+1:]
			line = line[:strings.Index(line, "\n")]
			for _, want := range []string{`"request_id":"\"req-7\""`, `"code":0`, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`, `"method":"tools/call"`} {
				if !strings.Contains(line, want) {
					t.Errorf("no %s in %s", want, line)
				}
			}
			if strings.Contains(out, "hunter2") {
				t.Error("arguments in the log")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request record in %s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockedWriter serializes writes to a buffer the test reads.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
