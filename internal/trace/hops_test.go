package trace

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// hops is a miniature gateway: an edge, a router and a worker, each with
// its own NATS connection and Provider, wired with this package's helpers
// as docs/tracing.md tells the roles to, all recording into rec.
type hops struct {
	rec                  *tracetest.SpanRecorder
	edge, router, worker *Provider
	nc                   *nats.Conn // the edge's
	// upstreamMeta receives the _meta the worker would send upstream.
	upstreamMeta chan []byte
	// routeHeader receives the route message's headers as the router got them.
	routeHeader chan nats.Header
}

func newHops(t *testing.T, enabled bool) *hops {
	t.Helper()
	srv := natstest.Start(t)
	h := &hops{
		rec:          tracetest.NewSpanRecorder(),
		nc:           natstest.Connect(t, srv),
		upstreamMeta: make(chan []byte, 1),
		routeHeader:  make(chan nats.Header, 1),
	}
	prov := func(role string) *Provider {
		p, err := New(Config{Enabled: enabled}, role, WithSpanProcessor(h.rec), WithInstance(role+"-1"))
		if err != nil {
			t.Fatalf("New(%s): %v", role, err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		return p
	}
	h.edge, h.router, h.worker = prov("edge"), prov("router"), prov("worker")

	rnc := natstest.Connect(t, srv)
	if _, err := rnc.Subscribe("t.route.*", func(m *nats.Msg) {
		h.routeHeader <- maps.Clone(m.Header)
		// As router.onCall: the route span replaces the edge's context in
		// the received headers, which the forwarded message copies.
		ctx, sp := h.router.StartRoute(context.Background(), m.Header, Call{Method: "tools/call", Tenant: "acme"})
		defer sp.End()
		m.Header = h.router.Inject(ctx, m.Header)
		sp.SetPlacement("up1", "w1")
		fwd := &nats.Msg{Subject: "t.worker.w1", Reply: m.Reply, Data: m.Data,
			Header: Copy(nats.Header{"Sy-Reply-To": []string{m.Reply}}, m.Header)}
		if err := rnc.PublishMsg(fwd); err != nil {
			sp.SetError(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	wnc := natstest.Connect(t, srv)
	if _, err := wnc.Subscribe("t.worker.*", func(m *nats.Msg) {
		// As the worker's onRequest: the work runs in the span WrapUpstream
		// starts, and the upstream request's _meta carries it (SEP-414).
		work := func(ctx context.Context) *proto.Reply {
			h.upstreamMeta <- h.worker.InjectMetaMembers(ctx, []byte(`"progressToken":3`))
			return &proto.Reply{Result: []byte(`{"content":[]}`)}
		}
		work = h.worker.WrapUpstream(m.Header, Call{Method: "tools/call", Name: "echo", Tenant: "acme", Upstream: "up1", Worker: "w1"}, work)
		go func() {
			r := work(context.Background())
			_ = m.Respond(r.Result)
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := rnc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

// call runs one tools/call through the three hops as the edge would.
func (h *hops) call(t *testing.T, hdr http.Header, meta Meta) {
	t.Helper()
	ctx, sp := h.edge.StartEdge(t.Context(), hdr, meta, Call{
		Method: "tools/call", Name: "up1__echo", RequestID: json.RawMessage(`"r-7"`),
		Protocol: "2025-11-25", Tenant: "acme",
	})
	msg := &nats.Msg{Subject: "t.route.acme", Data: []byte("call"), Header: h.edge.Inject(ctx, nil)}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, err := h.nc.RequestMsgWithContext(rctx, msg)
	if err != nil {
		sp.SetError(err)
		sp.End()
		t.Fatalf("request: %v", err)
	}
	sp.End()
	if string(rep.Data) != `{"content":[]}` {
		t.Fatalf("reply %q", rep.Data)
	}
}

// spans waits for n ended spans and returns them by role.
func (h *hops) spans(t *testing.T, n int) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.rec.Ended()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans ended, want %d", len(h.rec.Ended()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range h.rec.Ended() {
		var role string
		for _, kv := range s.Resource().Attributes() {
			if kv.Key == "switchyard.role" {
				role = kv.Value.AsString()
			}
		}
		if _, dup := out[role]; dup {
			t.Fatalf("two spans of role %q", role)
		}
		out[role] = s
	}
	if len(out) != n {
		t.Fatalf("spans by role: %v", out)
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit(), true
		}
	}
	return "", false
}

// checkChain asserts the edge -> router -> worker chain of one trace and
// returns the edge span.
func checkChain(t *testing.T, h *hops) sdktrace.ReadOnlySpan {
	t.Helper()
	sp := h.spans(t, 3)
	edge, router, worker := sp["edge"], sp["router"], sp["worker"]
	if edge == nil || router == nil || worker == nil {
		t.Fatalf("spans by role: %v", sp)
	}
	tid := edge.SpanContext().TraceID()
	for role, s := range sp {
		if s.SpanContext().TraceID() != tid {
			t.Errorf("%s span trace id %s, edge's %s", role, s.SpanContext().TraceID(), tid)
		}
	}
	if router.Parent().SpanID() != edge.SpanContext().SpanID() || !router.Parent().IsRemote() {
		t.Errorf("router parent %v, want the edge span %v (remote)", router.Parent(), edge.SpanContext().SpanID())
	}
	if worker.Parent().SpanID() != router.SpanContext().SpanID() || !worker.Parent().IsRemote() {
		t.Errorf("worker parent %v, want the router span %v (remote)", worker.Parent(), router.SpanContext().SpanID())
	}
	for _, c := range []struct {
		s    sdktrace.ReadOnlySpan
		name string
		kind oteltrace.SpanKind
	}{
		{edge, "tools/call up1__echo", oteltrace.SpanKindServer},
		{router, "route tools/call", oteltrace.SpanKindInternal},
		{worker, "tools/call echo", oteltrace.SpanKindClient},
	} {
		if c.s.Name() != c.name || c.s.SpanKind() != c.kind {
			t.Errorf("span %q kind %v, want %q kind %v", c.s.Name(), c.s.SpanKind(), c.name, c.kind)
		}
		if _, ok := attrOf(c.s, "mcp.session.id"); ok {
			t.Errorf("span %q records mcp.session.id", c.s.Name())
		}
	}
	for _, c := range []struct {
		s         sdktrace.ReadOnlySpan
		key, want string
	}{
		{edge, AttrMethod, "tools/call"}, {edge, AttrToolName, "up1__echo"}, {edge, AttrOperation, "execute_tool"},
		{edge, AttrRequestID, "r-7"}, {edge, AttrProtocol, "2025-11-25"}, {edge, AttrTenant, "acme"},
		{edge, AttrNetTransport, "tcp"},
		{router, AttrMethod, "tools/call"}, {router, AttrUpstream, "up1"}, {router, AttrWorker, "w1"},
		{worker, AttrToolName, "echo"}, {worker, AttrUpstream, "up1"},
	} {
		if got, _ := attrOf(c.s, c.key); got != c.want {
			t.Errorf("span %q %s = %q, want %q", c.s.Name(), c.key, got, c.want)
		}
	}
	// The upstream is asked to continue the worker's span (SEP-414 _meta),
	// and the request's other _meta members stay.
	meta := <-h.upstreamMeta
	var m map[string]any
	if err := json.Unmarshal([]byte("{"+string(meta)+"}"), &m); err != nil {
		t.Fatalf("upstream _meta %s: %v", meta, err)
	}
	want := "00-" + tid.String() + "-" + worker.SpanContext().SpanID().String() + "-01"
	if m[KeyTraceparent] != want || m["progressToken"] != 3.0 {
		t.Errorf("upstream _meta %s, want traceparent %s and progressToken 3", meta, want)
	}
	return edge
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	clientTP    = "00-" + clientTrace + "-" + clientSpan + "-01"
)

func TestTraceHopsAcrossNATS(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		h := newHops(t, true)
		h.call(t, nil, Meta{})
		edge := checkChain(t, h)
		if edge.Parent().IsValid() {
			t.Errorf("edge span has parent %v; the client sent none", edge.Parent())
		}
	})
	continued := func(t *testing.T, h *hops) sdktrace.ReadOnlySpan {
		t.Helper()
		edge := checkChain(t, h)
		if got := edge.SpanContext().TraceID().String(); got != clientTrace {
			t.Errorf("trace id %s, want the client's %s", got, clientTrace)
		}
		if p := edge.Parent(); p.SpanID().String() != clientSpan || !p.IsRemote() {
			t.Errorf("edge parent %v, want the client's span %s", p, clientSpan)
		}
		return edge
	}
	t.Run("http-header", func(t *testing.T) {
		h := newHops(t, true)
		hdr := http.Header{}
		hdr.Set("Traceparent", clientTP)
		hdr.Set("Tracestate", "rojo=00f067aa0ba902b7")
		h.call(t, hdr, Meta{})
		edge := continued(t, h)
		if ts := edge.SpanContext().TraceState().String(); ts != "rojo=00f067aa0ba902b7" {
			t.Errorf("tracestate %q not continued", ts)
		}
	})
	t.Run("meta-raw", func(t *testing.T) {
		h := newHops(t, true)
		h.call(t, nil, Meta{Raw: json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"` + clientTP + `"}`)})
		continued(t, h)
	})
	t.Run("meta-in-params", func(t *testing.T) {
		h := newHops(t, true)
		h.call(t, nil, Meta{Params: json.RawMessage(`{"name":"x","arguments":{"traceparent":"no"},"_meta":{"traceparent":"` + clientTP + `"}}`)})
		continued(t, h)
	})
	t.Run("meta-map", func(t *testing.T) {
		h := newHops(t, true)
		h.call(t, nil, Meta{Map: map[string]any{"traceparent": clientTP, "progressToken": 1.0}})
		continued(t, h)
	})
	t.Run("meta-wins-http-linked", func(t *testing.T) {
		h := newHops(t, true)
		hdr := http.Header{}
		other := "00-11111111111111111111111111111111-2222222222222222-01"
		hdr.Set("Traceparent", other)
		h.call(t, hdr, Meta{Raw: json.RawMessage(`{"traceparent":"` + clientTP + `"}`)})
		edge := continued(t, h)
		if l := edge.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "11111111111111111111111111111111" {
			t.Errorf("edge links %v, want the HTTP header's context", l)
		}
	})
	t.Run("client-not-sampled", func(t *testing.T) {
		// Parent-based sampling: nothing is recorded, but the decision and
		// the trace id still travel to the upstream.
		h := newHops(t, true)
		hdr := http.Header{}
		hdr.Set("Traceparent", "00-"+clientTrace+"-"+clientSpan+"-00")
		h.call(t, hdr, Meta{})
		meta := <-h.upstreamMeta
		if !strings.Contains(string(meta), `"traceparent":"00-`+clientTrace+"-") || !strings.Contains(string(meta), `-00"`) {
			t.Errorf("upstream _meta %s: want the client's trace, not sampled", meta)
		}
		if n := len(h.rec.Ended()); n != 0 {
			t.Errorf("%d spans recorded for an unsampled trace", n)
		}
	})
	t.Run("off", func(t *testing.T) {
		h := newHops(t, false)
		hdr := http.Header{}
		hdr.Set("Traceparent", clientTP)
		h.call(t, hdr, Meta{})
		if rh := <-h.routeHeader; rh != nil {
			t.Errorf("route message headers %v with tracing off, want none", rh)
		}
		if meta := <-h.upstreamMeta; string(meta) != `"progressToken":3` {
			t.Errorf("upstream _meta %s changed with tracing off", meta)
		}
		if n := len(h.rec.Started()); n != 0 {
			t.Errorf("%d spans started with tracing off", n)
		}
	})
}
