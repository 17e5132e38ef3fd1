package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/switchyard-mcp/switchyard/proto"
)

// instrumentation is the tracer's instrumentation scope.
const instrumentation = "github.com/switchyard-mcp/switchyard/internal/trace"

// Provider makes the spans of one role. A nil *Provider is off, as is one
// built from a disabled Config: every method then does nothing and costs
// nothing. Safe for concurrent use.
type Provider struct {
	tp          *sdktrace.TracerProvider // nil when off
	tracer      oteltrace.Tracer         // nil when off
	role        string
	once        sync.Once
	errShutdown error
}

// Option adjusts [New].
type Option func(*options)

type options struct {
	sp       sdktrace.SpanProcessor
	instance string
	log      *slog.Logger
}

// WithSpanProcessor makes spans go to sp instead of an OTLP exporter (the
// Endpoint and Protocol are then not used): tests pass a
// tracetest.SpanRecorder. The Provider's Shutdown shuts sp down.
func WithSpanProcessor(sp sdktrace.SpanProcessor) Option {
	return func(o *options) { o.sp = sp }
}

// WithInstance sets service.instance.id (the role's id: the edge's or the
// worker's --id), telling instances of one role apart.
func WithInstance(id string) Option { return func(o *options) { o.instance = id } }

// WithLogger makes export errors go to log (message "trace export
// failed") instead of the OpenTelemetry default (stderr). The
// OpenTelemetry error handler is process-wide: the last enabled Provider
// built with a logger sets it.
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// New builds the Provider of role ("edge", "router", "worker", ...). With
// cfg.Enabled false it returns an off Provider and does nothing else. On,
// it validates cfg and sets up an OTLP exporter (no connection is made
// until the first export; an unreachable collector costs dropped spans and
// logged errors, never a failed call), a batch span processor and
// parent-based sampling with cfg.SampleRatio for roots. Call Shutdown when
// the role stops.
func New(cfg Config, role string, opts ...Option) (*Provider, error) {
	if !cfg.Enabled {
		return &Provider{role: role}, nil
	}
	if role == "" {
		return nil, errors.New("trace: empty role")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sp := o.sp
	if sp == nil {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		exp, err := newExporter(cfg)
		if err != nil {
			return nil, err
		}
		sp = sdktrace.NewBatchSpanProcessor(exp)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", cfg.serviceName()+"-"+role),
		attribute.String("service.namespace", cfg.serviceName()),
		attribute.String("switchyard.role", role),
	}
	if o.instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.instance))
	}
	if o.log != nil {
		log := o.log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("trace export failed", proto.LogErr, err)
		}))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.ratio()))),
		// Schemaless: merged with nothing, so no schema URL can conflict.
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(instrumentation), role: role}, nil
}

func newExporter(cfg Config) (sdktrace.SpanExporter, error) {
	timeout := cfg.ExportTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("trace: endpoint: %w", err)
	}
	// The exporters are built without a context: they dial lazily.
	ctx := context.Background()
	if cfg.Protocol == ProtocolGRPC {
		opts := []otlptracegrpc.Option{
			otlptracegrpc.WithEndpoint(u.Host),
			otlptracegrpc.WithTimeout(timeout),
		}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	path := u.Path
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpoint(u.Host),
		otlptracehttp.WithURLPath(path),
		otlptracehttp.WithTimeout(timeout),
	}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// Enabled reports whether p records spans.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Role returns the role p was built for.
func (p *Provider) Role() string {
	if p == nil {
		return ""
	}
	return p.role
}

// ForceFlush exports every span ended so far, waiting until ctx ends.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Shutdown exports the spans still queued (waiting until ctx ends), then
// stops the exporter; spans started afterwards are dropped. Safe to call
// more than once; later calls return the first one's error.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	p.once.Do(func() { p.errShutdown = p.tp.Shutdown(ctx) })
	return p.errShutdown
}
