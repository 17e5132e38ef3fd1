package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/proto"
)

// BenchmarkCall is one sequential tools/call through every role of an
// in-process gateway (edge, router, upstream-worker, tenancy-svc on
// in-process NATS) to an in-memory go-sdk upstream (httptest), next to the
// same call made directly to that upstream. The client is plain HTTP
// POSTs on an initialized session, so the numbers are the server sides'
// cost: gateway/op minus direct/op is what Switchyard adds, CPU included
// (all of it runs in this process; allocs/op counts every role).
// side=gateway records an audit event per call (the default);
// side=gateway-no-audit is a second gateway with the audit trail off.
func BenchmarkCall(b *testing.B) {
	srv := echoServer()
	get := func(*http.Request) *mcp.Server { return srv }
	stateful := mcp.NewStreamableHTTPHandler(get, nil)
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	// Like the edge, one endpoint serves both eras.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= v2026 {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	b.Cleanup(up.Close)
	g := startGateway(b, loadConfig(b, fmt.Sprintf("upstreams:\n  - name: mem\n    url: %s\n", up.URL)))
	quiet := startGateway(b, loadConfig(b, fmt.Sprintf("audit: {enabled: false}\nupstreams:\n  - name: mem\n    url: %s\n", up.URL)))
	for _, era := range []string{v2025, v2026} {
		for _, side := range []struct{ name, url, tool string }{
			{"direct", up.URL, "echo"},
			{"gateway", g.url + "/mcp", "mem__echo"},
			{"gateway-no-audit", quiet.url + "/mcp", "mem__echo"},
		} {
			b.Run("protocol="+era+"/side="+side.name, func(b *testing.B) {
				c := newRawClient(b, side.url, era)
				body := c.callBody(side.tool)
				c.post(body) // first call: the worker opens its upstream session
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c.post(body)
				}
			})
		}
	}
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	return s
}

// rawClient speaks streamable HTTP by hand: one session (2025) or none
// (2026), one POST per call, the response read whole.
type rawClient struct {
	b       testing.TB
	url, pv string
	sid     string
	hc      *http.Client
}

func newRawClient(b testing.TB, url, pv string) *rawClient {
	c := &rawClient{b: b, url: url, pv: pv, hc: &http.Client{}}
	if pv == v2025 {
		h := c.do(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, "", "")
		c.sid = h.Get("Mcp-Session-Id")
		c.do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "")
	}
	return c
}

type callBody struct {
	data []byte
	name string
}

func (c *rawClient) callBody(tool string) callBody {
	meta := ""
	if c.pv == v2026 {
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}`
	}
	return callBody{[]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"}` + meta + `}}`), tool}
}

func (c *rawClient) post(cb callBody) {
	c.do(string(cb.data), "tools/call", cb.name)
}

func (c *rawClient) do(body, method, name string) http.Header {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if c.pv == v2026 || c.sid != "" {
		req.Header.Set("Mcp-Protocol-Version", c.pv)
	}
	if c.pv == v2026 && method != "" {
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.b.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || bytes.Contains(data, []byte(`"error"`)) || bytes.Contains(data, []byte(`"isError":true`)) {
		c.b.Fatalf("%s: HTTP %d %s", c.url, resp.StatusCode, data)
	}
	return resp.Header
}

// BenchmarkAuditIngestServing measures audit ingest while the gateway
// serves calls: an in-process gateway (audit on, its edge recording an
// event per call into the same stream) serves sequential 2026-07-28
// tools/call from 4 clients, while a second audit.Publisher on the same
// NATS server records b.N events as fast as the stream acknowledges them
// (it backs off while its buffer is more than half full, so nothing is
// dropped). Reported: events/s (the second publisher's, acknowledged),
// stream-events/s (everything the stream stored meanwhile, the gateway's
// own events included) and calls/s served meanwhile.
func BenchmarkAuditIngestServing(b *testing.B) {
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	b.Cleanup(up.Close)
	g := startGateway(b, loadConfig(b, fmt.Sprintf("upstreams:\n  - name: mem\n    url: %s\n", up.URL)))
	nc := g.connect(b, proto.IdentityEdge) // edges publish audit events
	pub, err := audit.NewPublisher(nc, audit.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(ctx) }()
	defer func() { cancel(); <-pubDone }()

	var calls atomic.Int64
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for range 4 {
		c := newRawClient(b, g.url+"/mcp", v2026)
		body := c.callBody("mem__echo")
		c.post(body)
		clients.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.post(body)
				calls.Add(1)
			}
		})
	}
	js, _ := jetstream.New(nc)
	stored := func() uint64 {
		st, err := js.Stream(b.Context(), audit.DefaultStream)
		if err != nil {
			b.Fatal(err)
		}
		info, err := st.Info(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		return info.State.Msgs
	}
	ev := audit.Event{Tenant: "default", Principal: "bench", Method: "tools/call", Upstream: "mem", Name: "echo",
		Outcome: audit.OutcomeOK, Duration: time.Millisecond, RequestBytes: 40, ResponseBytes: 120, EdgeID: "bench"}
	b.ReportAllocs()
	b.ResetTimer()
	start, calls0, stored0 := time.Now(), calls.Load(), stored()
	for i := 0; i < b.N; i++ {
		for pub.Stats().Buffered > audit.DefaultBuffer/2 {
			time.Sleep(50 * time.Microsecond)
		}
		ev.Time = time.Now()
		pub.Record(&ev)
	}
	for s := pub.Stats(); s.Published+s.Dropped() < s.Recorded; s = pub.Stats() {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	clients.Wait()
	if s := pub.Stats(); s.Dropped() > 0 {
		b.Fatalf("%d events dropped: %+v", s.Dropped(), s)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(stored()-stored0)/elapsed.Seconds(), "stream-events/s")
	b.ReportMetric(float64(calls.Load()-calls0)/elapsed.Seconds(), "calls/s")
}
