package app

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

func TestAppPrintConfigRedactsEnv(t *testing.T) {
	cfg := &config.File{Upstreams: []config.Upstream{{Name: "a", Command: []string{"x"}, Env: map[string]string{"API_KEY": "s3cret"}}}}
	var b bytes.Buffer
	if code := PrintConfig(&b, cfg); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(b.String(), "s3cret") || !strings.Contains(b.String(), "API_KEY") {
		t.Fatalf("got:\n%s", b.String())
	}
	if cfg.Upstreams[0].Env["API_KEY"] != "s3cret" {
		t.Fatal("the config itself was changed")
	}
}

func TestGCDefaults(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.DiscardHandler)
	t.Setenv("GOGC", "150")
	gcDefaults(log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: gc percent %d, want it left alone (100)", got)
	}
	t.Setenv("GOGC", "")
	gcDefaults(log)
	if got := debug.SetGCPercent(100); got != DefaultGOGC {
		t.Fatalf("GOGC unset: gc percent %d, want %d", got, DefaultGOGC)
	}
}

func TestAppPrintConfigRedactsTracingHeaders(t *testing.T) {
	cfg := &config.File{Tracing: trace.Config{Enabled: true, Endpoint: "http://otel:4318", Headers: map[string]string{"x-api-key": "s3cret"}}}
	var b bytes.Buffer
	if code := PrintConfig(&b, cfg); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(b.String(), "s3cret") || !strings.Contains(b.String(), "x-api-key: REDACTED") {
		t.Fatalf("got:\n%s", b.String())
	}
	if cfg.Tracing.Headers["x-api-key"] != "s3cret" {
		t.Fatal("the config itself was changed")
	}
}

func TestAppTracerAndLogs(t *testing.T) {
	// Off by default: an off provider, no spans.
	tp, err := NewTracer(&config.File{}, "upstream-worker", nil)
	if err != nil || tp.Enabled() {
		t.Fatalf("default tracer: enabled %v, err %v", tp.Enabled(), err)
	}
	rec := tracetest.NewSpanRecorder()
	f := &config.File{Tracing: trace.Config{Enabled: true}, Worker: config.WorkerFile{ID: "w-1"}}
	tp, err = NewTracer(f, "upstream-worker", nil, trace.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer ShutdownTracer(tp, nil)
	ctx, span := tp.StartRoute(t.Context(), nil, trace.Call{Method: "tools/call"})
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans", len(ended))
	}
	res := ended[0].Resource().Set()
	if v, _ := res.Value("switchyard.role"); v.AsString() != "worker" {
		t.Errorf("role %q, want worker", v.AsString())
	}
	if v, _ := res.Value("service.instance.id"); v.AsString() != "w-1" {
		t.Errorf("instance %q, want w-1", v.AsString())
	}
	// The process logger adds the trace id to records logged with the
	// call's context, and nothing to the others.
	var b bytes.Buffer
	log := (&Flags{LogFormat: "json", LogLevel: "info"}).Logger(&b)
	log.WarnContext(ctx, "with span")
	log.Warn("without span")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", b.String())
	}
	want := `"` + proto.LogTraceID + `":"` + span.TraceID() + `"`
	if !strings.Contains(lines[0], want) || strings.Contains(lines[1], proto.LogTraceID) {
		t.Errorf("log lines:\n%s\nwant %s on the first only", b.String(), want)
	}
}
