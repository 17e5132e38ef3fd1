package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/edge"
	"github.com/switchyard-mcp/switchyard/proto"
)

// roundRobin is a load balancer in the client: each request goes to the
// next of hosts, whatever session it belongs to.
type roundRobin struct {
	hosts atomic.Pointer[[]string]
	next  atomic.Uint64
	base  http.RoundTripper
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	hosts := *rr.hosts.Load()
	h := hosts[rr.next.Add(1)%uint64(len(hosts))]
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = h, h
	return rr.base.RoundTrip(r)
}

// TestIntegrationSessionAnyEdge: an official-SDK 2025-era session behind
// a round-robin balancer over two edges: every request may land on
// either edge, and the session goes on, with no new initialize; when one
// edge stops, the other serves the session alone.
func TestIntegrationSessionAnyEdge(t *testing.T) {
	fxURL, _ := startFixtureHTTP(t)
	cfg := loadConfig(t, fmt.Sprintf("upstreams:\n  - name: fixture\n    url: %s\n", fxURL))
	g := startGateway(t, cfg)

	// Two more edges on the same bus (the gateway's own stays unused).
	startEdge := func(id string) (addr string, stop func()) {
		ecfg := edge.FromFile(cfg)
		ecfg.ID, ecfg.Listen = id, "127.0.0.1:0"
		e, err := edge.New(ecfg, g.connect(t, proto.IdentityEdge), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		stopped := false
		stop = func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
			}
		}
		t.Cleanup(stop)
		eventually(t, 20*time.Second, func() error {
			if !e.Ready() {
				return fmt.Errorf("edge %s not ready", id)
			}
			return nil
		})
		return e.Addr(), stop
	}
	a1, stop1 := startEdge("edge-one")
	a2, _ := startEdge("edge-two")
	rr := &roundRobin{base: http.DefaultTransport}
	rr.hosts.Store(&[]string{a1, a2})
	c := mcp.NewClient(&mcp.Implementation{Name: "rr", Version: "1"}, nil)
	// Retries on: when an edge goes, the client reconnects its GET stream
	// (to the other edge, which adopts the session).
	tr := &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{Transport: rr}, MaxRetries: 5}
	cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
	if err != nil {
		t.Fatalf("connect through the balancer: %v", err)
	}
	defer cs.Close()
	call := func(i int) error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": fmt.Sprint(i)}})
		if err != nil {
			return err
		}
		if res.IsError || text(res) == "" {
			return fmt.Errorf("call %d: %+v", i, res)
		}
		return nil
	}
	for i := range 20 {
		if err := call(i); err != nil {
			t.Fatalf("call %d through the balancer: %v", i, err)
		}
		if i%5 == 0 {
			if _, err := cs.ListTools(t.Context(), nil); err != nil {
				t.Fatalf("tools/list %d: %v", i, err)
			}
		}
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}

	// The first edge goes; the second serves the session alone.
	stop1()
	rr.hosts.Store(&[]string{a2})
	for i := range 10 {
		if err := call(100 + i); err != nil {
			t.Fatalf("call %d after the first edge stopped: %v", i, err)
		}
	}
}
