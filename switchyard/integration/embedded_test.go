package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// TestIntegrationEmbedded runs every role in this process on embedded NATS
// in front of two real upstreams (the go-sdk everything-server over HTTP
// and over stdio) and the bench fixture.
func TestIntegrationEmbedded(t *testing.T) {
	evURL, evProc := startEverythingHTTP(t)
	fxURL, _ := startFixtureHTTP(t)
	cfg := loadConfig(t, fmt.Sprintf(`
page_size: 1
call_timeout: 30s
upstreams:
  - name: ev-http
    url: %s
  - name: ev-stdio
    command: [%q]
  - name: fixture
    url: %s
    call_timeout: 2s
  - name: bulk
    url: %s
`, evURL, bins.Everything(t), fxURL, fxURL))
	g := startGateway(t, cfg)

	changed := make(chan struct{}, 16)
	cs := connect(t, g.url+"/mcp", v2025, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	direct := connect(t, evURL, v2025, nil)
	evTools, _, err := listAll(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}

	var want []string
	for _, n := range evTools {
		want = append(want, "ev-http__"+n, "ev-stdio__"+n)
	}
	want = append(want, "fixture__echo", "fixture__fail", "fixture__big", "fixture__slow", "bulk__echo", "bulk__fail", "bulk__big", "bulk__slow")
	var names []string
	eventually(t, 20*time.Second, func() error {
		var pages int
		names, pages, err = listAll(t.Context(), cs)
		if err != nil {
			return err
		}
		if pages != len(names) {
			return fmt.Errorf("page size 1 gave %d pages for %d tools", pages, len(names))
		}
		return hasAll(names, want...)
	})
	if len(names) != len(want) {
		t.Fatalf("merged list has %d tools, want %d: %v", len(names), len(want), names)
	}

	t.Run("call each upstream", func(t *testing.T) {
		for _, name := range []string{"ev-http__test_simple_text", "ev-stdio__test_simple_text"} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name})
			if err != nil || res.IsError || !strings.Contains(text(res), "simple text") {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || text(res) != "hi" {
			t.Fatalf("fixture__echo: %v %+v", err, res)
		}
	})
	t.Run("per-hop timing stamps", func(t *testing.T) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "t"},
			Meta: mcp.Meta{hop.MetaKey: true}})
		if err != nil {
			t.Fatal(err)
		}
		stamps, _ := res.Meta[hop.MetaKey].(map[string]any)
		// A call the edge sent on a route grant has no router stamps;
		// one that went through a router has both.
		_, in := stamps[hop.RouterIn]
		_, out := stamps[hop.RouterOut]
		if in != out {
			t.Fatalf("one router stamp of two in %v", stamps)
		}
		var last float64
		for _, name := range hop.Order {
			v, ok := stamps[name].(float64)
			if !in && (name == hop.RouterIn || name == hop.RouterOut) {
				continue
			}
			if !ok || v < last {
				t.Fatalf("stamp %s missing or out of order in %v", name, stamps)
			}
			last = v
		}
	})
	t.Run("unknown tool is -32602", func(t *testing.T) {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nope__nothing"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("isError passes through", func(t *testing.T) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__fail", Arguments: map[string]any{"reason": "on purpose"}})
		if err != nil || !res.IsError || text(res) != fixture.FailurePrefix+"on purpose" {
			t.Fatalf("got %v %+v", err, res)
		}
	})
	t.Run("slow upstream times out naming it", func(t *testing.T) {
		start := time.Now()
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__slow", Arguments: map[string]any{"ms": 20000}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != int64(proto.CodeTimeout) || !strings.Contains(je.Message, "fixture") {
			t.Fatalf("want a timeout naming the upstream, got %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("timeout of 2s took %s", d)
		}
	})
	t.Run("8 MiB result intact", func(t *testing.T) {
		// (Through "bulk", the fixture without fixture's 2s timeout: 8 MiB
		// under the race detector on a loaded machine can take longer.)
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bulk__big", Arguments: map[string]any{"bytes": 8 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(res); got != fixture.Pattern(8<<20) {
			t.Fatalf("result of %d bytes differs from the pattern", len(got))
		}
	})
	t.Run("both eras on both endpoints", func(t *testing.T) {
		for _, version := range []string{v2026, v2025} {
			for _, ep := range []struct{ path, tool string }{{"/mcp", "fixture__echo"}, {"/mcp/fixture", "echo"}} {
				c := connect(t, g.url+ep.path, version, nil)
				if got := c.InitializeResult().ProtocolVersion; got != version {
					t.Fatalf("%s: negotiated %s, want %s", ep.path, got, version)
				}
				names, _, err := listAll(t.Context(), c)
				if err != nil {
					t.Fatalf("%s at %s: list: %v", ep.path, version, err)
				}
				if err := hasAll(names, ep.tool); err != nil {
					t.Fatalf("%s at %s: %v", ep.path, version, err)
				}
				res, err := c.CallTool(t.Context(), &mcp.CallToolParams{Name: ep.tool, Arguments: map[string]any{"text": version}})
				if err != nil || text(res) != version {
					t.Fatalf("%s at %s: call: %v %+v", ep.path, version, err, res)
				}
			}
		}
	})
	t.Run("killed upstream", func(t *testing.T) {
		for len(changed) > 0 {
			<-changed
		}
		evProc.kill()
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ev-http__test_simple_text"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || !strings.Contains(je.Message, "ev-http") || je.Code != int64(proto.CodeUpstreamUnavailable) {
			t.Fatalf("want a clear error naming ev-http, got %v", err)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ev-stdio__test_simple_text"})
		if err != nil || res.IsError {
			t.Fatalf("other upstream: %v %+v", err, res)
		}
		eventually(t, 15*time.Second, func() error {
			names, _, err := listAll(t.Context(), cs)
			if err != nil {
				return err
			}
			for _, n := range names {
				if strings.HasPrefix(n, "ev-http__") {
					return fmt.Errorf("%s still listed", n)
				}
			}
			return nil
		})
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/tools/list_changed")
		}
	})
}
