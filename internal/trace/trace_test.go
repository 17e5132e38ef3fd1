package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestTraceConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		errs []string // substrings of the error; none means valid
	}{
		{"off ignores the rest", Config{Protocol: "udp", SampleRatio: 7}, nil},
		{"http", Config{Enabled: true, Endpoint: "http://collector:4318"}, nil},
		{"https path", Config{Enabled: true, Endpoint: "https://collector/otlp/v1/traces", SampleRatio: 0.25}, nil},
		{"grpc", Config{Enabled: true, Protocol: "grpc", Endpoint: "http://collector:4317"}, nil},
		{"all wrong", Config{Enabled: true, Protocol: "udp", SampleRatio: 1.5, Headers: map[string]string{"a b": "x"}},
			[]string{"protocol", "endpoint is required", "sample_ratio", "header name"}},
		{"no scheme", Config{Enabled: true, Endpoint: "collector:4318"}, []string{"http:// or https://"}},
		{"grpc path", Config{Enabled: true, Protocol: "grpc", Endpoint: "http://c:4317/v1/traces"}, []string{"no path"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: nil, want errors")
			}
			for _, s := range c.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestTraceParseHeadersAndRedact(t *testing.T) {
	h, err := ParseHeaders("api-key=s%3Dcret, x-team = gw ")
	if err != nil || len(h) != 2 || h["api-key"] != "s=cret" || h["x-team"] != "gw" {
		t.Fatalf("ParseHeaders = %v, %v", h, err)
	}
	if _, err := ParseHeaders("a=1,secretwithoutkey"); err == nil || strings.Contains(err.Error(), "secretwithoutkey") {
		t.Errorf("bad entry: err %v (must not echo it)", err)
	}
	if h, err := ParseHeaders(" "); h != nil || err != nil {
		t.Errorf("empty: %v, %v", h, err)
	}
	c := Config{Headers: map[string]string{"api-key": "s=cret"}}
	if r := c.Redacted(); r.Headers["api-key"] != "REDACTED" || c.Headers["api-key"] != "s=cret" {
		t.Errorf("Redacted %v, original %v", r.Headers, c.Headers)
	}
}

// TestTraceOTLPHTTPExport runs the real exporter against a fake collector:
// Shutdown flushes the batch to <endpoint>/v1/traces with the headers.
func TestTraceOTLPHTTPExport(t *testing.T) {
	type got struct {
		path, ctype, key string
		body             []byte
	}
	var mu sync.Mutex
	var reqs []got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, got{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Api-Key"), b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	p, err := New(Config{Enabled: true, Endpoint: srv.URL, Headers: map[string]string{"api-key": "k1"}}, "edge")
	if err != nil {
		t.Fatal(err)
	}
	_, sp := p.StartEdge(t.Context(), nil, Meta{}, Call{Method: "tools/call", Name: "exported_tool"})
	sp.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 1 {
		t.Fatalf("%d export requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.path != "/v1/traces" || r.ctype != "application/x-protobuf" || r.key != "k1" ||
		!bytes.Contains(r.body, []byte("tools/call exported_tool")) || !bytes.Contains(r.body, []byte("switchyard-edge")) {
		t.Errorf("export %s %s key %q body %q", r.path, r.ctype, r.key, r.body)
	}
}

// TestTraceExportErrorsLogged: the exporter's errors (reported through
// OpenTelemetry's process-wide handler) reach the role's log.
func TestTraceExportErrorsLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	p, err := New(Config{Enabled: true, Endpoint: "http://127.0.0.1:1"}, "edge", WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(t.Context()) }()
	otel.Handle(errors.New("collector unreachable"))
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), `msg="trace export failed" err="collector unreachable"`) {
		t.Errorf("log: %q", buf.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func TestTraceGRPCExporterBuilds(t *testing.T) {
	p, err := New(Config{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://127.0.0.1:1"}, "router")
	if err != nil || !p.Enabled() {
		t.Fatalf("New grpc: %v", err)
	}
	// Nothing was exported: shutting down does not dial.
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestTraceOffIsInert(t *testing.T) {
	var nilP *Provider
	off, err := New(Config{Endpoint: "not validated when off"}, "edge")
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*Provider{"nil": nilP, "disabled": off} {
		ctx := t.Context()
		hdr := http.Header{"Traceparent": {clientTP}}
		c1, s1 := p.StartEdge(ctx, hdr, Meta{}, Call{Method: "tools/call"})
		c2, s2 := p.StartRoute(ctx, nats.Header{KeyTraceparent: {clientTP}}, Call{Method: "tools/call"})
		c3, s3 := p.StartUpstream(ctx, nil, Call{Method: "tools/call"})
		if c1 != ctx || c2 != ctx || c3 != ctx || s1.Recording() || s2.TraceID() != "" || s3.SpanContext().IsValid() {
			t.Errorf("%s: a span or context was made", name)
		}
		s1.Fail(1, "x")
		s1.SetError(context.Canceled)
		s1.ToolError()
		s1.SetPlacement("u", "w")
		s1.End()
		if p.Enabled() || p.Shutdown(ctx) != nil || p.ForceFlush(ctx) != nil {
			t.Errorf("%s: enabled or failing", name)
		}
		if h := Inject(c1, nil); h != nil {
			t.Errorf("%s: Inject made headers %v", name, h)
		}
	}
}

func newRecorded(t *testing.T) (*Provider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	p, err := New(Config{Enabled: true}, "worker", WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestTraceSpanOutcomes(t *testing.T) {
	p, rec := newRecorded(t)
	for _, c := range []struct {
		name        string
		set         func(Span)
		errType     string
		statusCode  string
		description string
	}{
		{"ok", func(Span) {}, "", "", ""},
		{"proto error", func(s Span) {
			s.SetError(proto.Errorf(proto.CodeUpstreamUnavailable, "upstream down"))
		}, strconv.Itoa(int(proto.CodeUpstreamUnavailable)), strconv.Itoa(int(proto.CodeUpstreamUnavailable)), "upstream down"},
		{"jsonrpc", func(s Span) { s.Fail(-32602, "unknown tool") }, "-32602", "-32602", "unknown tool"},
		{"tool error", func(s Span) { s.ToolError() }, "tool_error", "", "tool_error"},
		{"timeout", func(s Span) { s.SetError(context.DeadlineExceeded) }, "timeout", "", "context deadline exceeded"},
		{"other", func(s Span) { s.SetError(io.ErrUnexpectedEOF) }, "_OTHER", "", "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.Reset()
			_, sp := p.StartUpstream(t.Context(), nil, Call{Method: "resources/read", Name: "file:///x"})
			c.set(sp)
			sp.End()
			s := rec.Ended()[0]
			et, _ := attrOf(s, AttrErrorType)
			sc, _ := attrOf(s, AttrStatusCode)
			if et != c.errType || sc != c.statusCode || s.Status().Description != c.description {
				t.Errorf("error.type %q status_code %q description %q", et, sc, s.Status().Description)
			}
			if (c.errType != "") != (s.Status().Code == codes.Error) {
				t.Errorf("status %v", s.Status())
			}
			// A resource URI is an attribute, never part of the name.
			if uri, _ := attrOf(s, AttrResourceURI); uri != "file:///x" || s.Name() != "resources/read" {
				t.Errorf("name %q uri %q", s.Name(), uri)
			}
		})
	}
}

func TestTracePropagationHelpers(t *testing.T) {
	p, _ := newRecorded(t)
	ctx, sp := p.StartUpstream(t.Context(), nil, Call{Method: "tools/call", Name: "t"})
	defer sp.End()
	tp := "00-" + sp.TraceID() + "-" + sp.SpanContext().SpanID().String() + "-01"

	// nats: a stale tracestate goes; Extract gives back the same context.
	h := Inject(ctx, nats.Header{KeyTracestate: {"stale=1"}, "Other": {"x"}})
	if h.Get(KeyTraceparent) != tp || h[KeyTracestate] != nil || h.Get("Other") != "x" {
		t.Errorf("Inject: %v", h)
	}
	if got := oteltrace.SpanContextFromContext(Extract(t.Context(), h)); got.SpanID() != sp.SpanContext().SpanID() || !got.IsRemote() {
		t.Errorf("Extract: %v", got)
	}
	if got := ExtractHTTP(t.Context(), http.Header{"Traceparent": {tp}}); !oteltrace.SpanContextFromContext(got).IsValid() {
		t.Error("ExtractHTTP found nothing")
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if got := Extract(t.Context(), nats.Header{KeyTraceparent: {bad}}); oteltrace.SpanContextFromContext(got).IsValid() {
			t.Errorf("Extract(%q) made a span context", bad)
		}
	}

	// _meta: the client's keys are replaced, the rest kept in order.
	for _, c := range []struct{ in, want string }{
		{``, `{"traceparent":"` + tp + `"}`},
		{`{}`, `{"traceparent":"` + tp + `"}`},
		{`{"a":1,"traceparent":"00-x","tracestate":"s=1","b":{"c":[2]}}`, `{"a":1,"b":{"c":[2]},"traceparent":"` + tp + `"}`},
		{`{"a":`, `{"a":`}, // not JSON: left alone
	} {
		if got := string(InjectMetaJSON(ctx, json.RawMessage(c.in))); got != c.want {
			t.Errorf("InjectMetaJSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := string(InjectMetaJSON(t.Context(), json.RawMessage(`{"a":1}`))); got != `{"a":1}` {
		t.Errorf("InjectMetaJSON without a span changed _meta: %s", got)
	}
	for _, c := range []struct{ in, want string }{
		{``, `"traceparent":"` + tp + `"`},
		{`"progressToken":"p","traceparent":"old"`, `"progressToken":"p","traceparent":"` + tp + `"`},
		{`"a":`, `"a":`},
	} {
		if got := string(InjectMetaMembers(ctx, []byte(c.in))); got != c.want {
			t.Errorf("InjectMetaMembers(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := Copy(nil, nats.Header{"Other": {"x"}}); got != nil {
		t.Errorf("Copy without trace context made %v", got)
	}
	if got := Copy(nats.Header{KeyTracestate: {"stale"}}, h); got.Get(KeyTraceparent) != tp || got[KeyTracestate] != nil || got["Other"] != nil {
		t.Errorf("Copy: %v", got)
	}
	m := InjectMetaMap(ctx, map[string]any{"tracestate": "old=1", "k": "v"})
	if m[KeyTraceparent] != tp || m[KeyTracestate] != nil || m["k"] != "v" {
		t.Errorf("InjectMetaMap: %v", m)
	}
	if got := ExtractMeta(t.Context(), Meta{Raw: json.RawMessage(`{"traceparent":"` + tp + `"}`)}); oteltrace.SpanContextFromContext(got).TraceID().String() != sp.TraceID() {
		t.Error("ExtractMeta(raw) lost the trace")
	}
	for _, params := range []string{`null`, `{"arguments":{"traceparent":"` + tp + `"}}`, `{"_meta":null,"x":"traceparent"}`} {
		if got := ExtractMeta(t.Context(), Meta{Params: json.RawMessage(params)}); oteltrace.SpanContextFromContext(got).IsValid() {
			t.Errorf("ExtractMeta(params %s) found a trace context outside _meta", params)
		}
	}
	if got := ExtractMeta(t.Context(), Meta{Raw: json.RawMessage(`{"traceparent":`)}); oteltrace.SpanContextFromContext(got).IsValid() {
		t.Error("ExtractMeta read malformed JSON")
	}
}

func TestTraceWrapUpstream(t *testing.T) {
	p, rec := newRecorded(t)
	for _, c := range []struct {
		name, method string
		reply        *proto.Reply
		errType      string
	}{
		{"ok", "tools/call", &proto.Reply{Result: []byte(`{"content":[],"isError":false}`)}, ""},
		{"tool error", "tools/call", &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"\"isError\":true"}],"isError":true}`)}, ErrTypeToolError},
		{"isError in text only", "tools/call", &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"\"isError\":true"}]}`)}, ""},
		{"not a tool", "prompts/get", &proto.Reply{Result: []byte(`{"isError":true}`)}, ""},
		{"wire error", "tools/call", &proto.Reply{Error: proto.Errorf(proto.CodeTimeout, "slow")}, strconv.Itoa(int(proto.CodeTimeout))},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.Reset()
			var inside oteltrace.SpanContext
			work := p.WrapUpstream(nil, Call{Method: c.method, Name: "x"}, func(ctx context.Context) *proto.Reply {
				inside = oteltrace.SpanContextFromContext(ctx)
				return c.reply
			})
			if r := work(t.Context()); r != c.reply {
				t.Fatal("reply replaced")
			}
			s := rec.Ended()
			if len(s) != 1 || !s[0].SpanContext().Equal(inside) {
				t.Fatalf("%d spans; work ran in %v", len(s), inside)
			}
			if et, _ := attrOf(s[0], AttrErrorType); et != c.errType {
				t.Errorf("error.type %q, want %q", et, c.errType)
			}
		})
	}
	off, _ := New(Config{}, "worker")
	var ran bool
	work := func(context.Context) *proto.Reply { ran = true; return &proto.Reply{} }
	off.WrapUpstream(nil, Call{Method: "tools/call"}, work)(t.Context())
	if !ran {
		t.Error("off: work not run")
	}
}

func TestTraceLogging(t *testing.T) {
	p, _ := newRecorded(t)
	ctx, sp := p.StartUpstream(t.Context(), nil, Call{Method: "tools/call", Name: "t"})
	defer sp.End()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	log.InfoContext(ctx, "call done")
	log.InfoContext(t.Context(), "no span")
	log.Info("attr", LogAttr(ctx))
	log.Info("no attr", LogAttr(t.Context()))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := `"trace_id":"` + sp.TraceID() + `"`
	if len(lines) != 4 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], `"span_id":"`) ||
		strings.Contains(lines[1], "trace_id") || !strings.Contains(lines[2], want) || strings.Contains(lines[3], "trace_id") {
		t.Errorf("log lines:\n%s", buf.String())
	}
}

var _ sdktrace.SpanProcessor = (*tracetest.SpanRecorder)(nil)
