package trace

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The hot path of every hop with tracing off, and its cost on: run with
//
//	cd internal && go test -run '^$' -bench . -benchmem ./trace/
//
// docs/tracing.md records the numbers.

var (
	benchHTTP = http.Header{"Content-Type": {"application/json"}, "Mcp-Session-Id": {"abc"}}
	benchMeta = Meta{Raw: json.RawMessage(`{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)}
	benchCall = Call{Method: "tools/call", Name: "up1__echo", RequestID: json.RawMessage(`7`), Protocol: "2026-07-28", Tenant: "acme"}
)

// hopsOnce is one call's tracing work at all three hops: the edge's span
// and route headers, the router's span and forwarded headers, the
// worker's span and upstream _meta.
// fwd stands for the router's forwarded headers, made by the router
// whether or not tracing is on.
func hopsOnce(ctx context.Context, p *Provider, meta json.RawMessage, fwd nats.Header) {
	ectx, es := p.StartEdge(ctx, benchHTTP, benchMeta, benchCall)
	rh := p.Inject(ectx, nil)
	rctx, rs := p.StartRoute(context.Background(), rh, benchCall)
	rs.SetPlacement("up1", "w1")
	wh := p.Inject(rctx, fwd)
	rs.End()
	wctx, ws := p.StartUpstream(context.Background(), wh, Call{Method: "tools/call", Name: "echo", Upstream: "up1"})
	_ = p.InjectMetaJSON(wctx, meta)
	ws.End()
	es.End()
}

func BenchmarkOffHops(b *testing.B) {
	p, _ := New(Config{}, "edge")
	ctx := context.Background()
	meta := json.RawMessage(`{"progressToken":1}`)
	fwd := nats.Header{"Sy-Reply-To": {"_INBOX.x"}}
	b.ReportAllocs()
	for b.Loop() {
		hopsOnce(ctx, p, meta, fwd)
	}
}

func BenchmarkOffStartEnd(b *testing.B) {
	p, _ := New(Config{}, "edge")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, s := p.StartEdge(ctx, benchHTTP, benchMeta, benchCall)
		s.End()
	}
}

// BenchmarkOffInjectExtract: the header work of one hop with tracing off
// (the Provider's Inject returns at once; Extract finds no traceparent).
func BenchmarkOffInjectExtract(b *testing.B) {
	p, _ := New(Config{}, "router")
	ctx := context.Background()
	h := nats.Header{"Sy-Reply-To": {"_INBOX.x"}}
	b.ReportAllocs()
	for b.Loop() {
		h = p.Inject(ctx, h)
		_ = Extract(ctx, h)
	}
}

// discard is an exporter that drops every batch: the cost measured is the
// gateway's, not a collector's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func benchOn(b *testing.B, ratio float64) {
	sp := sdktrace.NewBatchSpanProcessor(discard{})
	p, err := New(Config{Enabled: true, SampleRatio: ratio}, "edge", WithSpanProcessor(sp))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	ctx := context.Background()
	meta := json.RawMessage(`{"progressToken":1}`)
	fwd := nats.Header{"Sy-Reply-To": {"_INBOX.x"}}
	b.ReportAllocs()
	for b.Loop() {
		hopsOnce(ctx, p, meta, fwd)
	}
}

// BenchmarkOnHopsSampled: every call recorded (batch processor, spans
// dropped by the exporter).
func BenchmarkOnHopsSampled(b *testing.B) { benchOn(b, 1) }

// BenchmarkOnHopsUnsampled: tracing on, the call not sampled (a ratio of
// one in a billion): the span contexts are still made and propagated.
func BenchmarkOnHopsUnsampled(b *testing.B) { benchOn(b, 1e-9) }

func BenchmarkOnInjectExtract(b *testing.B) {
	p, _ := newRecordedB(b)
	ctx, s := p.StartUpstream(context.Background(), nil, benchCall)
	defer s.End()
	b.ReportAllocs()
	for b.Loop() {
		h := Inject(ctx, nats.Header{})
		_ = Extract(context.Background(), h)
	}
}

func newRecordedB(b *testing.B) (*Provider, error) {
	return New(Config{Enabled: true}, "worker", WithSpanProcessor(sdktrace.NewBatchSpanProcessor(discard{})))
}
